package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A Path is a compiled JSON path: a small subset of JSONPath that covers
// what item extraction needs. It is immutable and safe for concurrent use.
//
// Grammar (a path without a leading $ is relative to the root):
//
//	path     = [ "$" ] { step }
//	step     = "." name | ".*" | ".." ( name | "*" | bracket ) | bracket
//	bracket  = "[" ( "*" | integer | quoted ) "]"
//	quoted   = "'" chars "'" | '"' chars '"'   (\ escapes the next byte)
//
// A name is a run of bytes other than . [ ] ' " * and white space, so
// ld+json keys such as @type and @graph need no quoting. [n] indexes an
// array, negative from the end ([-1] is the last element). [*] and .* select
// every element of an array or every member value of an object, in document
// order. ..name (recursive descent) selects name in the current value and
// in every value below it (in pre-order of the containing values).
type Path struct {
	src   string
	steps []step
}

type stepKind uint8

const (
	stepName    stepKind = iota // .name or ['name']
	stepIndex                   // [n]
	stepWild                    // [*] or .*
	stepDescend                 // .. (followed by another step)
)

type step struct {
	kind  stepKind
	name  string
	index int
}

// maxPathMatches bounds the values a path may select in one document, so
// a pathological path (repeated recursive descent) cannot stall a slave.
const maxPathMatches = 100_000

// ParsePath compiles a JSON path. Errors name the byte offset of the
// problem.
func ParsePath(src string) (*Path, error) {
	p := &Path{src: src}
	i := 0
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("parse json path: empty path")
	}
	if src[0] == '$' {
		i = 1
	} else if src[0] != '.' && src[0] != '[' {
		// A bare first name: "offers.price" is "$.offers.price".
		name, n := scanName(src)
		if n == 0 {
			return nil, pathErr(src, 0, "expected $, a name, . or [")
		}
		p.steps = append(p.steps, step{kind: stepName, name: name})
		i = n
	}
	for i < len(src) {
		switch src[i] {
		case '.':
			if i+1 < len(src) && src[i+1] == '.' {
				p.steps = append(p.steps, step{kind: stepDescend})
				i += 2
				if i >= len(src) {
					return nil, pathErr(src, i, "expected a name, * or [ after ..")
				}
				switch src[i] {
				case '[':
					continue
				case '*':
					p.steps = append(p.steps, step{kind: stepWild})
					i++
					continue
				}
				name, n := scanName(src[i:])
				if n == 0 {
					return nil, pathErr(src, i, "expected a name, * or [ after ..")
				}
				p.steps = append(p.steps, step{kind: stepName, name: name})
				i += n
				continue
			}
			i++
			if i < len(src) && src[i] == '*' {
				p.steps = append(p.steps, step{kind: stepWild})
				i++
				continue
			}
			name, n := scanName(src[i:])
			if n == 0 {
				return nil, pathErr(src, i, "expected a name or * after .")
			}
			p.steps = append(p.steps, step{kind: stepName, name: name})
			i += n
		case '[':
			st, n, err := parseBracket(src, i)
			if err != nil {
				return nil, err
			}
			p.steps = append(p.steps, st)
			i = n
		default:
			return nil, pathErr(src, i, fmt.Sprintf("unexpected %q (want . or [)", src[i]))
		}
	}
	return p, nil
}

func pathErr(src string, off int, msg string) error {
	return fmt.Errorf("parse json path %q: at offset %d: %s", src, off, msg)
}

func isNameByte(c byte) bool {
	switch c {
	case '.', '[', ']', '\'', '"', '*', ' ', '\t', '\n', '\r':
		return false
	}
	return true
}

// scanName returns the name at the start of s and its length in bytes.
func scanName(s string) (string, int) {
	n := 0
	for n < len(s) && isNameByte(s[n]) {
		n++
	}
	return s[:n], n
}

