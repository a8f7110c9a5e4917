package urlx

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/slave/netguard"
)

// wptEntry is one test of WHATWG's urltestdata.json.
type wptEntry struct {
	Input    string  `json:"input"`
	Base     *string `json:"base"`
	Href     string  `json:"href"`
	Protocol string  `json:"protocol"`
	Failure  bool    `json:"failure"`
}

// wptDifferences are the http(s) cases of urltestdata.json where Resolve
// deliberately disagrees with the URL Standard, keyed by input, with the
// reason. Besides these, references that are empty or only a fragment are
// rejected by design (they link to the page itself; see isSelfRef).
//
// Go's net/url differs from the standard on many more inputs, all handled
// by our own parser (see TestConformanceWHATWG's log for how many cases
// net/url.ResolveReference alone gets right): ASCII tab and newline
// removed anywhere, leading/trailing C0 controls and spaces trimmed, "\" as
// a path separator, any number of slashes after "http:", "http:foo"
// relative to an http base, percent-decoded and IDNA-mapped hosts, WHATWG
// IPv4 number forms ("0x7f.1", "2130706433", "0177.1"), IPv6 serialization,
// "%2e" dot segments, invalid percent escapes accepted, and spaces, control
// characters and non-ASCII bytes encoded instead of rejected.
var wptDifferences = map[string]string{
	"http://./":                    "host \".\" has an empty label: not a resolvable DNS name",
	"http://../":                   "host \"..\" has empty labels: not a resolvable DNS name",
	"http://foo.09..":              "host \"foo.09..\" has an empty label: not a resolvable DNS name",
	"http://!\"$&'()*+,-.;=_`{}~/": "host characters other than letters, digits, - and _ cannot be resolved through DNS",
}

// isSelfRef reports whether ref is empty or only a fragment once
// whitespace is removed as browsers remove it.
func isSelfRef(ref string) bool {
	s := cleanInput(ref)
	return s == "" || s[0] == '#'
}

func TestConformanceWHATWG(t *testing.T) {
	data, err := os.ReadFile(testutil.ConformanceFile(t, "url/urltestdata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("parse urltestdata.json: %v", err)
	}
	c, err := NewCanonicalizer(nil) // no strip params: compare parsing only
	if err != nil {
		t.Fatal(err)
	}
	var (
		httpCases, httpAgree, selfRefs, documented, netURLAgree int
		failCases, failHTTP                                     int
		otherCases                                              int
	)
	seenDiff := map[string]bool{}
	for _, r := range raw {
		if len(r) > 0 && r[0] == '"' {
			continue // a comment
		}
		var e wptEntry
		if err := json.Unmarshal(r, &e); err != nil {
			t.Fatalf("entry %s: %v", r, err)
		}
		base := wptBase(c, e.Base)
		got, gotErr := c.Resolve(base, e.Input)
		switch {
		case e.Failure:
			failCases++
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(e.Input)), "http") ||
				e.Base != nil && strings.HasPrefix(*e.Base, "http") {
				failHTTP++
			}
			if gotErr == nil {
				t.Errorf("input %q base %s: got %s, want failure", e.Input, str(e.Base), got)
			}
		case e.Protocol == "http:" || e.Protocol == "https:":
			httpCases++
			want, wantErr := c.Canonicalize(e.Href)
			if wantErr == nil && netURLResolve(c, e.Base, e.Input) == want.String() {
				netURLAgree++
			}
			switch why, listed := wptDifferences[e.Input]; {
			case isSelfRef(e.Input):
				selfRefs++
				if gotErr == nil {
					t.Errorf("input %q: self reference resolved to %s, want an error", e.Input, got)
				}
			case listed:
				documented++
				seenDiff[e.Input] = true
				if gotErr == nil {
					t.Errorf("input %q: documented difference (%s) but resolved to %s", e.Input, why, got)
				}
			case wantErr != nil:
				t.Errorf("input %q base %s: expected href %q does not canonicalize: %v", e.Input, str(e.Base), e.Href, wantErr)
			case gotErr != nil:
				t.Errorf("input %q base %s: %v, want %s", e.Input, str(e.Base), gotErr, want)
			case got.String() != want.String():
				t.Errorf("input %q base %s: got %s, want %s (href %s)", e.Input, str(e.Base), got, want, e.Href)
			default:
				httpAgree++
			}
		default:
			otherCases++
			if gotErr == nil {
				t.Errorf("input %q base %s: %s result resolved to %s, want an error", e.Input, str(e.Base), e.Protocol, got)
			}
		}
	}
	for in := range wptDifferences {
		if !seenDiff[in] {
			t.Errorf("documented difference %q no longer in urltestdata.json", in)
		}
	}
	t.Logf("WHATWG urltestdata.json: http(s) results: %d/%d agree up to canonical form, %d empty/fragment-only refs rejected by design, %d documented host differences",
		httpAgree, httpCases, selfRefs, documented)
	t.Logf("WHATWG urltestdata.json: failures: %d/%d rejected (%d of them http(s) inputs or bases); other schemes: %d/%d rejected",
		failCases, failCases, failHTTP, otherCases, otherCases)
	t.Logf("for comparison, net/url.ResolveReference then Canonicalize agrees on %d/%d http(s) results", netURLAgree, httpCases)
}

