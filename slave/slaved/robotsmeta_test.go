package slaved

import (
	"net/http"
	"testing"
)

func TestLinkHeaderCanonical(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"none", nil, ""},
		{"canonical", []string{`<https://example.com/doc.pdf>; rel="canonical"`}, "https://example.com/doc.pdf"},
		{"unquoted, case", []string{`</a.pdf>; REL=Canonical`}, "/a.pdf"},
		{"second of a list", []string{`</next>; rel="next", </main>; rel="canonical"`}, "/main"},
		{"in a second header", []string{`</style.css>; rel=preload`, `</main>; rel="alternate canonical"`}, "/main"},
		{"other rels only", []string{`</x>; rel="next"; title="a, b"`}, ""},
		{"malformed", []string{`<unterminated; rel=canonical`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add("Link", v)
			}
			if got := linkHeaderCanonical(h); got != tt.want {
				t.Errorf("linkHeaderCanonical(%q) = %q, want %q", tt.values, got, tt.want)
			}
		})
	}
}