// parseBracket parses the bracket starting at src[i] == '[' and returns the
// step and the offset after the closing bracket.
func parseBracket(src string, i int) (step, int, error) {
	start := i
	i++
	if i >= len(src) {
		return step{}, 0, pathErr(src, i, "unterminated [")
	}
	var st step
	switch c := src[i]; {
	case c == '*':
		st = step{kind: stepWild}
		i++
	case c == '\'' || c == '"':
		quote := c
		i++
		var b strings.Builder
		for {
			if i >= len(src) {
				return step{}, 0, pathErr(src, start, "unterminated quoted name")
			}
			ch := src[i]
			if ch == quote {
				i++
				break
			}
			if ch == '\\' {
				i++
				if i >= len(src) {
					return step{}, 0, pathErr(src, start, "unterminated quoted name")
				}
				ch = src[i]
			}
			b.WriteByte(ch)
			i++
		}
		st = step{kind: stepName, name: b.String()}
	case c == '-' || ('0' <= c && c <= '9'):
		j := i
		if src[j] == '-' {
			j++
		}
		for j < len(src) && '0' <= src[j] && src[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(src[i:j])
		if err != nil {
			return step{}, 0, pathErr(src, i, fmt.Sprintf("bad index %q", src[i:j]))
		}
		st = step{kind: stepIndex, index: n}
		i = j
	default:
		return step{}, 0, pathErr(src, i, "expected *, an integer or a quoted name after [")
	}
	if i >= len(src) || src[i] != ']' {
		return step{}, 0, pathErr(src, i, "expected ]")
	}
	return st, i + 1, nil
}

// String returns the path in canonical form: $ followed by .name (or
// ['name'] when the name needs quoting), [n], [*] and ..
func (p *Path) String() string {
	var b strings.Builder
	b.WriteByte('$')
	for i, st := range p.steps {
		switch st.kind {
		case stepDescend:
			b.WriteString("..")
			continue
		case stepWild:
			b.WriteString("[*]")
		case stepIndex:
			fmt.Fprintf(&b, "[%d]", st.index)
		case stepName:
			_, n := scanName(st.name)
			if n > 0 && n == len(st.name) {
				if i == 0 || p.steps[i-1].kind != stepDescend {
					b.WriteByte('.')
				}
				b.WriteString(st.name)
			} else {
				b.WriteString("['")
				for j := 0; j < len(st.name); j++ {
					if st.name[j] == '\'' || st.name[j] == '\\' {
						b.WriteByte('\\')
					}
					b.WriteByte(st.name[j])
				}
				b.WriteString("']")
			}
		}
	}
	return b.String()
}

// Eval returns the values the path selects in root (a value decoded by
// decodeJSON), in document order. JSON null is selected like any value.
func (p *Path) Eval(root any) ([]any, error) {
	cur := []any{root}
	for _, st := range p.steps {
		var next []any
		for _, v := range cur {
			switch st.kind {
			case stepName:
				if o, ok := v.(*jsonObject); ok {
					if x, ok := o.get(st.name); ok {
						next = append(next, x)
					}
				}
			case stepIndex:
				if a, ok := v.([]any); ok {
					i := st.index
					if i < 0 {
						i += len(a)
					}
					if i >= 0 && i < len(a) {
						next = append(next, a[i])
					}
				}
			case stepWild:
				switch x := v.(type) {
				case []any:
					next = append(next, x...)
				case *jsonObject:
					for _, m := range x.members {
						next = append(next, m.value)
					}
				}
			case stepDescend:
				next = descend(next, v)
			}
			if len(next) > maxPathMatches {
				return nil, fmt.Errorf("eval json path %s: more than %d matches", p.src, maxPathMatches)
			}
		}
		cur = next
		if len(cur) == 0 {
			return nil, nil
		}
	}
	return cur, nil
}

// descend appends v and every value below it, in document order.
func descend(out []any, v any) []any {
	if len(out) > maxPathMatches {
		return out
	}
	out = append(out, v)
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = descend(out, e)
		}
	case *jsonObject:
		for _, m := range x.members {
			out = descend(out, m.value)
		}
	}
	return out
}

// jsonObject is a JSON object that keeps its members in document order, so
// that "the first match" of a path means the first in the document.
type jsonObject struct {
	members []jsonMember
}

type jsonMember struct {
	name  string
	value any
}

// get returns the value of a member; with duplicate names the last wins,
// as in encoding/json.
func (o *jsonObject) get(name string) (any, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].name == name {
			return o.members[i].value, true
		}
	}
	return nil, false
}

// MarshalJSON encodes the object with its members in document order.
func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.name)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// maxJSONDepth bounds the nesting of a decoded document.
const maxJSONDepth = 1000

// decodeJSON decodes one JSON value: objects as *jsonObject, arrays as
// []any, numbers as json.Number, strings, bools and nil.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode json: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsonObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.members = append(o.members, jsonMember{name: k, value: v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// plainJSON converts a decoded value into plain Go values for an Item:
// objects become map[string]any, numbers float64 (int64 when integral and
// exact).
func plainJSON(v any) any {
	switch x := v.(type) {
	case *jsonObject:
		m := make(map[string]any, len(x.members))
		for _, mem := range x.members {
			m[mem.name] = plainJSON(mem.value)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainJSON(e)
		}
		return out
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	default:
		return v
	}
}