// wptBase returns the base of an entry as a *url.URL: canonicalized when it
// is http(s) (equivalent for every reference Resolve accepts), else as
// net/url parses it (Resolve then only accepts absolute references), or nil.
func wptBase(c *Canonicalizer, base *string) *url.URL {
	if base == nil {
		return nil
	}
	if u, err := c.Canonicalize(*base); err == nil {
		return u
	}
	if u, err := url.Parse(*base); err == nil {
		return u
	}
	return nil
}

// netURLResolve resolves with net/url only, for comparison; "" on error.
func netURLResolve(c *Canonicalizer, base *string, input string) string {
	ref, err := url.Parse(input)
	if err != nil {
		return ""
	}
	if base != nil {
		b, err := url.Parse(*base)
		if err != nil {
			return ""
		}
		ref = b.ResolveReference(ref)
	}
	u, err := c.Canonicalize(ref.String())
	if err != nil {
		return ""
	}
	return u.String()
}

func str(p *string) string {
	if p == nil {
		return "null"
	}
	return strings.ReplaceAll(*p, "\n", `\n`)
}

// deviation is a reference case where we deliberately choose differently:
// got is our result ("" = rejected) and why the reason.
type deviation struct {
	got, why string
}

const (
	whySort       = "the query is not sorted: parameter order is significant on some sites (repeated keys read as lists, position-based parameters, signed URLs)"
	whyEmptyValue = `"b=" stays distinct from "b": some servers tell them apart`
	whyEmptyName  = `a parameter with an empty name ("=1") is kept: only empty parameters ("&&") are dropped`
	whySlashes    = `empty path segments ("//") are kept, as browsers and RFC 3986 keep them: they are significant on some servers (web.archive.org/web/2020/http://...)`
	whyScheme     = "only http and https URLs are crawled"
	whyNoScheme   = "a URL without scheme is rejected, not guessed to be http: seeds and links must be absolute or resolved against a base"
	whyNoHost     = "an http URL without host is invalid (WHATWG: failure)"
)

