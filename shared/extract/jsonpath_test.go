package extract

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		src, canon string
	}{
		{"$", "$"},
		{"$.a.b", "$.a.b"},
		{"a.b", "$.a.b"},
		{"$['a b'][0]", "$['a b'][0]"},
		{`$["it's"]`, `$['it\'s']`},
		{"$.a[-1]", "$.a[-1]"},
		{"$.a[*].b", "$.a[*].b"},
		{"$.a.*", "$.a[*]"},
		{"$..name", "$..name"},
		{"$..[0]", "$..[0]"},
		{"$..*", "$..[*]"},
		{"$.@graph[0].@type", "$.@graph[0].@type"},
		{"$['@graph']", "$.@graph"},
		{"[0]", "$[0]"},
	}
	for _, tt := range tests {
		p, err := ParsePath(tt.src)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", tt.src, err)
			continue
		}
		if got := p.String(); got != tt.canon {
			t.Errorf("ParsePath(%q).String() = %q, want %q", tt.src, got, tt.canon)
		}
	}
}

func TestParsePathErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"", `parse json path: empty path`},
		{"$.", `parse json path "$.": at offset 2: expected a name or * after .`},
		{"$.a[", `parse json path "$.a[": at offset 4: unterminated [`},
		{"$[1", `parse json path "$[1": at offset 3: expected ]`},
		{"$['a", `parse json path "$['a": at offset 1: unterminated quoted name`},
		{"$[x]", `parse json path "$[x]": at offset 2: expected *, an integer or a quoted name after [`},
		{"$..", `parse json path "$..": at offset 3: expected a name, * or [ after ..`},
		{"$...a", `parse json path "$...a": at offset 3: expected a name, * or [ after ..`},
		{"$a", `parse json path "$a": at offset 1: unexpected 'a' (want . or [)`},
		{"*", `parse json path "*": at offset 0: expected $, a name, . or [`},
		{"$[99999999999999999999]", `parse json path "$[99999999999999999999]": at offset 2: bad index "99999999999999999999"`},
		{"$[-]", `parse json path "$[-]": at offset 2: bad index "-"`},
	}
	for _, tt := range tests {
		_, err := ParsePath(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParsePath(%q) = %v, want %q", tt.src, err, tt.want)
		}
	}
}

func TestPathEval(t *testing.T) {
	doc, err := decodeJSON([]byte(`{"a": {"b": [1, {"c": "x"}, {"c": "y", "d": {"c": "z"}}]}, "c": "top", "n": null}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want []any
	}{
		{"$.c", []any{"top"}},
		{"$.a.b[0]", []any{"1"}},
		{"$.a.b[-1].c", []any{"y"}},
		{"$.a.b[5]", nil},
		{"$.a.b[-4]", nil},
		{"$.a.b[*].c", []any{"x", "y"}},
		{"$..c", []any{"top", "x", "y", "z"}}, // pre-order of the containing objects
		{"$.n", []any{nil}},
		{"$.missing.x", nil},
		{"$.c[0]", nil},
	}
	for _, tt := range tests {
		p, err := ParsePath(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Eval(doc)
		if err != nil {
			t.Fatal(err)
		}
		var plain []any
		for _, v := range got {
			plain = append(plain, toStringOrNil(v))
		}
		if diff := cmp.Diff(tt.want, plain); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.path, diff)
		}
	}
}

func toStringOrNil(v any) any {
	if v == nil {
		return nil
	}
	return toString(v)
}

func TestPathEvalBounded(t *testing.T) {
	// A wide document and a path of repeated descents stops at the cap.
	b := []byte("[")
	for i := range 2000 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `[[[[[[[[1]]]]]]]]`...)
	}
	b = append(b, ']')
	doc, err := decodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePath("$..*..*..*..*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(doc); err == nil {
		t.Error("no error for a path selecting too many values")
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"$", "$.a.b", "a[0]", "$['x\\'y']", "$..a[*]", "$[-1]", "$.@t", "$..[0]", "$..*"} {
		f.Add(s)
	}
	doc, err := decodeJSON([]byte(`{"a": [{"b": 1}, {"b": [2, 3]}], "@t": {"a": "x"}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := ParsePath(src)
		if err != nil {
			return
		}
		canon := p.String()
		q, err := ParsePath(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, src, err)
		}
		if q.String() != canon {
			t.Fatalf("canonical form not stable: %q -> %q", canon, q.String())
		}
		a, errA := p.Eval(doc)
		b, errB := q.Eval(doc)
		if (errA == nil) != (errB == nil) || len(a) != len(b) {
			t.Fatalf("%q and %q select differently", src, canon)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"a": [1, "x", null, true, {"b": 2.5}]}`))
	f.Add([]byte(`[[[[]]]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeJSON(b)
		if err != nil {
			return
		}
		_ = toString(v)
		_ = plainJSON(v)
	})
}
