package robots

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// conformanceCase is one case of google_robots_cases.json.
type conformanceCase struct {
	Test            string `json:"test"`
	Kind            string `json:"kind"` // "rfc" or "google"
	RobotsTxt       string `json:"robotstxt"`
	UserAgent       string `json:"useragent"`
	URL             string `json:"url"`
	ExpectedAllowed bool   `json:"expected_allowed"`
}

// deviations lists the google-kind cases where this package deliberately
// answers differently, keyed by "test|useragent|url", with the reason. An
// rfc-kind case may never be listed here.
var deviations = map[string]string{
	// Google's matcher is given a bare product token and compares "Foo Bar"
	// whole; our callers pass a full User-Agent string whose product token
	// is its leading [A-Za-z_-] run, so "Foo Bar" is the crawler "Foo".
	"GoogleOnly_AcceptUserAgentUpToFirstSpace|Foo Bar|http://foo.bar/x/y": "the product token of the User-Agent \"Foo Bar\" is \"Foo\"",
}

// pathOf returns the path, params and query of rawURL verbatim, without
// scheme, authority or fragment, always starting with "/": a port of
// GetPathParamsQuery from google/robotstxt, which is how the reference
// matcher reads the url of a case. The url is not re-encoded: cases check
// that an unencoded URL does not match an encoded pattern.
func pathOf(rawURL string) string {
	start := 0
	if strings.HasPrefix(rawURL, "//") {
		start = 2
	}
	earlyPath := strings.IndexAny(rawURL[start:], "/?;")
	protoEnd := strings.Index(rawURL[start:], "://")
	if earlyPath >= 0 && (protoEnd < 0 || earlyPath < protoEnd) {
		protoEnd = -1
	}
	if protoEnd < 0 {
		protoEnd = start
	} else {
		protoEnd += start + 3
	}
	pathStart := strings.IndexAny(rawURL[protoEnd:], "/?;")
	if pathStart < 0 {
		return "/"
	}
	pathStart += protoEnd
	pathEnd := len(rawURL)
	if h := strings.IndexByte(rawURL[start:], '#'); h >= 0 {
		h += start
		if h < pathStart {
			return "/"
		}
		pathEnd = h
	}
	p := rawURL[pathStart:pathEnd]
	if p[0] != '/' {
		p = "/" + p
	}
	return p
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func TestConformanceGoogle(t *testing.T) {
	path := testutil.ConformanceFile(t, "robots/google_robots_cases.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read conformance cases: %v", err)
	}
	var file struct {
		Cases []conformanceCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("decode conformance cases: %v", err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no conformance cases")
	}

	type tally struct{ pass, total int }
	counts := map[string]*tally{"rfc": {}, "google": {}}
	usedDeviations := map[string]bool{}
	for i, c := range file.Cases {
		key := c.Test + "|" + c.UserAgent + "|" + c.URL
		name := fmt.Sprintf("%03d_%s", i, c.Test)
		tl, ok := counts[c.Kind]
		if !ok {
			t.Errorf("%s: unknown kind %q", name, c.Kind)
			continue
		}
		tl.total++
		r := Parse([]byte(c.RobotsTxt))
		got := r.AllowedPath(c.UserAgent, pathOf(c.URL))

		// Cross-check Allowed on the parsed URL where parsing cannot
		// re-encode it (net/url percent-encodes non-ASCII paths, which the
		// encoding cases deliberately leave raw).
		if u, err := url.Parse(c.URL); err == nil && isASCII(c.URL) {
			if viaURL := r.Allowed(c.UserAgent, u); viaURL != got {
				t.Errorf("%s: Allowed(%q) = %v but AllowedPath(%q) = %v", name, c.URL, viaURL, pathOf(c.URL), got)
			}
		}

		if reason, dev := deviations[key]; dev {
			usedDeviations[key] = true
			if c.Kind == "rfc" {
				t.Errorf("%s: rfc case listed as a deviation (%s); rfc cases must pass", name, reason)
			}
			if got == c.ExpectedAllowed {
				t.Errorf("%s: listed as a deviation (%s) but now passes; drop it from deviations", name, reason)
			} else {
				t.Logf("%s: deviation: got %v, Google expects %v: %s", name, got, c.ExpectedAllowed, reason)
			}
			continue
		}
		if got != c.ExpectedAllowed {
			t.Errorf("%s (%s): agent %q url %q: allowed = %v, want %v\nrobots.txt:\n%s",
				name, c.Kind, c.UserAgent, shorten(c.URL), got, c.ExpectedAllowed, shorten(c.RobotsTxt))
			continue
		}
		tl.pass++
	}
	for key := range deviations {
		if !usedDeviations[key] {
			t.Errorf("deviation %q matches no case", key)
		}
	}
	t.Logf("rfc %d/%d, google %d/%d (+%d deliberate deviations)",
		counts["rfc"].pass, counts["rfc"].total, counts["google"].pass, counts["google"].total, len(deviations))
}

func shorten(s string) string {
	if len(s) <= 300 {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)…%s", s[:150], len(s), s[len(s)-100:])
}

func TestPathOf(t *testing.T) {
	// The examples of GetPathParamsQuery's own test in google/robotstxt.
	tests := []struct{ in, want string }{
		{"", "/"},
		{"http://www.example.com", "/"},
		{"http://www.example.com/", "/"},
		{"http://www.example.com/a", "/a"},
		{"http://www.example.com/a/", "/a/"},
		{"http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"},
		{"http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"},
		{"example.com", "/"},
		{"example.com/", "/"},
		{"example.com/a", "/a"},
		{"example.com/a/", "/a/"},
		{"example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"},
		{"a", "/"},
		{"a/", "/"},
		{"/a", "/a"},
		{"a/b", "/b"},
		{"example.com?a", "/?a"},
		{"example.com/a;b#c", "/a;b"},
		{"//a/b/c", "/b/c"},
	}
	for _, tt := range tests {
		if got := pathOf(tt.in); got != tt.want {
			t.Errorf("pathOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