// crawlerCommonsDeviations are the cases of weirdToNormalizedUrls.csv
// (crawler-commons BasicURLNormalizer, a reference, not a standard) where
// we choose differently, keyed by input.
var crawlerCommonsDeviations = map[string]deviation{
	"http://foo.com//aa/bb/foo.html":           {"http://foo.com//aa/bb/foo.html", whySlashes},
	"http://foo.com/aa//bb/foo.html":           {"http://foo.com/aa//bb/foo.html", whySlashes},
	"http://foo.com/aa/bb//foo.html":           {"http://foo.com/aa/bb//foo.html", whySlashes},
	"http://foo.com//aa//bb//foo.html":         {"http://foo.com//aa//bb//foo.html", whySlashes},
	"http://foo.com////aa////bb//foo.html":     {"http://foo.com////aa////bb//foo.html", whySlashes},
	"http://foo.com////aa////bb////foo.html":   {"http://foo.com////aa////bb////foo.html", whySlashes},
	"file:///foo/bar.txt":                      {"", whyScheme},
	"ftp:/":                                    {"", whyScheme},
	"ftp://foo.com/index.html":                 {"", whyScheme},
	"file:/path/index.html":                    {"", whyScheme},
	"file:/var/www/html/////./bar/index.html":  {"", whyScheme},
	"file:/var/www/html/foo/../bar/index.html": {"", whyScheme},
	"http:////":                       {"", whyNoHost},
	"http:///////":                    {"", whyNoHost},
	"foo.com/index.html":              {"", whyNoScheme},
	"http://example.com/?b=1&a=1":     {"http://example.com/?b=1&a=1", whySort},
	"http://foo.com/foo.html?b=1&a=1": {"http://foo.com/foo.html?b=1&a=1", whySort},
	"http://foo.com/index?b=2&a=1":    {"http://foo.com/index?b=2&a=1", whySort},
	"http://foo.com/index?b=2&a=1#c":  {"http://foo.com/index?b=2&a=1", whySort},
	"http://foo.com/index?a=1&b=":     {"http://foo.com/index?a=1&b=", whyEmptyValue},
	"http://foo.com/index?b&a=1":      {"http://foo.com/index?b&a=1", whySort},
	"http://foo.com/index?b=&a=1":     {"http://foo.com/index?b=&a=1", whySort + "; " + whyEmptyValue},
	"http://foo.com/index?b=1&a=1&":   {"http://foo.com/index?b=1&a=1", whySort},
	"http://foo.com/index?&b=1&a=1":   {"http://foo.com/index?b=1&a=1", whySort},
	"http://foo.com/index?&=1&a=1":    {"http://foo.com/index?=1&a=1", whyEmptyName},
	"http://foo.com/index?=1&b=1&a=1": {"http://foo.com/index?=1&b=1&a=1", whyEmptyName + "; " + whySort},
}

