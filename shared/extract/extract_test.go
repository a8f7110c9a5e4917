package extract

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func load(t testing.TB, name, ctype, rawURL string) Document {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return Document{URL: u, ContentType: ctype, Body: b}
}

func productPage(t testing.TB) Document {
	return load(t, "product.html", "text/html; charset=utf-8", "https://shop.example.com/products/al-15")
}

func apiResponse(t testing.TB) Document {
	return load(t, "api.json", "application/json", "https://api.example.com/v1/products")
}

func tr(op string) Transform { return Transform{Op: op} }

func TestExtract(t *testing.T) {
	product, api := productPage(t), apiResponse(t)
	tests := []struct {
		name   string
		doc    Document
		fields []Field
		want   Item
		errs   []FieldError
	}{
		{
			name: "css text attr html",
			doc:  product,
			fields: []Field{
				{Name: "title", CSS: "h1.product-title", Transform: []Transform{tr(OpCollapseSpace)}},
				{Name: "alt", CSS: ".gallery img", Attr: "alt"},
				{Name: "desc", CSS: ".description", Attr: "html"},
				{Name: "missing_attr", CSS: ".gallery img", Attr: "data-zoom"},
			},
			want: Item{"title": "Acme Laptop 15", "alt": "front", "desc": "<p>A <b>fast</b> laptop.</p>"},
		},
		{
			name: "price number",
			doc:  product,
			fields: []Field{
				{Name: "price", CSS: ".price", Type: TypeNumber, Transform: []Transform{tr(OpTrim), tr(OpNumber)}},
				{Name: "weight", CSS: ".weight", Transform: []Transform{tr(OpNumber)}},
				{Name: "reviews", CSS: ".review-count", Type: TypeInteger, Transform: []Transform{tr(OpInteger)}},
			},
			want: Item{"price": 1299.0, "weight": "1.8", "reviews": int64(128)},
		},
		{
			name: "image list made absolute",
			doc:  product,
			fields: []Field{
				{Name: "images", CSS: ".gallery img", Attr: "src", List: true, Type: TypeURL},
				{Name: "manual", CSS: "a.manual", Attr: "href", Transform: []Transform{tr(OpAbsoluteURL)}},
			},
			want: Item{
				"images": []any{
					"https://shop.example.com/img/laptop-1.jpg",
					"https://shop.example.com/products/img/laptop-2.jpg",
					"https://cdn.example.com/img/laptop-3.jpg",
				},
				"manual": "https://shop.example.com/manuals/al-15.pdf",
			},
		},
		{
			name: "xpath",
			doc:  product,
			fields: []Field{
				{Name: "sku", XPath: `//span[@itemprop="sku"]`, Transform: []Transform{tr(OpUpper), {Op: OpReplace, Pattern: `^SKU-`, With: ""}}},
				{Name: "srcs", XPath: `//div[@class="gallery"]/img/@src`, List: true},
				{Name: "alts", XPath: `//div[@class="gallery"]/img`, Attr: "alt", List: true, Transform: []Transform{{Op: OpJoin, Sep: "|"}}},
				{Name: "in_stock", XPath: `boolean(//div[@class="stock in"])`, Type: TypeBoolean},
				{Name: "count", XPath: `count(//div[@class="gallery"]/img)`, Type: TypeInteger},
				{Name: "title", XPath: `string(//title)`},
				{Name: "desc", XPath: `//div[@class="description"]`, Attr: "html"},
				{Name: "none", XPath: `//nav`},
			},
			want: Item{
				"sku":      "AL-15",
				"srcs":     []any{"/img/laptop-1.jpg", "img/laptop-2.jpg", "https://cdn.example.com/img/laptop-3.jpg"},
				"alts":     "front|side|back",
				"in_stock": true,
				"count":    int64(3),
				"title":    "Acme Laptop 15 | Example Shop",
				"desc":     "<p>A <b>fast</b> laptop.</p>",
			},
		},
		{
			name: "regex",
			doc:  product,
			fields: []Field{
				{Name: "currency", Regex: `"priceCurrency":\s*"([A-Z]{3})"`},
				{Name: "whole", Regex: `AL-\d+`},
				{Name: "thumbs", Regex: `thumb-(\d+)\.jpg`, List: true, Type: TypeInteger},
			},
			want: Item{"currency": "USD", "whole": "AL-15", "thumbs": func() []any {
				out := make([]any, 60)
				for i := range out {
					out[i] = int64(i)
				}
				return out
			}()},
		},
		{
			name: "ld+json",
			doc:  product,
			fields: []Field{
				{Name: "availability", JSON: "offers.availability"},
				{Name: "price", JSON: "$.offers.price", Type: TypeNumber},
				{Name: "images", JSON: "$.image", List: true, Type: TypeURL},
				{Name: "first_image", JSON: "$.image[0]", Type: TypeURL},
				{Name: "rating", JSON: "$..ratingValue", Type: TypeNumber},
				{Name: "type", JSON: "$['@type']"},
				{Name: "page", JSON: "$.page"}, // from the application/json block
				{Name: "reviews", JSON: "aggregateRating.reviewCount"},
			},
			want: Item{
				"availability": "https://schema.org/InStock",
				"price":        1299.0,
				"images":       []any{"https://shop.example.com/img/laptop-1.jpg", "https://cdn.example.com/img/laptop-2.jpg"},
				"first_image":  "https://shop.example.com/img/laptop-1.jpg",
				"rating":       4.5,
				"type":         "Product",
				"page":         "product",
				"reviews":      "128",
			},
		},
		{
			name: "json api",
			doc:  api,
			fields: []Field{
				{Name: "names", JSON: "$.data.products[*].name", List: true},
				{Name: "last", JSON: "$.data.products[-1].name"},
				{Name: "prices", JSON: "$.data.products[*].price", List: true, Type: TypeNumber},
				{Name: "tags", JSON: "$..tags[*]", List: true, Transform: []Transform{tr(OpUpper), {Op: OpJoin, Sep: ","}}},
				{Name: "active", JSON: "$.data.products[*].active", List: true, Type: TypeBoolean},
				{Name: "total", JSON: "data.total", Type: TypeInteger},
				{Name: "weird", JSON: `$.data.meta["weird key"]`},
				{Name: "meta", JSON: "$.data.meta"},
				{Name: "urls", JSON: "$.data.products[*].url", List: true, Type: TypeURL},
				{Name: "css_on_json", CSS: "h1"},
				{Name: "status", Regex: `"status":\s*"(\w+)"`},
			},
			want: Item{
				"names":  []any{"Widget", "Gadget", "Doohickey"},
				"last":   "Doohickey",
				"prices": []any{9.99, 19.5},
				"tags":   "A,B,C",
				"active": []any{true, false, true},
				"total":  int64(3),
				"weird":  "w",
				"meta":   `{"name":"catalog","weird key":"w","@type":"List"}`,
				"urls":   []any{"https://api.example.com/p/1", "https://api.example.com/p/2", "https://api.example.com/p/3"},
				"status": "ok",
			},
		},
		{
			name: "transforms",
			doc: Document{ContentType: "text/html", Body: []byte(`<p id=a>  Hello   <i>Big</i>
World  </p><p class=n>Model X-100 costs -5.50 or 1,000,000</p><ul><li>a</li><li>b</li></ul>`)},
			fields: []Field{
				{Name: "trim", CSS: "#a", Attr: "html", Transform: []Transform{tr(OpTrim)}},
				{Name: "lower", CSS: "#a", Transform: []Transform{tr(OpCollapseSpace), tr(OpLower)}},
				{Name: "upper", CSS: "#a", Transform: []Transform{tr(OpCollapseSpace), tr(OpUpper)}},
				{Name: "number", CSS: ".n", Transform: []Transform{tr(OpNumber)}, Type: TypeNumber},
				{Name: "big", CSS: ".n", Transform: []Transform{{Op: OpReplace, Pattern: `^.* or `, With: ""}, tr(OpInteger)}},
				{Name: "join_default", CSS: "li", List: true, Transform: []Transform{{Op: OpJoin, Sep: DefaultJoinSep}}},
				{Name: "replace_group", CSS: ".n", Transform: []Transform{{Op: OpReplace, Pattern: `Model (\S+).*`, With: "[$1]"}}},
			},
			want: Item{
				"trim":          "Hello   <i>Big</i>\nWorld",
				"lower":         "hello big world",
				"upper":         "HELLO BIG WORLD",
				"number":        100.0,
				"big":           "1000000",
				"join_default":  "a b",
				"replace_group": "[X-100]",
			},
		},
		{
			name: "types",
			doc:  Document{ContentType: "text/html", Body: []byte(`<b class=f> 2.5 </b><b class=i>42</b><b class=bt>Yes</b><b class=bf>off</b><b class=u>/x?y=1</b>`)},
			fields: []Field{
				{Name: "f", CSS: ".f", Type: TypeNumber},
				{Name: "i", CSS: ".i", Type: TypeInteger},
				{Name: "s", CSS: ".i", Type: TypeString},
				{Name: "bt", CSS: ".bt", Type: TypeBoolean},
				{Name: "bf", CSS: ".bf", Type: TypeBoolean},
				{Name: "u", CSS: ".u", Type: TypeURL},
			},
			want: Item{"f": 2.5, "i": int64(42), "s": "42", "bt": true, "bf": false},
			errs: []FieldError{{Field: "u", Reason: `type url: "/x?y=1" is not an absolute http(s) url`}},
		},
		{
			name: "errors",
			doc:  product,
			fields: []Field{
				{Name: "nav", CSS: "nav", Required: true},
				{Name: "title_number", CSS: "h1", Type: TypeNumber},
				{Name: "no_number", CSS: ".stock", Transform: []Transform{tr(OpNumber)}},
				{Name: "not_integer", CSS: ".weight", Transform: []Transform{tr(OpInteger)}},
				{Name: "bool", CSS: ".stock", Type: TypeBoolean},
				{Name: "obj_number", JSON: "offers", Type: TypeNumber},
				{Name: "optional", CSS: "footer"},
				{Name: "ok", CSS: ".on-sale", Type: TypeBoolean, Required: true},
			},
			want: Item{"ok": true},
			errs: []FieldError{
				{Field: "nav", Reason: ReasonMissing},
				{Field: "title_number", Reason: "type number: \"Acme   Laptop\\n      15\" is not a number"},
				{Field: "no_number", Reason: `transform number: no number in "In stock"`},
				{Field: "not_integer", Reason: "transform integer: 1.8 is not an integer"},
				{Field: "bool", Reason: `type boolean: "In stock" is not a boolean`},
				{Field: "obj_number", Reason: "type number: got an object"},
			},
		},
		{
			name:   "invalid json body",
			doc:    Document{ContentType: "application/json", Body: []byte(`{"a": `)},
			fields: []Field{{Name: "a", JSON: "a"}},
			want:   Item{},
			errs:   []FieldError{{Field: "a", Reason: "decode json: unexpected EOF"}},
		},
		{
			name: "sniffed json and broken embedded block",
			doc:  Document{Body: []byte(` [{"a": 1}, {"a": 2}]`)},
			fields: []Field{
				{Name: "a", JSON: "$[*].a", List: true, Type: TypeInteger},
			},
			want: Item{"a": []any{int64(1), int64(2)}},
		},
		{
			name: "embedded blocks tried in order",
			doc: Document{ContentType: "text/html", Body: []byte(`<script type="application/ld+json">{broken</script>
<script type="application/ld+json">{"x": 1}</script><script type="APPLICATION/JSON">{"y": "two"}</script><script>{"y": "js"}</script>`)},
			fields: []Field{{Name: "x", JSON: "x", Type: TypeNumber}, {Name: "y", JSON: "y"}, {Name: "z", JSON: "z"}},
			want:   Item{"x": 1.0, "y": "two"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, err := Compile(tt.fields)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, errs := ex.Extract(tt.doc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("item (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.errs, errs); diff != "" {
				t.Errorf("field errors (-want +got):\n%s", diff)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("item is not JSON-encodable: %v", err)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		fields []Field
		want   []string
	}{
		{"empty name", []Field{{CSS: "a"}}, []string{`field #1: name: empty name`}},
		{"duplicate", []Field{{Name: "a", CSS: "a"}, {Name: "a", CSS: "b"}}, []string{`field "a": name: duplicate field name "a"`}},
		{"no source", []Field{{Name: "a"}}, []string{`field "a": no source: want one of css, xpath, regex, json`}},
		{"two sources", []Field{{Name: "a", CSS: "a", Regex: "b"}}, []string{`field "a": regex: more than one source (css, regex): want exactly one`}},
		{"bad css", []Field{{Name: "a", CSS: "a[["}}, []string{`field "a": css: compile css selector: `}},
		{"bad xpath", []Field{{Name: "a", XPath: "//a[@"}}, []string{`field "a": xpath: compile xpath: `}},
		{"bad regex", []Field{{Name: "a", Regex: "a(b"}}, []string{"field \"a\": regex: compile regex: error parsing regexp: missing closing ): `a(b`"}},
		{"perl regex", []Field{{Name: "a", Regex: `(?=x)`}}, []string{`field "a": regex: compile regex: error parsing regexp: invalid or unsupported Perl syntax`}},
		{"bad json", []Field{{Name: "a", JSON: "$.a["}}, []string{`field "a": json: parse json path "$.a[": at offset 4: unterminated [`}},
		{"attr on regex", []Field{{Name: "a", Regex: "x", Attr: "href"}}, []string{`field "a": attr: attr applies only to css and xpath`}},
		{"bad type", []Field{{Name: "a", CSS: "a", Type: "float"}}, []string{`field "a": type: unknown type "float" (want one of string, number, integer, boolean, url)`}},
		{"bad transform", []Field{{Name: "a", CSS: "a", Transform: []Transform{tr(OpTrim), tr("strip")}}}, []string{`field "a": transform[1]: unknown transform "strip"`}},
		{"bad replace", []Field{{Name: "a", CSS: "a", Transform: []Transform{{Op: OpReplace, Pattern: `\1`}}}}, []string{`field "a": transform[0]: replace: compile pattern: `}},
		{"several", []Field{{Name: "a", CSS: "a", Type: "x"}, {Name: "b"}}, []string{`field "a": type:`, `field "b": no source`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.fields)
			if err == nil {
				t.Fatal("Compile succeeded")
			}
			list := err.(interface{ Unwrap() []error }).Unwrap()
			if len(list) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(list), len(tt.want), err)
			}
			for i, e := range list {
				var ce *CompileError
				if !errors.As(e, &ce) {
					t.Fatalf("error %d is %T, not *CompileError", i, e)
				}
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, e.Error(), tt.want[i])
				}
			}
		})
	}
}

