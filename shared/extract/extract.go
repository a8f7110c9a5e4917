// Package extract pulls items out of fetched documents: a list of Fields,
// each with one source (a CSS selector, an XPath expression, an RE2
// regular expression or a JSON path), cleaning transforms and a type.
//
// Design:
//
//   - Compile validates everything up front (selectors parse, regexes
//     compile, types and transforms are known, names are unique) and
//     returns an immutable Extractor that is safe for concurrent use by a
//     slave's workers. Its errors are *CompileError values (joined with
//     errors.Join) that name the field and the offending key, so the rules
//     package can point at the exact line of a rule file.
//   - Extract parses a document at most once for all fields: one HTML tree
//     (golang.org/x/net/html) shared by the goquery document (CSS, as colly's
//     HTMLElement reads it) and by htmlquery (XPath), built only when a CSS,
//     XPath or embedded-JSON field needs it; a JSON body or each embedded
//     JSON block is decoded at most once, also on demand.
//   - JSON is decoded with member order kept, so "the first match" of a
//     path is the first in the document, and evaluated with the small
//     JSON path language of Path.
//   - Values flow through a pipeline: the source yields strings (or JSON
//     values), List keeps all or the first, Transform steps run in order,
//     then Type converts. Items are JSON-encodable: string, float64, int64,
//     bool, []any (and map[string]any for a JSON object taken whole).
//   - A problem with one field never spoils the others: it is a FieldError
//     and the field is left out. A regex or path is RE2 or linear, and
//     match counts are capped, so a rule cannot stall a slave; a panic in a
//     third-party selector engine becomes a FieldError too.
package extract

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xpath"
)

// Item is one extracted item, keyed by field name.
type Item map[string]any

// FieldError reports a required field without a value, or a value that
// failed its transform or type (the field is then left out of the Item).
type FieldError struct {
	Field  string
	Reason string
}

func (e FieldError) Error() string { return "field " + e.Field + ": " + e.Reason }

// Reasons of FieldError that are not about a value.
const ReasonMissing = "missing"

// CompileError is one problem found by Compile.
type CompileError struct {
	Index int    // the field's position in the list given to Compile
	Field string // the field's name, possibly empty
	// Key is the offending key: "name", "css", "xpath", "regex", "json",
	// "attr", "type", "transform[i]", or "" for the field as a whole.
	Key string
	Err error
}

func (e *CompileError) Error() string {
	var b strings.Builder
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q", e.Field)
	} else {
		fmt.Fprintf(&b, "field #%d", e.Index+1)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *CompileError) Unwrap() error { return e.Err }

// maxValues caps the values one field takes from one document.
const maxValues = 10_000

type source uint8

const (
	srcCSS source = iota
	srcXPath
	srcRegex
	srcJSON
)

// Extractor extracts items with a compiled list of fields. It is
// immutable and safe for concurrent use.
type Extractor struct {
	fields   []*compiledField
	needTree bool // a CSS or XPath field exists
}

type compiledField struct {
	Field
	src        source
	css        cascadia.Selector
	xpath      *sync.Pool // of *xpath.Expr: an Expr is not safe for concurrent Evaluate
	re         *regexp.Regexp
	path       *Path
	transforms []compiledTransform
}

type compiledTransform struct {
	Transform
	re *regexp.Regexp
}

// Compile validates fields and returns their Extractor. Every problem is
// reported, each as a *CompileError, joined with errors.Join.
func Compile(fields []Field) (*Extractor, error) {
	e := &Extractor{}
	var errs []error
	seen := map[string]bool{}
	for i, f := range fields {
		fail := func(key string, err error) {
			errs = append(errs, &CompileError{Index: i, Field: f.Name, Key: key, Err: err})
		}
		cf := &compiledField{Field: f}
		cf.Transform = append([]Transform(nil), f.Transform...)
		switch {
		case f.Name == "":
			fail("name", errors.New("empty name"))
		case seen[f.Name]:
			fail("name", fmt.Errorf("duplicate field name %q", f.Name))
		}
		seen[f.Name] = true

		var sources []string
		for _, s := range []struct {
			key, val string
			src      source
		}{{"css", f.CSS, srcCSS}, {"xpath", f.XPath, srcXPath}, {"regex", f.Regex, srcRegex}, {"json", f.JSON, srcJSON}} {
			if s.val != "" {
				sources = append(sources, s.key)
				cf.src = s.src
			}
		}
		switch {
		case len(sources) == 0:
			fail("", errors.New("no source: want one of css, xpath, regex, json"))
		case len(sources) > 1:
			fail(sources[1], fmt.Errorf("more than one source (%s): want exactly one", strings.Join(sources, ", ")))
		default:
			if err := cf.compileSource(); err != nil {
				fail(sources[0], err)
			}
		}
		if f.Attr != "" && (cf.src == srcRegex || cf.src == srcJSON) && len(sources) == 1 {
			fail("attr", errors.New("attr applies only to css and xpath"))
		}
		if f.Type != "" && !contains(validTypes, f.Type) {
			fail("type", fmt.Errorf("unknown type %q (want one of %s)", f.Type, strings.Join(validTypes, ", ")))
		}
		for j, t := range f.Transform {
			ct := compiledTransform{Transform: t}
			key := fmt.Sprintf("transform[%d]", j)
			switch {
			case !knownOp(t.Op):
				fail(key, fmt.Errorf("unknown transform %q (want one of %s)", t.Op, strings.Join(validOps, ", ")))
			case t.Op == OpReplace:
				if t.Pattern == "" {
					fail(key, errors.New("replace: empty pattern"))
					break
				}
				re, err := regexp.Compile(t.Pattern)
				if err != nil {
					fail(key, fmt.Errorf("replace: compile pattern: %w", err))
					break
				}
				ct.re = re
			}
			cf.transforms = append(cf.transforms, ct)
		}
		if cf.src == srcCSS || cf.src == srcXPath {
			e.needTree = true
		}
		e.fields = append(e.fields, cf)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

func (cf *compiledField) compileSource() (err error) {
	switch cf.src {
	case srcCSS:
		sel, err := cascadia.Compile(cf.CSS)
		if err != nil {
			return fmt.Errorf("compile css selector: %w", err)
		}
		cf.css = sel
	case srcXPath:
		expr, err := compileXPath(cf.XPath)
		if err != nil {
			return err
		}
		src := cf.XPath
		cf.xpath = &sync.Pool{New: func() any {
			e, _ := compileXPath(src) // compiled once above: cannot fail
			return e
		}}
		cf.xpath.Put(expr)
	case srcRegex:
		re, err := regexp.Compile(cf.Regex)
		if err != nil {
			return fmt.Errorf("compile regex: %w", err)
		}
		cf.re = re
	case srcJSON:
		p, err := ParsePath(cf.JSON)
		if err != nil {
			return err
		}
		cf.path = p
	}
	return nil
}

// compileXPath compiles an XPath expression, turning a panic of the
// parser into an error.
func compileXPath(s string) (expr *xpath.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			expr, err = nil, fmt.Errorf("compile xpath: %v", r)
		}
	}()
	expr, err = xpath.Compile(s)
	if err != nil {
		return nil, fmt.Errorf("compile xpath: %w", err)
	}
	return expr, nil
}