func TestConformanceCrawlerCommons(t *testing.T) {
	f, err := os.Open(testutil.ConformanceFile(t, "url/weirdToNormalizedUrls.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	r.FieldsPerRecord = 2
	r.TrimLeadingSpace = true
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("parse weirdToNormalizedUrls.csv: %v", err)
	}
	c := newTestCanon(t)
	agree, differ := 0, 0
	seen := map[string]bool{}
	for _, rec := range recs {
		in, want := rec[0], rec[1]
		got := canonResult(c, in)
		if d, ok := crawlerCommonsDeviations[in]; ok {
			seen[in] = true
			differ++
			if got.URL != d.got || got.Err != (d.got == "") {
				t.Errorf("%q: got %+v, documented deviation says %q (%s)", in, got, d.got, d.why)
			}
			continue
		}
		if got.Err || got.URL != want {
			t.Errorf("%q: got %+v, want %q", in, got, want)
			continue
		}
		agree++
	}
	for in := range crawlerCommonsDeviations {
		if !seen[in] {
			t.Errorf("documented deviation %q no longer in weirdToNormalizedUrls.csv", in)
		}
	}
	t.Logf("crawler-commons weirdToNormalizedUrls.csv: %d/%d agree, %d documented deviations", agree, len(recs), differ)
}

func TestConformanceInvalidURLs(t *testing.T) {
	f, err := os.Open(testutil.ConformanceFile(t, "url/invalidUrls.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := newTestCanon(t)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		n++
		if u, err := c.Canonicalize(line); err == nil {
			t.Errorf("Canonicalize(%q) = %s, want an error", line, u)
		}
	}
	if n == 0 {
		t.Fatalf("no cases in invalidUrls.csv")
	}
	t.Logf("crawler-commons invalidUrls.csv: %d/%d rejected", n, n)
}

// nutchMinAgree is the number of cases of nutch-regex-normalize-default.test
// on which Canonicalize (with DefaultStripParams) gives exactly Nutch's
// result. It must not drop; raise it when more cases agree.
const nutchMinAgree = 27

// defaultPage matches Nutch's default page removal cases.
var defaultPage = regexp.MustCompile(`(?i)/(index|default)\.[a-z0-9]+$`)

// emptySegments matches runs of slashes (empty path segments).
var emptySegments = regexp.MustCompile(`/{2,}`)

// nutchClass is a class of cases of Nutch's regex-normalize default where
// we deliberately choose differently. agrees reports whether our result got
// is exactly what our documented choice predicts for input in, given
// Nutch's result want: compared modulo that choice where a fair comparison
// exists.
type nutchClass struct {
	name    string
	why     string
	matches func(in, want string) bool
	agrees  func(t *testing.T, got result, in, want string) bool
}

func nutchClasses(t *testing.T) []nutchClass {
	withSID, err := NewCanonicalizer(append(DefaultStripParams(), "sid", "_sid"))
	if err != nil {
		t.Fatal(err)
	}
	return []nutchClass{{
		// Nutch ships this rule commented out in its default
		// regex-normalize.xml ("uncommented here for testing").
		name: "default page",
		why:  "default pages (index.html, default.asp, ...) are not removed: / and /index.html can be different resources (a directory listing, index.php beside index.html), and a redirect between them is followed anyway",
		matches: func(in, want string) bool {
			return defaultPage.MatchString(in) && strings.HasSuffix(want, "/")
		},
		// Modulo the default page: ours with it removed is Nutch's.
		agrees: func(_ *testing.T, got result, _, want string) bool {
			return !got.Err && defaultPage.ReplaceAllString(got.URL, "/") == want
		},
	}, {
		name: "query after fragment",
		why:  `"?x=y" after "#" belongs to the fragment (RFC 3986, WHATWG), which is removed as a whole; Nutch's regex keeps it as a query`,
		matches: func(in, _ string) bool {
			_, frag, ok := strings.Cut(in, "#")
			return ok && strings.ContainsAny(frag, "?&")
		},
		// No fair comparison: the two read different URLs. Ours is the
		// input without its fragment.
		agrees: func(_ *testing.T, got result, in, _ string) bool {
			before, _, _ := strings.Cut(in, "#")
			return !got.Err && got.URL == before
		},
	}, {
		name:    "file scheme",
		why:     whyScheme,
		matches: func(in, _ string) bool { return strings.HasPrefix(in, "file:") },
		agrees:  func(_ *testing.T, got result, _, _ string) bool { return got.Err },
	}, {
		name: "empty path segments",
		why:  whySlashes,
		matches: func(in, _ string) bool {
			_, rest, _ := strings.Cut(in, "://")
			return strings.Contains(rest, "//")
		},
		// Modulo empty segments: ours with "//" collapsed in the path is
		// Nutch's.
		agrees: func(_ *testing.T, got result, _, want string) bool {
			scheme, rest, ok := strings.Cut(got.URL, "://")
			return !got.Err && ok && scheme+"://"+emptySegments.ReplaceAllString(rest, "/") == want
		},
	}, {
		name: "sid without a session-token value",
		why:  `"sid" and "_sid" are stripped only when the value looks like a session token (DefaultStripParams): they are often content ids (Slashdot story ids); "sid=xyz" could be either`,
		matches: func(in, want string) bool {
			return sessionSID.MatchString(in) && !sessionSID.MatchString(want)
		},
		// Modulo that choice: with sid and _sid stripped whatever their
		// value, we agree.
		agrees: func(t *testing.T, got result, in, want string) bool {
			g := canonResult(withSID, in)
			if g.URL != want {
				t.Errorf("%q with sid and _sid always stripped: got %+v, want %q", in, g, want)
			}
			return !got.Err && got.URL != want && g.URL == want
		},
	}}
}

// sessionSID matches the "sid" and "_sid" parameters Nutch strips.
var sessionSID = regexp.MustCompile(`[?&;]_?sid=`)

// TestConformanceNutchSessionIDs runs every pair of Nutch's
// regex-normalize-default.test through Canonicalize. Each case either
// agrees exactly or falls in a class of nutchClasses, where our result must
// be exactly what the documented choice predicts (compared modulo the
// choice where that is fair).
func TestConformanceNutchSessionIDs(t *testing.T) {
	f, err := os.Open(testutil.ConformanceFile(t, "url/nutch-regex-normalize-default.test"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := newTestCanon(t)
	classes := nutchClasses(t)
	type counts struct{ cases, agree, modulo int }
	sections := map[string]*counts{}
	perClass := map[string]int{}
	var order []string
	var total counts
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "# ") && !strings.Contains(line, "License") && !strings.Contains(line, "licenses") {
			section = strings.TrimPrefix(line, "# ")
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || line[0] == '#' {
			continue
		}
		in, want := fields[0], fields[1]
		cnt := sections[section]
		if cnt == nil {
			cnt = &counts{}
			sections[section] = cnt
			order = append(order, section)
		}
		cnt.cases++
		total.cases++
		got := canonResult(c, in)
		if !got.Err && got.URL == want {
			cnt.agree++
			total.agree++
			checkCanonical(t, c, got.URL)
			continue
		}
		explained := false
		for _, cl := range classes {
			if cl.matches(in, want) {
				if !cl.agrees(t, got, in, want) {
					t.Errorf("%q: got %+v, want %q; documented choice %q (%s) does not explain the difference", in, got, want, cl.name, cl.why)
				}
				explained = true
				perClass[cl.name]++
				cnt.modulo++
				total.modulo++
				break
			}
		}
		if !explained {
			t.Errorf("%q: got %+v, want %q", in, got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range order {
		cnt := sections[s]
		t.Logf("nutch %q: %d/%d agree, %d differ by a documented choice", s, cnt.agree, cnt.cases, cnt.modulo)
	}
	for _, cl := range classes {
		t.Logf("nutch: %d cases differ by choice %q: %s", perClass[cl.name], cl.name, cl.why)
	}
	t.Logf("nutch regex-normalize-default.test: %d/%d agree exactly, %d more agree modulo a documented choice, %d disagree",
		total.agree, total.cases, total.modulo, total.cases-total.agree-total.modulo)
	if total.agree < nutchMinAgree {
		t.Errorf("%d cases agree exactly, fewer than the %d reached before", total.agree, nutchMinAgree)
	}
}

// TestConformanceSSRFHostForms checks that the numeric host forms of
// security/ssrf_vectors.json canonicalize to the IP address they reach,
// which netguard refuses.
func TestConformanceSSRFHostForms(t *testing.T) {
	data, err := os.ReadFile(testutil.ConformanceFile(t, "security/ssrf_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		HostForms []string `json:"url_host_forms_that_must_be_blocked_safeurl"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.HostForms) == 0 {
		t.Fatalf("no host forms")
	}
	c := newTestCanon(t)
	for _, form := range v.HostForms {
		u, err := c.Canonicalize("http://" + form)
		if err != nil {
			t.Errorf("http://%s: %v", form, err)
			continue
		}
		ip, err := netip.ParseAddr(u.Hostname())
		if err != nil {
			t.Errorf("http://%s canonicalizes to %s, whose host is not an IP address", form, u)
			continue
		}
		if !netguard.IsBlocked(ip) {
			t.Errorf("http://%s canonicalizes to %s, not blocked by netguard", form, u)
		}
	}
}

// TestConformanceFixedPoint checks, on every input of the URL suites, that
// what Canonicalize and Resolve accept comes out as a fixed point that
// survives a round trip through net/url.
func TestConformanceFixedPoint(t *testing.T) {
	c := newTestCanon(t)
	var inputs []string
	data, err := os.ReadFile(testutil.ConformanceFile(t, "url/urltestdata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	for _, r := range entries {
		var e wptEntry
		if json.Unmarshal(r, &e) == nil {
			inputs = append(inputs, e.Input, e.Href)
			if e.Base != nil {
				inputs = append(inputs, *e.Base)
			}
		}
	}
	f, err := os.Open(testutil.ConformanceFile(t, "url/weirdToNormalizedUrls.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment, r.FieldsPerRecord = '#', -1
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		inputs = append(inputs, rec...)
	}
	bases := []*url.URL{nil}
	for _, b := range []string{"http://example.org/foo/bar", "https://u:p@example.com:8443/a/b?c#d"} {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, u)
	}
	accepted := 0
	for _, in := range inputs {
		for _, b := range bases {
			if u, err := c.Resolve(b, in); err == nil {
				accepted++
				checkCanonical(t, c, u.String())
			}
		}
	}
	t.Logf("%d inputs, %d accepted results checked", len(inputs), accepted)
}