func TestTransformYAML(t *testing.T) {
	src := `
- name: tags
  css: li
  list: true
  transform:
    - trim
    - join
    - join: ", "
    - replace: {pattern: '\s+', with: " "}
`
	var got []Field
	if err := yaml.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	want := []Field{{Name: "tags", CSS: "li", List: true, Transform: []Transform{
		{Op: OpTrim}, {Op: OpJoin, Sep: " "}, {Op: OpJoin, Sep: ", "}, {Op: OpReplace, Pattern: `\s+`, With: " "},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	out, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var again []Field
	if err := yaml.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	bad := []struct{ src, want string }{
		{`replace`, "transform replace needs {replace: {pattern: ..., with: ...}}"},
		{`{trim: x}`, "transform trim takes no argument (write it as a bare name)"},
		{`{nope: x}`, `unknown transform "nope"`},
		{`{join: ", ", trim: x}`, "transform: want one operation per list entry, got 2"},
		{`{replace: {pattern: a, wth: b}}`, `transform replace: unknown key "wth" (want pattern, with)`},
		{`{replace: {with: b}}`, "transform replace: missing pattern"},
		{`[trim]`, "transform: want a name or a one-key mapping"},
	}
	for _, b := range bad {
		var tr Transform
		err := yaml.Unmarshal([]byte(b.src), &tr)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v, want %q", b.src, err, b.want)
		}
	}
}

// TestConcurrent runs one Extractor from many goroutines (for -race).
func TestConcurrent(t *testing.T) {
	doc := productPage(t)
	ex, err := Compile(benchFields)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ex.Extract(doc)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, errs := ex.Extract(doc)
				if len(errs) > 0 || !cmp.Equal(want, got) {
					t.Errorf("concurrent extract differs: %v %v", cmp.Diff(want, got), errs)
					return
				}
			}
		})
	}
	wg.Wait()
}

var benchFields = []Field{
	{Name: "title", CSS: "h1.product-title", Required: true, Transform: []Transform{{Op: OpCollapseSpace}}},
	{Name: "price", CSS: ".price", Type: TypeNumber, Transform: []Transform{{Op: OpNumber}}},
	{Name: "images", CSS: ".gallery img", Attr: "src", List: true, Type: TypeURL},
	{Name: "sku", XPath: `//span[@itemprop="sku"]`, Transform: []Transform{{Op: OpUpper}}},
	{Name: "currency", Regex: `"priceCurrency":\s*"([A-Z]{3})"`},
	{Name: "availability", JSON: "offers.availability"},
}

func BenchmarkExtract(b *testing.B) {
	doc := productPage(b)
	ex, err := Compile(benchFields)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := ex.Extract(doc); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
