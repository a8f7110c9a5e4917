package rules

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/extract"
)

var opts = LoadOptions{ProxyPools: []string{"residential", "datacenter"}}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

var ignoreCompiled = cmp.Options{
	cmpopts.IgnoreUnexported(RuleSet{}, Render{}, MaybeDynamic{}, ItemRule{}),
	cmpopts.IgnoreFields(ItemRule{}, "Extractor"),
}

func TestParseEveryKey(t *testing.T) {
	s, err := LoadDir("testdata/valid", opts)
	if err != nil {
		t.Fatal(err)
	}
	tr := func(op string) extract.Transform { return extract.Transform{Op: op} }
	want := []*RuleSet{{
		Name:     "full",
		File:     "full.yaml",
		Hosts:    []string{"shop.example.com", "*.cdn.example.com", "xn--bcher-kva.example"},
		URLs:     []string{`^https://shop\.example\.com/`},
		Priority: 7,
		Scope:    Scope{Allow: []string{"/products/", "/category/"}, Deny: []string{"/cart"}, MaxDepth: 4},
		Strategy: "dfs",
		Sitemaps: "seed",
		Politeness: Politeness{
			Delay: ptr(1500 * time.Millisecond), Jitter: ptr(0.25), Concurrency: ptr(3),
		},
		Session: Session{Proxies: ptr(false), ProxyPool: "residential", Cookies: ptr(true)},
		Fetch: Fetch{
			UserAgents:    []string{"Mozilla/5.0 (X11; Linux x86_64) ShopBot/2", "ShopBot/2 (+https://shop.example.com/bot)"},
			Headers:       http.Header{"Accept-Language": {"fr-FR"}, "X-Api-Key": {"12345"}},
			RetryStatuses: []int{403, 503},
			Timeout:       12 * time.Second,
		},
		Render: []*Render{
			{
				Match: []string{"/search"}, WaitSelector: ".results", WaitNetworkIdle: true,
				Timeout: 45 * time.Second, Scroll: 2, Click: &Click{Selector: "button.more", Times: 4},
				Block: []string{"image", "font", "media", "stylesheet"},
			},
			{Match: []string{"/app/"}, Timeout: DefaultRenderTimeout},
			{Timeout: DefaultRenderTimeout, MaybeDynamic: &MaybeDynamic{Match: []string{"/category/"}, MinLinks: 5}},
		},
		Items: []*ItemRule{
			{
				Name:  "product",
				Match: []string{"/products/"},
				Fields: []extract.Field{
					{Name: "title", CSS: "h1", Required: true, Transform: []extract.Transform{tr("trim"), tr("collapse_space")}},
					{Name: "images", CSS: "img", Attr: "src", List: true, Type: "url"},
					{Name: "sku", XPath: `//span[@itemprop="sku"]`, Transform: []extract.Transform{tr("upper"), tr("lower"), {Op: "replace", Pattern: "^sku-"}}},
					{Name: "price", Regex: `price: (\d+)`, Type: "number", Transform: []extract.Transform{tr("number")}},
					{Name: "stock", JSON: "offers.availability", Type: "string"},
					{Name: "tags", CSS: "li", List: true, Type: "integer", Transform: []extract.Transform{
						{Op: "join", Sep: " "}, {Op: "join", Sep: ", "}, tr("absolute_url"), tr("integer"),
					}},
				},
			},
			{Name: "any", Fields: []extract.Field{{Name: "t", CSS: "title", Type: "boolean"}}},
		},
		Schedule: "@every 6h",
	}}
	if diff := cmp.Diff(want, s.Sets, ignoreCompiled); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, it := range s.Sets[0].Items {
		if it.Extractor == nil {
			t.Errorf("item %s has no extractor", it.Name)
		}
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if next, ok := s.Sets[0].NextRun(base); !ok || !next.Equal(base.Add(6*time.Hour)) {
		t.Errorf("NextRun = %v %v", next, ok)
	}
}

func TestInvalidFiles(t *testing.T) {
	tests := map[string][]string{
		"alias.yaml": {"3:7: aliases (*h) are not supported in rule files"},
		"bad_duration.yaml": {
			`2:10: bad duration "2 parsecs": want a number with a unit such as 500ms, 2s or 1m`,
			`5:14: bad duration "-5s": must be >= 0`,
		},
		"bad_regex.yaml": {
			"3:5: bad regex: error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
			"6:7: empty regex would match every url",
			"7:7: bad regex: error parsing regexp: missing closing ): `a(b`",
		},
		"bad_schedule.yaml": {`1:11: bad schedule "61 * * * *": end of range (61) above maximum (59): 61`},
		"bad_selector.yaml": {
			`5:14: field "title": css: compile css selector: expected identifier, found [ instead`,
			`7:16: field "sku": xpath: compile xpath: `,
			"12:13: field \"price\": transform[1]: replace: compile pattern: error parsing regexp: missing closing ): `(`",
			`14:15: field "x": json: parse json path "$.a[": at offset 4: unterminated [`,
			`17:20: bad css selector: compile css selector: expected identifier, found > instead`,
		},
		"bad_values.yaml": {
			`1:7: rule set name "bad name!": want 1 to 64 of A-Z a-z 0-9 _ . - (set name:)`,
			`2:9: host "shop.example.com:8080": want a bare host name such as example.com or *.example.com`,
			`3:11: unknown strategy "random" (want bfs or dfs)`,
			`5:11: jitter 11 must be between 0 and 10`,
			`6:16: concurrency 0 must be >= 1`,
			`8:15: unknown proxy pool "residentail" (known: datacenter, residential) (did you mean "residential"?)`,
			`11:20: unknown resource type "video" (want one of image, font, media, stylesheet)`,
			`12:13: scroll -1 must be >= 0`,
			`13:5: render rule: want match (URLs always rendered) or maybe_dynamic`,
			`14:11: unknown sitemaps mode "always" (want robots, seed or off)`,
		},
		"bad_fetch.yaml": {
			`2:25: user agent "": empty`,
			`2:29: user agent "two\nlines": control characters (CR, LF...) are not allowed`,
			`4:5: header "User-Agent" may not be set by a rule file (set fetch.user_agents)`,
			`5:5: header name "bad name": want letters, digits and - (RFC 9110 token)`,
			`7:5: duplicate header "X-Ok"`,
			`8:13: header X-List: want a string, got a list`,
			`9:5: header "Host" may not be set by a rule file (the URL's)`,
			`10:25: retry status 302: want a 4xx or 5xx status (400 to 599)`,
			`10:30: duplicate retry status 404`,
			`10:35: retry_statuses: want an integer status, got the string "500"`,
			`10:42: retry status 600: want a 4xx or 5xx status (400 to 599)`,
			`11:12: timeout must be > 0 (leave it out for fetch.timeout)`,
			`12:3: unknown key "timout" in fetch (did you mean "timeout"?)`,
		},
		"duplicates.yaml": {
			`2:1: duplicate key "hosts" in rule file`,
			`5:41: field "t": name: duplicate field name "t"`,
			`6:11: duplicate item name "p"`,
		},
		"empty.yaml": {"1: empty rule file"},
		"fields.yaml": {
			`4:9: field "a": no source: want one of css, xpath, regex, json`,
			`5:35: field "b": regex: more than one source (css, regex): want exactly one`,
			`6:34: field "c": type: unknown type "float" (want one of string, number, integer, boolean, url)`,
			`7:35: field "d": attr: attr applies only to css and xpath`,
			`8:47: transform join: want a separator string`,
			`9:9: field #6: name: empty name`,
			`10:5: item: missing name`,
		},
		"list.yaml":   {"1:1: a rule file is a mapping of keys (name, hosts, ...), got a list"},
		"syntax.yaml": {"2: yaml: did not find expected key"},
		// every invalid selector is reported, also of a field with another
		// error; unknown keys get a suggestion at every level, the names
		// other scrapers use too (selector: css)
		"selector_with_other_errors.yaml": {
			`6:28: field "title": css: compile css selector: expected identifier, found EOF instead`,
			`6:48: required: want true or false, got the string "yes"`,
			`7:25: field "t2": css: compile css selector: expected identifier, found EOF instead`,
			`7:32: unknown key "slector" in field (did you mean "css"?)`,
			`8:20: unknown key "selector" in field (did you mean "css"?)`,
			`9:29: unknown key "types" in field (did you mean "type"?)`,
			`11:13: types: "html" is not a media type (text/html, application/json, text/*, */*)`,
		},
		"unknown_key.yaml": {
			`1:1: unknown key "hostz" in rule file (did you mean "hosts"?)`,
			`6:7: unknown key "slector" in click (did you mean "selector"?)`,
			`10:28: unknown key "requird" in field (did you mean "required"?)`,
		},
		"wrong_type.yaml": {
			`1:8: hosts: want a list, got the string "shop.example.com"`,
			`2:11: priority: want an integer, got the string "high"`,
			`4:14: max_depth: want an integer, got the string "3"`,
			`6:12: cookies: want true or false, got the string "maybe"`,
			`7:13: politeness: want a mapping, got a list`,
		},
	}
	ents, err := os.ReadDir("testdata/invalid")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(tests) {
		t.Errorf("%d files in testdata/invalid, %d test cases", len(ents), len(tests))
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata/invalid", name))
			if err != nil {
				t.Fatal(err)
			}
			_, err = build("rules", map[string][]byte{name: b}, opts)
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %v is not Errors", err)
			}
			var got []string
			for i, e := range es {
				s := e.Error()
				prefix := "rules/" + name + ":"
				if !strings.HasPrefix(s, prefix) {
					t.Errorf("error %q does not start with %q", s, prefix)
				}
				s = strings.TrimPrefix(s, prefix)
				if i < len(want) && strings.HasSuffix(want[i], " ") && strings.HasPrefix(s, want[i]) {
					s = want[i] // a third-party message: checked as a prefix
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDuplicateNamesAndIgnoredFiles(t *testing.T) {
	_, err := LoadDir("testdata/dupnames", opts)
	want := "testdata/dupnames/b.yaml:2:7: duplicate rule set name \"shop\" (also in testdata/dupnames/a.yaml)\n" +
		"testdata/dupnames/shop.yml:1:1: duplicate rule set name \"shop\" (also in testdata/dupnames/a.yaml)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if err := Check("testdata/missing", opts); err == nil {
		t.Error("Check of a missing directory succeeded")
	}
}

func TestRepoRules(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(t), "rules", "examples")
	// as `master rules check rules/examples` does with the default config
	if err := Check(dir, LoadOptions{}); err != nil {
		t.Fatalf("the repository's rules do not validate:\n%v", err)
	}
	s, err := LoadDir(dir, LoadOptions{ProxyPools: []string{"residential"}})
	if err != nil {
		t.Fatal(err)
	}
	shop := s.Match(mustURL(t, "https://shop.example.com/products/al-15"))
	if shop == nil || shop.Name != "example-shop" {
		t.Fatalf("Match(shop product) = %v", shop)
	}
	if f := shop.Fetch; len(f.UserAgents) != 2 || f.Headers.Get("Accept-Language") == "" || len(f.RetryStatuses) != 5 || f.Timeout != 20*time.Second {
		t.Errorf("Fetch = %+v", f)
	}
	if got := names(shop.ItemsFor(mustURL(t, "https://shop.example.com/products/al-15"))); !cmp.Equal(got, []string{"product"}) {
		t.Errorf("ItemsFor = %v", got)
	}
	r := shop.RenderFor(mustURL(t, "https://shop.example.com/search/?q=x"))
	if r == nil || r.Click == nil || r.Click.Times != 5 || r.Scroll != 3 {
		t.Errorf("RenderFor(search) = %+v", r)
	}
	cat := mustURL(t, "https://shop.example.com/category/laptops")
	if shop.RenderFor(cat) != nil {
		t.Error("category pages are rendered always")
	}
	if md := shop.MaybeDynamicFor(cat); md == nil || !md.ShouldRender(3) || md.ShouldRender(10) {
		t.Errorf("MaybeDynamicFor(category) = %+v", md)
	}
	if ok, reason := shop.InScope(mustURL(t, "https://shop.example.com/products/x/cart"), 1); ok || reason != "deny" {
		t.Errorf("InScope(cart) = %v %q", ok, reason)
	}
	if ok, reason := shop.InScope(mustURL(t, "https://shop.example.com/products/x"), 6); ok || reason != "depth" {
		t.Errorf("InScope(depth 6) = %v %q", ok, reason)
	}
	if ok, _ := shop.InScope(mustURL(t, "https://shop.example.com/products/x"), 5); !ok {
		t.Error("InScope(product) = false")
	}
	news := s.Match(mustURL(t, "https://news.example.org/2024/05/a-story"))
	if news == nil || news.Name != "example-news" || news.Strategy != "dfs" {
		t.Fatalf("Match(news) = %+v", news)
	}
	ex := news.ItemsFor(mustURL(t, "https://news.example.org/2024/05/a-story"))[0].Extractor
	item, errs := ex.Extract(extract.Document{
		URL: mustURL(t, "https://news.example.org/2024/05/a-story"), ContentType: "text/html",
		Body: []byte(`<article><h1>Big news</h1><p class=byline><a rel=author>Ann</a></p><time datetime="2024-05-01">May 1</time>
<div class=body><p>One  two.</p><p>Three.</p></div></article>`),
	})
	wantItem := extract.Item{"headline": "Big news", "author": "Ann", "published": "2024-05-01", "body": "One two.\n\nThree."}
	if diff := cmp.Diff(wantItem, item); diff != "" || len(errs) > 0 {
		t.Errorf("news item (-want +got):\n%s%v", diff, errs)
	}
}

func names(items []*ItemRule) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

// setOf builds a Set from file name -> contents.
func setOf(t testing.TB, files map[string]string) *Set {
	t.Helper()
	m := map[string][]byte{}
	for k, v := range files {
		m[k] = []byte(v)
	}
	s, err := build("", m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMatchPrecedence(t *testing.T) {
	s := setOf(t, map[string]string{
		"a-default.yaml":  "priority: 0\nschedule: '@daily'\n",
		"b-wild.yaml":     "hosts: ['*.example.com']\n",
		"c-wildsub.yaml":  "hosts: ['*.shop.example.com']\n",
		"d-exact.yaml":    "hosts: [shop.example.com]\n",
		"e-exact2.yaml":   "hosts: [shop.example.com]\n",
		"f-urls.yaml":     "hosts: [shop.example.com]\nurls: ['/special/']\npriority: 1\n",
		"g-prio.yaml":     "urls: ['/vip/']\npriority: 5\n",
		"h-wildprio.yaml": "hosts: ['*.example.com']\nurls: ['/promo/']\npriority: 2\n",
	})
	tests := []struct{ url, want string }{
		{"https://shop.example.com/x", "d-exact"},           // exact beats wildcard and no-host, first file wins a tie
		{"https://a.shop.example.com/x", "c-wildsub"},       // the longer wildcard
		{"https://shop.example.com/special/1", "f-urls"},    // urls regex and priority 1
		{"https://other.example.com/x", "b-wild"},           // wildcard
		{"https://example.com/x", "b-wild"},                 // *.example.com covers example.com
		{"https://SHOP.example.com./x", "d-exact"},          // case and trailing dot
		{"https://elsewhere.org/x", "a-default"},            // no hosts
		{"https://shop.example.com/vip/special/", "g-prio"}, // priority beats specificity
		{"https://x.shop.example.com/promo/", "h-wildprio"},
	}
	for _, tt := range tests {
		got := s.Match(mustURL(t, tt.url))
		if got == nil || got.Name != tt.want {
			t.Errorf("Match(%s) = %v, want %s", tt.url, got, tt.want)
		}
	}
	none := setOf(t, map[string]string{"x.yaml": "hosts: [a.example.com]\n"})
	if got := none.Match(mustURL(t, "https://b.example.com/")); got != nil {
		t.Errorf("Match = %v, want nil", got.Name)
	}
	if got := (*Set)(nil).Match(mustURL(t, "https://b.example.com/")); got != nil {
		t.Error("nil set matched")
	}
}

func TestVersionAndRoundTrip(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "hosts: [a.example.com]\n")
	write("b.yml", "hosts: [b.example.com]\nitems: [{name: t, fields: [{name: t, css: title}]}]\n")
	s1, err := LoadDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := LoadDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Version != s2.Version || len(s1.Version) != 64 {
		t.Errorf("version not stable: %s %s", s1.Version, s2.Version)
	}
	if !cmp.Equal(s1.Files, []string{"a.yaml", "b.yml"}) {
		t.Errorf("Files = %v", s1.Files)
	}

	b, err := s1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s3, err := Unmarshal(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s3.Version != s1.Version {
		t.Errorf("version changed in the round trip: %s -> %s", s1.Version, s3.Version)
	}
	if diff := cmp.Diff(s1.Sets, s3.Sets, ignoreCompiled); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if s3.Match(mustURL(t, "https://b.example.com/")).Name != "b" {
		t.Error("round-tripped set does not match")
	}
	if _, err := Unmarshal([]byte(strings.Replace(string(b), s1.Version, strings.Repeat("0", 64), 1)), opts); err == nil {
		t.Error("Unmarshal accepted a wrong version")
	}
	if _, err := Unmarshal([]byte(`{"files":[{"name":"../x.yaml","data":""}]}`), opts); err == nil {
		t.Error("Unmarshal accepted a path")
	}
	write("a.yaml", "hosts: [a.example.com]\npriority: 1\n")
	s4, err := LoadDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s4.Version == s1.Version {
		t.Error("version unchanged after an edit")
	}
	if err := os.Rename(filepath.Join(dir, "a.yaml"), filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	s5, err := LoadDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s5.Version == s4.Version {
		t.Error("version unchanged after a rename")
	}
}

func TestUnknownPoolOnSlave(t *testing.T) {
	s := setOf(t, map[string]string{"a.yaml": "session: {proxy_pool: residential}\n"})
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Unmarshal(b, LoadOptions{ProxyPools: []string{"datacenter"}})
	if err == nil || !strings.Contains(err.Error(), `a.yaml:1:23: unknown proxy pool "residential"`) {
		t.Errorf("got %v", err)
	}
}

func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata/valid", "testdata/invalid", "../../rules"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && isRuleFile(e.Name()) {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := build("", map[string][]byte{"f.yaml": b}, opts)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not a non-empty Errors", err)
			}
			for _, e := range es {
				if strings.Contains(e.Msg, "internal error") {
					t.Fatalf("panic: %v", e)
				}
			}
			return
		}
		u := mustURL(t, "https://a.example.com/x")
		if rs := s.Match(u); rs != nil {
			rs.InScope(u, 1)
			rs.RenderFor(u)
			for _, it := range rs.ItemsFor(u) {
				it.Extractor.Extract(extract.Document{URL: u, Body: []byte("<h1>x</h1>")})
			}
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	files := map[string]string{}
	for i := range 100 {
		var body string
		switch i % 4 {
		case 0:
			body = fmt.Sprintf("hosts: [site%d.example.com, www.site%d.example.com]\n", i, i)
		case 1:
			body = fmt.Sprintf("hosts: ['*.site%d.example.org']\nurls: ['^https://[^/]+/p/']\n", i)
		case 2:
			body = fmt.Sprintf("hosts: [site%d.example.net]\npriority: %d\n", i, i%3)
		default:
			body = fmt.Sprintf("urls: ['^https://nohost%d\\.example\\.com/']\n", i)
		}
		files[fmt.Sprintf("r%03d.yaml", i)] = body
	}
	s := setOf(b, files)
	u := mustURL(b, "https://a.b.site49.example.org/p/123")
	if rs := s.Match(u); rs == nil || rs.Name != "r049" {
		b.Fatalf("Match = %v", rs)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Match(u)
	}
}

// TestItemAppliesTo: an item rule runs on HTML by default, on JSON too when
// every field is a JSON path, and on what its types say when it has some.
func TestItemAppliesTo(t *testing.T) {
	css := []extract.Field{{Name: "t", CSS: "h1"}}
	jsonOnly := []extract.Field{{Name: "id", JSON: "$.id"}}
	tests := []struct {
		name string
		it   ItemRule
		mt   string
		want bool
	}{
		{"css on html", ItemRule{Fields: css}, "text/html", true},
		{"css on xhtml", ItemRule{Fields: css}, "application/xhtml+xml", true},
		{"css on python", ItemRule{Fields: css}, "text/x-python", false},
		{"css on json", ItemRule{Fields: css}, "application/json", false},
		{"css on pdf", ItemRule{Fields: css}, "application/pdf", false},
		{"json paths on json", ItemRule{Fields: jsonOnly}, "application/json", true},
		{"json paths on ld+json", ItemRule{Fields: jsonOnly}, "application/ld+json", true},
		{"json paths on html", ItemRule{Fields: jsonOnly}, "text/html", true},
		{"json paths on text", ItemRule{Fields: jsonOnly}, "text/plain", false},
		{"types exact", ItemRule{Fields: css, Types: []string{"text/plain"}}, "text/plain", true},
		{"types exact, html not", ItemRule{Fields: css, Types: []string{"text/plain"}}, "text/html", false},
		{"types group", ItemRule{Fields: css, Types: []string{"text/*"}}, "text/x-python", true},
		{"types any", ItemRule{Fields: css, Types: []string{"*/*"}}, "application/pdf", true},
		{"upper case type", ItemRule{Fields: css}, "TEXT/HTML", true},
	}
	for _, tc := range tests {
		if got := tc.it.AppliesTo(tc.mt); got != tc.want {
			t.Errorf("%s: AppliesTo(%q) = %v, want %v", tc.name, tc.mt, got, tc.want)
		}
	}
}
