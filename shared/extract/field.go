package extract

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Field describes one field of an item: where its value comes from
// (exactly one of CSS, XPath, Regex and JSON), how it is cleaned
// (Transform, in order) and what it must be (Type).
type Field struct {
	// Name is the item key; unique within an item, not empty.
	Name string `yaml:"name" json:"name"`
	// CSS is a CSS selector (cascadia, as used by colly and goquery).
	CSS string `yaml:"css,omitempty" json:"css,omitempty"`
	// XPath is an XPath 1.0 expression (antchfx/xpath). It may select
	// elements, attributes (//img/@src) or compute a value (string(//h1)).
	XPath string `yaml:"xpath,omitempty" json:"xpath,omitempty"`
	// Regex is an RE2 regular expression matched on the document body;
	// the value is the first submatch group if the regex has one, else
	// the whole match.
	Regex string `yaml:"regex,omitempty" json:"regex,omitempty"`
	// JSON is a JSON path (see Path) on a JSON body, or on the page's
	// embedded <script type="application/ld+json"> and
	// <script type="application/json"> blocks, tried in document order
	// until the path matches.
	JSON string `yaml:"json,omitempty" json:"json,omitempty"`
	// Attr, for CSS and XPath, is the attribute to take; "" takes the
	// element's text and "html" its inner HTML.
	Attr string `yaml:"attr,omitempty" json:"attr,omitempty"`
	// List keeps every match (a []any); otherwise the first match.
	List bool `yaml:"list,omitempty" json:"list,omitempty"`
	// Required reports a FieldError when the field has no value.
	Required bool `yaml:"required,omitempty" json:"required,omitempty"`
	// Type is the value's type: string (default), number, integer,
	// boolean or url.
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
	// Transform is applied to the values in order, before Type.
	Transform []Transform `yaml:"transform,omitempty" json:"transform,omitempty"`
}

// Field types.
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeURL     = "url"
)

// validTypes lists the valid Field.Type values ("" means string); read only.
var validTypes = []string{TypeString, TypeNumber, TypeInteger, TypeBoolean, TypeURL}

// Transform operations.
const (
	OpTrim          = "trim"           // strip leading and trailing white space
	OpLower         = "lower"          // lower case
	OpUpper         = "upper"          // upper case
	OpCollapseSpace = "collapse_space" // runs of white space to one space, trimmed
	OpNumber        = "number"         // the first number in the text: "$1,299.00" -> 1299
	OpInteger       = "integer"        // the first number, which must be integral
	OpAbsoluteURL   = "absolute_url"   // resolve against the page URL
	OpJoin          = "join"           // all values -> one string joined by Sep
	OpReplace       = "replace"        // RE2 Pattern replaced by With ($1 expands)
)

// validOps lists the valid Transform.Op values; read only.
var validOps = []string{OpTrim, OpLower, OpUpper, OpCollapseSpace, OpNumber, OpInteger, OpAbsoluteURL, OpJoin, OpReplace}

// DefaultJoinSep is the separator of a bare "join".
const DefaultJoinSep = " "

// A Transform is one cleaning step. In YAML it is either a bare operation
// name or a mapping of one operation to its argument:
//
//	transform:
//	  - trim                                   # no argument
//	  - join                                   # joins with " "
//	  - join: ", "                             # joins with ", "
//	  - replace: {pattern: '\s+', with: " "}   # RE2; with may use $1
type Transform struct {
	Op      string `json:"op"`
	Sep     string `json:"sep,omitempty"`     // join
	Pattern string `json:"pattern,omitempty"` // replace
	With    string `json:"with,omitempty"`    // replace
}

// UnmarshalYAML decodes the bare-name or one-key-mapping form. Errors do
// not carry a position: the caller knows the node.
func (t *Transform) UnmarshalYAML(n *yaml.Node) error {
	*t = Transform{}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return fmt.Errorf("transform: missing operation")
		}
		t.Op = n.Value
		switch t.Op {
		case OpJoin:
			t.Sep = DefaultJoinSep
		case OpReplace:
			return fmt.Errorf("transform replace needs {replace: {pattern: ..., with: ...}}")
		}
		return nil
	case yaml.MappingNode:
		if len(n.Content) != 2 {
			return fmt.Errorf("transform: want one operation per list entry, got %d", len(n.Content)/2)
		}
		k, v := n.Content[0], n.Content[1]
		t.Op = k.Value
		switch t.Op {
		case OpJoin:
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return fmt.Errorf("transform join: want a separator string")
			}
			t.Sep = v.Value
			return nil
		case OpReplace:
			if v.Kind != yaml.MappingNode {
				return fmt.Errorf("transform replace: want a mapping {pattern: ..., with: ...}")
			}
			seen := map[string]bool{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				key, val := v.Content[i], v.Content[i+1]
				if seen[key.Value] {
					return fmt.Errorf("transform replace: duplicate key %q", key.Value)
				}
				seen[key.Value] = true
				if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
					return fmt.Errorf("transform replace: %s: want a string", key.Value)
				}
				switch key.Value {
				case "pattern":
					t.Pattern = val.Value
				case "with":
					t.With = val.Value
				default:
					return fmt.Errorf("transform replace: unknown key %q (want pattern, with)", key.Value)
				}
			}
			if !seen["pattern"] {
				return fmt.Errorf("transform replace: missing pattern")
			}
			return nil
		}
		if knownOp(t.Op) {
			return fmt.Errorf("transform %s takes no argument (write it as a bare name)", t.Op)
		}
		return fmt.Errorf("unknown transform %q (want one of %s)", t.Op, strings.Join(validOps, ", "))
	}
	return fmt.Errorf("transform: want a name or a one-key mapping")
}

// MarshalYAML encodes the form UnmarshalYAML reads.
func (t Transform) MarshalYAML() (any, error) {
	switch t.Op {
	case OpJoin:
		return map[string]string{OpJoin: t.Sep}, nil
	case OpReplace:
		return map[string]map[string]string{OpReplace: {"pattern": t.Pattern, "with": t.With}}, nil
	}
	return t.Op, nil
}

func knownOp(op string) bool {
	for _, o := range validOps {
		if o == op {
			return true
		}
	}
	return false
}