// Fields returns a copy of the fields the Extractor was compiled from.
func (e *Extractor) Fields() []Field {
	out := make([]Field, len(e.fields))
	for i, cf := range e.fields {
		out[i] = cf.Field
		out[i].Transform = append([]Transform(nil), cf.Transform...)
	}
	return out
}

// Document is a fetched document. Body is UTF-8 (the slave decodes legacy
// charsets first); URL resolves relative URLs and may be nil.
type Document struct {
	URL         *url.URL
	ContentType string
	Body        []byte
}

// Extract returns the item of doc. FieldErrors list required fields
// without a value and values that failed a transform or their type; those
// fields are left out of the Item. The Item is never nil.
func (e *Extractor) Extract(doc Document) (Item, []FieldError) {
	st := newDocState(doc)
	item := Item{}
	var errs []FieldError
	for _, cf := range e.fields {
		v, ok, reason := cf.extract(st)
		switch {
		case reason != "":
			errs = append(errs, FieldError{Field: cf.Name, Reason: reason})
		case ok:
			item[cf.Name] = v
		case cf.Required:
			errs = append(errs, FieldError{Field: cf.Name, Reason: ReasonMissing})
		}
	}
	return item, errs
}

// extract returns the field's value, whether it has one, and the reason
// of a failure.
func (cf *compiledField) extract(st *docState) (v any, ok bool, reason string) {
	defer func() {
		if r := recover(); r != nil {
			v, ok, reason = nil, false, fmt.Sprintf("internal error: %v", r)
		}
	}()
	vals, err := cf.values(st)
	if err != nil {
		return nil, false, err.Error()
	}
	if len(vals) == 0 {
		return nil, false, ""
	}
	if !cf.List {
		vals = vals[:1]
	}
	joined := false
	for _, t := range cf.transforms {
		if t.Op == OpJoin {
			parts := make([]string, len(vals))
			for i, x := range vals {
				parts[i] = toString(x)
			}
			vals = []any{strings.Join(parts, t.Sep)}
			joined = true
			continue
		}
		for i, x := range vals {
			y, err := t.apply(x, st.doc.URL)
			if err != nil {
				return nil, false, err.Error()
			}
			vals[i] = y
		}
	}
	for i, x := range vals {
		y, err := convert(x, cf.Type, st.doc.URL)
		if err != nil {
			return nil, false, err.Error()
		}
		vals[i] = y
	}
	if cf.List && !joined {
		return vals, true, ""
	}
	return vals[0], true, ""
}

// values returns the raw values of the field's source (strings, or JSON
// values for a json source), JSON nulls left out.
func (cf *compiledField) values(st *docState) ([]any, error) {
	limit := maxValues
	if !cf.List {
		limit = 1
	}
	switch cf.src {
	case srcCSS:
		return st.css(cf, limit), nil
	case srcXPath:
		return st.xpath(cf, limit), nil
	case srcRegex:
		body := st.text()
		var out []any
		for _, m := range cf.re.FindAllStringSubmatchIndex(body, limit) {
			lo, hi := m[0], m[1]
			if len(m) >= 4 {
				lo, hi = m[2], m[3]
			}
			if lo < 0 {
				continue
			}
			out = append(out, body[lo:hi])
		}
		return out, nil
	case srcJSON:
		vals, err := st.json(cf.path, limit)
		if err != nil || !cf.List || len(vals) != 1 {
			return vals, err
		}
		// A list field whose path selects one array takes its elements:
		// "image": ["a.jpg", "b.jpg"] with list: true.
		a, ok := vals[0].([]any)
		if !ok {
			return vals, nil
		}
		out := make([]any, 0, len(a))
		for _, v := range a {
			if v != nil && len(out) < limit {
				out = append(out, v)
			}
		}
		return out, nil
	}
	return nil, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
