package urlx

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

func newTestTraps(t testing.TB, o TrapOptions) *Traps {
	t.Helper()
	tr, err := NewTraps(o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustParse(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// verdict is the result of Traps.Check.
type verdict struct {
	OK     bool
	Reason string
}

func TestTrapsCheck(t *testing.T) {
	tr := newTestTraps(t, DefaultTrapOptions())
	pass := verdict{OK: true}
	refused := func(r string) verdict { return verdict{Reason: r} }
	many := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(f(i))
		}
		return b.String()
	}
	tests := []struct {
		in   string
		want verdict
	}{
		{"http://x.com/", pass},
		{"http://x.com", pass},
		{"http://x.com/a/b/c.html?q=1", pass},
		{"http://x.com/2024/01/01/post.html", pass},                 // "01" twice
		{"http://x.com/en/docs/en/guide", pass},                     // "en" twice
		{"http://x.com/a//b//c//d///e", pass},                       // empty segments are not repeats
		{"http://x.com/a;v=1/a;v=2/a;v=3", pass},                    // different segments
		{"http://x.com/A/a/A/a/b", pass},                            // case-sensitive
		{"http://x.com/a/b/?a/a/a/a", pass},                         // the query is not the path
		{"http://x.com/a/b/a/c/a/", refused(ReasonPathRepeat)},      // Nutch's shape
		{"http://x.com/a/a/a/page.html", refused(ReasonPathRepeat)}, // Heritrix's shape
		{"http://x.com/x/y/z/x/y/z/x/y/z", refused(ReasonPathRepeat)},
		{"http://x.com/cal/2024/cal/2025/cal/", refused(ReasonPathRepeat)},
		{"http://x.com/%7Eu/%7Eu/%7Eu", refused(ReasonPathRepeat)},
		{"http://x.com" + many(32, func(i int) string { return "/" + strconv.Itoa(i) }), pass},
		{"http://x.com" + many(33, func(i int) string { return "/" + strconv.Itoa(i) }), refused(ReasonTooManySegments)},
		{"http://x.com" + many(32, func(int) string { return "/" }), pass},
		{"http://x.com" + many(33, func(int) string { return "/" }), refused(ReasonTooManySegments)},
		{"http://x.com/?" + many(20, func(i int) string { return "p" + strconv.Itoa(i) + "=1&" }), pass},
		{"http://x.com/?" + many(21, func(i int) string { return "p" + strconv.Itoa(i) + "=1&" }), refused(ReasonTooManyParams)},
		{"http://x.com/?" + many(30, func(int) string { return "&" }) + "a", pass},
		{"http://x.com/" + strings.Repeat("a", 2048-len("http://x.com/")), pass},
		{"http://x.com/" + strings.Repeat("a", 2049-len("http://x.com/")), refused(ReasonURLTooLong)},
		// Length is checked first.
		{"http://x.com" + strings.Repeat("/a", 1100), refused(ReasonURLTooLong)},
		{"http://x.com" + strings.Repeat("/a", 40), refused(ReasonTooManySegments)},
	}
	for _, tt := range tests {
		ok, reason := tr.Check(mustParse(t, tt.in))
		if diff := cmp.Diff(tt.want, verdict{ok, reason}); diff != "" {
			t.Errorf("Check(%.80q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
	if ok, reason := tr.Check(nil); ok || reason != ReasonInvalid {
		t.Errorf("Check(nil) = %v, %q", ok, reason)
	}
	if ok, reason := tr.Check(&url.URL{Scheme: "mailto", Opaque: "a@b.c"}); ok || reason != ReasonInvalid {
		t.Errorf("Check(opaque) = %v, %q", ok, reason)
	}
}

func TestTrapsLongPath(t *testing.T) {
	// More segments than the small-path fast case, with the segment limit
	// off: repeats are counted with a map.
	tr := newTestTraps(t, TrapOptions{MaxPathRepeat: 2})
	var b strings.Builder
	b.WriteString("http://x.com")
	for i := range 100 {
		b.WriteString("/s" + strconv.Itoa(i))
	}
	if ok, reason := tr.Check(mustParse(t, b.String())); !ok {
		t.Errorf("100 distinct segments: refused (%s)", reason)
	}
	b.WriteString("/s7/s7")
	if ok, reason := tr.Check(mustParse(t, b.String())); ok || reason != ReasonPathRepeat {
		t.Errorf("100 segments with s7 three times: %v, %q", ok, reason)
	}
}

func TestNewTraps(t *testing.T) {
	_, err := NewTraps(TrapOptions{MaxURLLength: -1, MaxQueryParams: -2})
	if err == nil || !strings.Contains(err.Error(), "MaxURLLength") || !strings.Contains(err.Error(), "MaxQueryParams") {
		t.Errorf("NewTraps(negative) error %v, want it to name both fields", err)
	}
	off := newTestTraps(t, TrapOptions{})
	for _, s := range []string{
		"http://x.com/" + strings.Repeat("a/", 3000),
		"http://x.com/?" + strings.Repeat("a=1&", 500),
	} {
		if ok, reason := off.Check(mustParse(t, s)); !ok {
			t.Errorf("zero TrapOptions refused %.40q: %s", s, reason)
		}
	}
	want := TrapOptions{MaxURLLength: 2048, MaxPathRepeat: 2, MaxPathSegments: 32, MaxQueryParams: 20}
	if diff := cmp.Diff(want, DefaultTrapOptions()); diff != "" {
		t.Errorf("DefaultTrapOptions mismatch (-want +got):\n%s", diff)
	}
}

func TestUpwardPaths(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"http://x.com/a/b/c.html?q=1#f", []string{"http://x.com/a/b/", "http://x.com/a/", "http://x.com/"}},
		{"https://u@x.com:8443/a/b/", []string{"https://u@x.com:8443/a/", "https://u@x.com:8443/"}},
		{"http://x.com/a", []string{"http://x.com/"}},
		{"http://x.com/", nil},
		{"http://x.com", nil},
		{"http://x.com/a//b", []string{"http://x.com/a//", "http://x.com/a/", "http://x.com/"}},
		{"http://x.com/a%2Fb/c%20d/e", []string{"http://x.com/a%2Fb/c%20d/", "http://x.com/a%2Fb/", "http://x.com/"}},
	}
	for _, tt := range tests {
		var got []string
		for _, u := range UpwardPaths(mustParse(t, tt.in)) {
			got = append(got, u.String())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("UpwardPaths(%s) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
	if got := UpwardPaths(nil); got != nil {
		t.Errorf("UpwardPaths(nil) = %v", got)
	}
	// The results are canonical.
	c := newTestCanon(t)
	for _, u := range UpwardPaths(mustParse(t, "http://x.com/a%2Fb/%C3%A9/c;p=1/d.html")) {
		checkCanonical(t, c, u.String())
	}
}

func TestPathKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://x.com/a/b?q=1#f":         "http://x.com/a/b",
		"HTTPS://u:p@X.com:8443/a%2Fb?q": "https://x.com:8443/a%2Fb",
		"http://x.com":                   "http://x.com/",
		"http://[2001:db8::1]:8080/a?b":  "http://[2001:db8::1]:8080/a",
	} {
		if got := PathKey(mustParse(t, in)); got != want {
			t.Errorf("PathKey(%s) = %q, want %q", in, got, want)
		}
	}
}

// stormPathRepeat is StormCrawler's BasicURLFilter.filterPathRepet: the
// whole URL is split at "/" (scheme, host and query included); URLs of 4
// parts or fewer pass; a URL is refused when one non-empty part occurs max
// times.
func stormPathRepeat(u string, max int) bool {
	parts := strings.Split(u, "/")
	if len(parts) <= 4 {
		return false
	}
	count := map[string]int{}
	for _, p := range parts {
		if p == "" {
			continue
		}
		if count[p]++; count[p] == max {
			return true
		}
	}
	return false
}

// nutchPathRepeat is Nutch's rule -.*(/[^/]+)/[^/]+\1/[^/]+\1/ (Go's regexp
// has no back references): five consecutive "/"-delimited non-empty parts
// X Y X Z X followed by "/".
func nutchPathRepeat(u string) bool {
	parts := strings.Split(u, "/")[1:] // the pattern starts at a "/"
	for k := 0; k+5 < len(parts); k++ {
		x := parts[k]
		if x != "" && parts[k+1] != "" && parts[k+3] != "" && parts[k+2] == x && parts[k+4] == x {
			return true
		}
	}
	return false
}

// trapDeviations are example URLs where our result differs from a
// reference rule, with the reason.
var trapDeviations = map[string]string{
	"http://a.example/a.example/a.example/x":    "StormCrawler counts the host (and scheme and query) as parts; we count path segments only: a host name repeated in the path is not a loop",
	"http://x.com/q?u=/a/a/a":                   "StormCrawler counts the query's \"/\"-parts; we count path segments only (the query of a trap grows with MaxURLLength and MaxQueryParams)",
	"http://x.com/" + strings.Repeat("a", 1500): "StormCrawler's maxLength is 1024; we take Nutch's 2048 (see the package documentation)",
}

// TestConformanceTraps reads the URL filter defaults of Nutch and
// StormCrawler (traps/), which hold rules, not examples: it derives their
// limits, checks them against our defaults, and runs a table of example
// URLs through both their rules (emulated) and Traps. Where a reference
// refuses a URL for path repetition or length, Traps must refuse it too,
// except for the documented trapDeviations.
func TestConformanceTraps(t *testing.T) {
	// StormCrawler's BasicURLFilter parameters.
	data, err := os.ReadFile(testutil.ConformanceFile(t, "traps/stormcrawler-urlfilters.json"))
	if err != nil {
		t.Fatal(err)
	}
	var filters map[string][]struct {
		Class  string          `json:"class"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(data, &filters); err != nil {
		t.Fatalf("parse stormcrawler-urlfilters.json: %v", err)
	}
	var basic struct {
		MaxPathRepetition int `json:"maxPathRepetition"`
		MaxLength         int `json:"maxLength"`
	}
	for _, f := range filters["org.apache.stormcrawler.filtering.URLFilters"] {
		if strings.HasSuffix(f.Class, ".BasicURLFilter") {
			if err := json.Unmarshal(f.Params, &basic); err != nil {
				t.Fatalf("BasicURLFilter params: %v", err)
			}
		}
	}
	if basic.MaxPathRepetition == 0 || basic.MaxLength == 0 {
		t.Fatalf("no BasicURLFilter maxPathRepetition/maxLength in stormcrawler-urlfilters.json")
	}
	def := DefaultTrapOptions()
	// StormCrawler refuses at maxPathRepetition occurrences; we refuse above
	// MaxPathRepeat.
	if def.MaxPathRepeat != basic.MaxPathRepetition-1 {
		t.Errorf("MaxPathRepeat %d, StormCrawler refuses at %d occurrences", def.MaxPathRepeat, basic.MaxPathRepetition)
	}

	// Nutch's and StormCrawler's regex filters: the repetition rule (active
	// in Nutch, commented out in StormCrawler as too slow) and Nutch's
	// commented length rule.
	const repeatRule = `.*(/[^/]+)/[^/]+\1/[^/]+\1/`
	lengthRule := regexp.MustCompile(`^#?-\^\.\{(\d+),\}$`)
	nutchMaxLen := 0
	for _, name := range []string{"traps/nutch-regex-urlfilter.txt", "traps/stormcrawler-default-regex-filters.txt"} {
		data, err := os.ReadFile(testutil.ConformanceFile(t, name))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasSuffix(line, repeatRule) {
				found = true
			}
			if m := lengthRule.FindStringSubmatch(line); m != nil && strings.HasPrefix(name, "traps/nutch") {
				n, err := strconv.Atoi(m[1])
				if err != nil {
					t.Fatal(err)
				}
				nutchMaxLen = n - 1
			}
		}
		if !found {
			t.Errorf("%s: path repetition rule %q not found", name, repeatRule)
		}
	}
	if nutchMaxLen != def.MaxURLLength {
		t.Errorf("MaxURLLength %d, Nutch's length rule allows %d", def.MaxURLLength, nutchMaxLen)
	}

	examples := []string{
		"http://x.com/a/b/a/c/a/",
		"http://x.com/a/b/a/c/a/d.html",
		"http://x.com/a/a/a/page.html",
		"http://x.com/a/a/a/a/a/a/",
		"http://x.com/x/y/z/x/y/z/x/y/z",
		"http://x.com/cal/2024/cal/2025/cal/2026/",
		"http://x.com/docs/api/docs/api/docs/api/index.html",
		"http://x.com/p/1/p/2/p/3?x=1",
		"http://x.com/2024/01/01/post.html",
		"http://x.com/en/docs/en/guide",
		"http://x.com/a/b/c/d/e/f/g/",
		"http://x.com/a//b//c//d",
		"http://x.com/a/b",
		"http://a.example/a.example/a.example/x",
		"http://x.com/q?u=/a/a/a",
		"http://x.com/" + strings.Repeat("a", 1500),
		"http://x.com/" + strings.Repeat("a", 2100),
		"http://x.com/" + strings.Repeat("ab/", 700),
	}
	tr := newTestTraps(t, def)
	var refStorm, refNutch, agree, deviations int
	for _, s := range examples {
		u := mustParse(t, s)
		ok, reason := tr.Check(u)
		storm := ""
		switch {
		case len(s) > basic.MaxLength:
			storm = ReasonURLTooLong
		case stormPathRepeat(s, basic.MaxPathRepetition):
			storm = ReasonPathRepeat
		}
		nutch := ""
		switch {
		case len(s) > nutchMaxLen:
			nutch = ReasonURLTooLong
		case nutchPathRepeat(s):
			nutch = ReasonPathRepeat
		}
		if storm != "" {
			refStorm++
		}
		if nutch != "" {
			refNutch++
		}
		why, documented := trapDeviations[s]
		switch {
		case documented:
			deviations++
			if !ok || storm == "" {
				t.Errorf("%.60q: documented deviation (%s) but Check = %v, %q and StormCrawler %q", s, why, ok, reason, storm)
			}
		case (storm != "" || nutch != "") && ok:
			t.Errorf("%.60q: StormCrawler %q, Nutch %q, but Traps accepts it", s, storm, nutch)
		case storm == "" && nutch == "" && !ok && reason == ReasonPathRepeat:
			t.Errorf("%.60q: no reference refuses it, Traps refuses it (%s)", s, reason)
		default:
			agree++
		}
	}
	t.Logf("traps: %d example URLs, StormCrawler (maxLength %d, maxPathRepetition %d) refuses %d, Nutch (length %d, repeat regex) refuses %d; Traps agrees on %d, %d documented deviations",
		len(examples), basic.MaxLength, basic.MaxPathRepetition, refStorm, nutchMaxLen, refNutch, agree, deviations)
}

func FuzzTraps(f *testing.F) {
	for _, s := range []string{"http://x.com/a/b/a/c/a/", "http://x.com/a//b?c=1&&d", "http://x.com/%2F/a%2F/b", "http://x.com"} {
		f.Add(s)
	}
	c, err := NewCanonicalizer(DefaultStripParams())
	if err != nil {
		f.Fatal(err)
	}
	tr, err := NewTraps(DefaultTrapOptions())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := c.Canonicalize(s)
		if err != nil {
			return
		}
		ok, reason := tr.Check(u)
		if ok != (reason == "") {
			t.Fatalf("Check(%s) = %v, %q", u, ok, reason)
		}
		key := PathKey(u)
		prev := u.EscapedPath()
		for _, d := range UpwardPaths(u) {
			ds := d.String()
			if d.RawQuery != "" || !strings.HasSuffix(d.EscapedPath(), "/") || !strings.HasPrefix(prev, d.EscapedPath()) || len(d.EscapedPath()) >= len(prev) {
				t.Fatalf("UpwardPaths(%s): %s after %s", u, ds, prev)
			}
			if again, err := c.Canonicalize(ds); err != nil || again.String() != ds {
				t.Fatalf("UpwardPaths(%s): %s not canonical (%v, %v)", u, ds, again, err)
			}
			if !strings.HasPrefix(key, PathKey(d)) {
				t.Fatalf("PathKey(%s) = %q does not extend PathKey(%s) = %q", u, key, d, PathKey(d))
			}
			prev = d.EscapedPath()
		}
	})
}

func TestDateQuery(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"http://a.test/cal?d=2026-11-24", true},
		{"http://a.test/cal?date=20261124", true},
		{"http://a.test/cal?month=2026-11", true},
		{"http://a.test/cal?y=1&day=24/11/2026", true},
		{"http://a.test/cal?day=11.24.2026", true},
		{"http://a.test/cal?d=2026/11/24&view=day", true},
		{"http://a.test/list?page=2", false},
		{"http://a.test/list?page=20261124x", false},
		{"http://a.test/list?id=12345678", false}, // not a plausible date
		{"http://a.test/list?sku=2026-13", false},
		{"http://a.test/list?v=1.2.3", false},
		{"http://a.test/list?year=2026", false},
		{"http://a.test/plain", false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := DateQuery(u); got != tc.want {
			t.Errorf("DateQuery(%s) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
