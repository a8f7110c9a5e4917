package urlx

import (
	"net/url"
	"strings"
	"testing"
)

func TestScopeCheck(t *testing.T) {
	s, err := NewScope(
		[]string{"Example.com", "*.example.org", "bücher.de", "127.0.0.2"},
		[]string{`^https?://[^/]+/(docs|blog)/`, `^http://127\.0\.0\.2`},
		[]string{`\.pdf$`, `/private/`},
		3,
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url    string
		depth  int
		ok     bool
		reason string
	}{
		{"http://example.com/docs/a", 0, true, ""},
		{"https://example.com/blog/", 3, true, ""},
		{"http://example.com/docs/a", 4, false, "depth"},
		{"http://www.example.com/docs/a", 1, false, "host"}, // exact name only
		{"http://example.org/docs/a", 1, true, ""},          // *.example.org includes example.org
		{"http://a.b.example.org/docs/a", 1, true, ""},
		{"http://EXAMPLE.ORG./docs/a", 1, true, ""},
		{"http://badexample.org/docs/a", 1, false, "host"},
		{"http://example.org.evil.com/docs/a", 1, false, "host"},
		{"http://xn--bcher-kva.de/docs/", 1, true, ""},
		{"http://example.com:8080/docs/a", 1, true, ""}, // port ignored
		{"http://127.0.0.2:8080/x", 1, true, ""},
		{"http://example.com/other/a", 1, false, "allow"},
		{"http://example.com/docs/a.pdf", 1, false, "deny"},
		{"http://example.com/docs/private/a", 1, false, "deny"},
		{"http://other.com/docs/a.pdf", 9, false, "depth"},  // depth first
		{"http://other.com/other.pdf", 1, false, "host"},    // then host
		{"http://example.com/other.pdf", 1, false, "allow"}, // then allow, then deny
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		ok, reason := s.Check(u, tt.depth)
		if ok != tt.ok || reason != tt.reason {
			t.Errorf("Check(%s, %d) = %v, %q; want %v, %q", tt.url, tt.depth, ok, reason, tt.ok, tt.reason)
		}
	}
}

func TestScopeUnrestricted(t *testing.T) {
	s, err := NewScope(nil, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://anything.example/x")
	if ok, reason := s.Check(u, 1000); !ok {
		t.Errorf("unrestricted scope refused: %s", reason)
	}
	if ok, reason := s.Check(nil, 0); ok || reason != "host" {
		t.Errorf("Check(nil) = %v, %q", ok, reason)
	}
	d, _ := NewScope(nil, nil, []string{"x"}, 0)
	if ok, reason := d.Check(u, 0); ok || reason != "deny" {
		t.Errorf("deny only: %v %q", ok, reason)
	}
}

func TestNewScopeErrors(t *testing.T) {
	tests := []struct {
		hosts, allow, deny []string
		depth              int
		want               string
	}{
		{deny: []string{"a", "b", "(unclosed"}, want: "crawl.deny[2]: error parsing regexp: missing closing ): `(unclosed`"},
		{allow: []string{"[z-a]"}, want: "crawl.allow[0]: error parsing regexp"},
		{allow: []string{""}, want: "crawl.allow[0]: empty regex"},
		{hosts: []string{"ok.com", ""}, want: "crawl.allow_hosts[1]"},
		{hosts: []string{"http://x.com/"}, want: "crawl.allow_hosts[0]"},
		{hosts: []string{"x.com:80"}, want: "crawl.allow_hosts[0]"},
		{hosts: []string{"*."}, want: "crawl.allow_hosts[0]"},
		{hosts: []string{"a..b"}, want: "crawl.allow_hosts[0]"},
		{hosts: []string{"exa mple.com"}, want: "crawl.allow_hosts[0]"},
		{depth: -1, want: "crawl.max_depth"},
	}
	for _, tt := range tests {
		_, err := NewScope(tt.hosts, tt.allow, tt.deny, tt.depth)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("NewScope(%q, %q, %q, %d) error = %v, want prefix %q", tt.hosts, tt.allow, tt.deny, tt.depth, err, tt.want)
		}
	}
}
