package testsite

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"golang.org/x/net/html"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start starts a site and closes it when the test ends.
func start(t testing.TB, opts Options) *Site {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start(%+v): %v", opts, err)
	}
	t.Cleanup(s.Close)
	return s
}

// newClient returns a client with its own transport that doesn't follow
// redirects.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// response is a fetched response, body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

// fetch GETs u with optional header key/value pairs.
func fetch(t testing.TB, c *http.Client, u string, kv ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", u, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// hrefs returns the links of an HTML page fetched from u, resolved
// against u or the page's <base href>, fragments removed.
func hrefs(t testing.TB, u *url.URL, body []byte) []*url.URL {
	t.Helper()
	base := u
	var raw []string
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		for hasAttr {
			var k, v []byte
			k, v, hasAttr = z.TagAttr()
			if string(k) != "href" {
				continue
			}
			switch string(name) {
			case "base":
				if base == u {
					b, err := u.Parse(string(v))
					if err != nil {
						t.Fatalf("%s: bad <base href=%q>: %v", u, v, err)
					}
					base = b
				}
			case "a":
				raw = append(raw, string(v))
			}
		}
	}
	var out []*url.URL
	for _, r := range raw {
		l, err := base.Parse(r)
		if err != nil {
			t.Fatalf("%s: bad href %q: %v", u, r, err)
		}
		l.Fragment, l.RawFragment = "", ""
		out = append(out, l)
	}
	return out
}

// crawl is a sequential breadth-first crawler: it follows links and
// redirects from seeds, skips /private/ and non-HTTP links, retries a 500
// or 429 once, and returns the number of requests per URL. visit, if not
// nil, sees every HTML body.
func crawl(t testing.TB, c *http.Client, seeds []string, visit func(u string, body []byte)) map[string]int {
	t.Helper()
	counts := map[string]int{}
	seen := map[string]bool{}
	queue := append([]string(nil), seeds...)
	for _, s := range seeds {
		seen[s] = true
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		r := fetch(t, c, u)
		counts[u]++
		if r.status == http.StatusInternalServerError || r.status == http.StatusTooManyRequests {
			r = fetch(t, c, u)
			counts[u]++
		}
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		var links []*url.URL
		switch {
		case r.status >= 300 && r.status < 400:
			l, err := pu.Parse(r.header.Get("Location"))
			if err != nil {
				t.Fatalf("%s: bad Location: %v", u, err)
			}
			links = append(links, l)
		case r.status == http.StatusOK && strings.HasPrefix(r.header.Get("Content-Type"), "text/html"):
			if visit != nil {
				visit(u, r.body)
			}
			links = hrefs(t, pu, r.body)
		}
		for _, l := range links {
			if l.Scheme != "http" || strings.HasPrefix(l.Path, "/private/") {
				continue
			}
			if s := l.String(); !seen[s] {
				seen[s] = true
				queue = append(queue, s)
			}
		}
	}
	return counts
}

// withoutRobots drops /robots.txt from hit counts.
func withoutRobots(m map[string]int) map[string]int {
	out := map[string]int{}
	for u, n := range m {
		if !strings.HasSuffix(u, "/robots.txt") {
			out[u] = n
		}
	}
	return out
}

func TestExpectedStatuses(t *testing.T) {
	s := start(t, Options{Hosts: 5, Robots: true, Specials: true, Seed: 3})
	c := newClient(t)
	exp := s.Expected()
	o := s.Options()
	if want := o.Hosts*o.PagesPerHost + redirectHops + 3; len(exp) != want {
		t.Errorf("Expected has %d URLs, want %d", len(exp), want)
	}
	for h := range o.Hosts {
		for p := range o.PagesPerHost {
			if u := s.PageURL(h, p); exp[u] != 1 {
				t.Fatalf("Expected[%s] = %d, want 1", u, exp[u])
			}
		}
	}
	root := strings.TrimSuffix(s.HostURLs()[0], "/")
	target := s.PageURL(0, o.PagesPerHost/2)
	special := map[string]struct {
		count, status int
		location      string // resolved
	}{
		"/redirect/1":  {1, 301, root + "/redirect/2"},
		"/redirect/2":  {1, 302, root + "/redirect/3"},
		"/redirect/3":  {1, 301, target},
		"/missing":     {1, 404, ""},
		"/flaky":       {2, 500, ""},
		"/retry-after": {2, 429, ""},
	}
	for p, want := range special {
		if got := exp[root+p]; got != want.count {
			t.Errorf("Expected[%s] = %d, want %d", p, got, want.count)
		}
	}
	for u, n := range exp {
		pu, err := url.Parse(u)
		if err != nil || pu.String() != u || pu.Fragment != "" || pu.RawQuery != "" {
			t.Errorf("Expected key %q is not canonical (%v)", u, err)
		}
		if strings.Contains(u, "/private/") || strings.HasSuffix(u, "/robots.txt") || n < 1 {
			t.Errorf("Expected[%s] = %d", u, n)
		}
		r := fetch(t, c, u)
		want, isSpecial := special[strings.TrimPrefix(u, root)]
		if !isSpecial {
			if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("GET %s: %d %q, want 200 text/html; charset=utf-8", u, r.status, r.header.Get("Content-Type"))
			}
			continue
		}
		if r.status != want.status {
			t.Errorf("GET %s: %d, want %d", u, r.status, want.status)
		}
		if want.location != "" {
			loc := r.header.Get("Location")
			if strings.HasPrefix(loc, "http") {
				t.Errorf("GET %s: Location %q is absolute, want relative", u, loc)
			}
			got, err := url.Parse(u)
			if err == nil {
				got, err = got.Parse(loc)
			}
			if err != nil || got.String() != want.location {
				t.Errorf("GET %s: Location %q resolves to %v (%v), want %s", u, loc, got, err, want.location)
			}
		}
	}

	for _, u := range []string{
		root + "/page/0", root + "/page/007", root + "/page/-1", root + fmt.Sprintf("/page/%d", o.PagesPerHost),
		root + "/page/../page/3", root + "/nope", root + "/redirect/4", root + "/private/x",
		strings.TrimSuffix(s.HostURLs()[1], "/") + "/flaky",
	} {
		if r := fetch(t, c, u); r.status != 404 {
			t.Errorf("GET %s: %d, want 404", u, r.status)
		}
	}
}

func TestCrawlFindsExactlyExpected(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{Robots: true, Specials: true, Seed: 42}},
		{"five hosts 220 pages", Options{Hosts: 5, PagesPerHost: 220, LinksPerPage: 6, PageBytes: 2048, Robots: true, Specials: true, Seed: 7}},
		{"chain only", Options{Hosts: 3, PagesPerHost: 50, LinksPerPage: 1, CrossHostRatio: -1, PageBytes: 200, Seed: 1}},
		{"one host one page", Options{Hosts: 1, PagesPerHost: 1, Specials: true, Robots: true}},
		{"one host", Options{Hosts: 1, PagesPerHost: 300, Robots: true, Specials: true, Seed: -5}},
		{"all cross-host", Options{Hosts: 4, PagesPerHost: 60, CrossHostRatio: 1, Seed: 9, Gzip: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.opts)
			c := newClient(t)
			got := crawl(t, c, s.Seeds(), nil)
			if diff := cmp.Diff(s.Expected(), got); diff != "" {
				t.Errorf("crawl vs Expected (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(s.Expected(), withoutRobots(s.HitCounts())); diff != "" {
				t.Errorf("HitCounts vs Expected (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrickyLinksPresent(t *testing.T) {
	s := start(t, Options{Robots: true, Specials: true, Seed: 11})
	var all bytes.Buffer
	crawl(t, newClient(t), s.Seeds(), func(_ string, body []byte) { all.Write(body) })
	addr := strings.TrimPrefix(strings.TrimSuffix(s.HostURLs()[1], "/"), "http://")
	for _, pat := range []string{
		`<base href="/">`, `<base href="http://127\.0\.0\.\d+:\d+/">`, `href="page/\d+"`,
		`href="/page/\d+#top"`, `#x=1&amp;y=2"`, `href='/page/\.\./page/\d+'`, `href="\./\d+"`,
		`<A HREF="HTTP://127\.0\.0\.\d+:\d+/`, `href="//127\.0\.0\.\d+:\d+/`, `href="#top"`,
		`href="mailto:`, `href="javascript:`, `href="/private/\d+"`, `href="http://127\.0\.0\.\d+:\d+/private/\d+"`,
		`href="http://` + regexp.QuoteMeta(addr) + `/page/\d+"`,
	} {
		if !regexp.MustCompile(pat).Match(all.Bytes()) {
			t.Errorf("no page has %s", pat)
		}
	}
}

func TestFlakyAndReset(t *testing.T) {
	s := start(t, Options{Specials: true})
	c := newClient(t)
	u := strings.TrimSuffix(s.Seeds()[0], "/") + "/flaky"
	for i, want := range []int{500, 200, 200} {
		if r := fetch(t, c, u); r.status != want {
			t.Errorf("request %d: %d, want %d", i+1, r.status, want)
		}
	}
	s.ResetHits()
	if r := fetch(t, c, u); r.status != 500 {
		t.Errorf("after ResetHits: %d, want 500", r.status)
	}
	if h := s.Hits(); len(h) != 1 || h[0].Status != 500 {
		t.Errorf("hits after ResetHits: %+v", h)
	}
}

func TestRetryAfter(t *testing.T) {
	s := start(t, Options{Specials: true})
	c := newClient(t)
	u := strings.TrimSuffix(s.Seeds()[0], "/") + "/retry-after"
	r := fetch(t, c, u)
	if r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Errorf("first: %d Retry-After %q, want 429 and 1", r.status, r.header.Get("Retry-After"))
	}
	for i := range 2 {
		if r := fetch(t, c, u); r.status != 200 || r.header.Get("Retry-After") != "" {
			t.Errorf("request %d: %d Retry-After %q, want 200 without", i+2, r.status, r.header.Get("Retry-After"))
		}
	}
}

// TestFailingHosts: the failing hosts' roots link to /status/503, which
// always answers 503 with Retry-After: 2; other hosts have no such page,
// and Expected leaves it out.
func TestFailingHosts(t *testing.T) {
	s := start(t, Options{Hosts: 3, PagesPerHost: 5, FailingHosts: 2})
	c := newClient(t)
	for i, root := range s.HostURLs() {
		u := strings.TrimSuffix(root, "/") + FailingPath
		want, ra := 503, "2"
		if i >= 2 {
			want, ra = 404, ""
		}
		for range 2 {
			if r := fetch(t, c, u); r.status != want || r.header.Get("Retry-After") != ra {
				t.Errorf("host %d: %d Retry-After %q, want %d and %q", i, r.status, r.header.Get("Retry-After"), want, ra)
			}
		}
		if r := fetch(t, c, root); strings.Contains(string(r.body), FailingPath) != (i < 2) {
			t.Errorf("host %d: root links to %s: %v", i, FailingPath, !(i < 2))
		}
		if _, ok := s.Expected()[u]; ok {
			t.Errorf("%s in Expected", u)
		}
	}
}

func TestGzip(t *testing.T) {
	s := start(t, Options{Gzip: true, Seed: 5})
	c := newClient(t)
	u := s.PageURL(2, 17)
	plain := fetch(t, c, u, "Accept-Encoding", "identity")
	if plain.status != 200 || plain.header.Get("Content-Encoding") != "" || !bytes.Contains(plain.body, []byte("<title>Host 2 page 17</title>")) {
		t.Fatalf("identity: %d %q %.80q", plain.status, plain.header.Get("Content-Encoding"), plain.body)
	}
	zipped := fetch(t, c, u, "Accept-Encoding", "br, gzip;q=0.5")
	if zipped.header.Get("Content-Encoding") != "gzip" || zipped.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip: headers %v", zipped.header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped.body))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(unzipped, plain.body) || len(zipped.body) >= len(plain.body) {
		t.Errorf("gzip body: %d bytes, %d unzipped, identity %d", len(zipped.body), len(unzipped), len(plain.body))
	}
	if r := fetch(t, c, u, "Accept-Encoding", "gzip;q=0"); r.header.Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0: Content-Encoding %q", r.header.Get("Content-Encoding"))
	}

	// Go's transport asks for gzip and decompresses transparently.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !resp.Uncompressed || !bytes.Equal(body, plain.body) {
		t.Errorf("transparent gzip: uncompressed %v, body equal %v", resp.Uncompressed, bytes.Equal(body, plain.body))
	}

	off := start(t, Options{})
	if r := fetch(t, c, off.Seeds()[0], "Accept-Encoding", "gzip"); r.header.Get("Content-Encoding") != "" {
		t.Errorf("Gzip off: Content-Encoding %q", r.header.Get("Content-Encoding"))
	}
}

func TestHits(t *testing.T) {
	s := start(t, Options{Hosts: 2, Specials: true})
	c := newClient(t)
	before := time.Now()
	u1 := s.PageURL(1, 3) + "?a=1&b=2"
	fetch(t, c, u1, "User-Agent", "redcrawl-test/1", "X-Site-Key", "k1")
	fetch(t, c, s.HostURLs()[0]+"missing", "User-Agent", "other")
	after := time.Now()
	hits := s.Hits()
	host1 := strings.TrimPrefix(strings.TrimSuffix(s.HostURLs()[1], "/"), "http://")
	host0 := strings.TrimPrefix(strings.TrimSuffix(s.HostURLs()[0], "/"), "http://")
	want := []Hit{
		{Host: host1, Path: "/page/3?a=1&b=2", UserAgent: "redcrawl-test/1", Status: 200,
			Header: http.Header{"User-Agent": {"redcrawl-test/1"}, "X-Site-Key": {"k1"}, "Accept-Encoding": {"gzip"}}},
		{Host: host0, Path: "/missing", UserAgent: "other", Status: 404,
			Header: http.Header{"User-Agent": {"other"}, "Accept-Encoding": {"gzip"}}},
	}
	if diff := cmp.Diff(want, hits, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())); diff != "" {
		t.Errorf("Hits (-want +got):\n%s", diff)
	}
	for i, h := range hits {
		if h.At.Before(before) || h.At.After(after) || (i > 0 && h.At.Before(hits[i-1].At)) {
			t.Errorf("hit %d at %v, want in [%v, %v] and ordered", i, h.At, before, after)
		}
	}
	if diff := cmp.Diff(map[string]int{u1: 1, s.HostURLs()[0] + "missing": 1}, s.HitCounts()); diff != "" {
		t.Errorf("HitCounts (-want +got):\n%s", diff)
	}
	s.ResetHits()
	if len(s.Hits()) != 0 || len(s.HitCounts()) != 0 {
		t.Error("hits left after ResetHits")
	}
}

func TestConcurrentHits(t *testing.T) {
	s := start(t, Options{Hosts: 3})
	c := newClient(t)
	var wg sync.WaitGroup
	const workers, each = 8, 40
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				u := s.PageURL(w%3, i)
				resp, err := c.Get(u)
				if err != nil {
					t.Errorf("GET %s: %v", u, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if i%10 == 0 {
					_ = s.Hits()
					_ = s.HitCounts()
				}
			}
		})
	}
	wg.Wait()
	if n := len(s.Hits()); n != workers*each {
		t.Errorf("%d hits, want %d", n, workers*each)
	}
}

func TestRobots(t *testing.T) {
	s := start(t, Options{Hosts: 2, Robots: true})
	c := newClient(t)
	for _, root := range s.HostURLs() {
		r := fetch(t, c, root+"robots.txt")
		if r.status != 200 || string(r.body) != "User-agent: *\nDisallow: /private/\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
			t.Errorf("%srobots.txt: %d %q %q", root, r.status, r.header.Get("Content-Type"), r.body)
		}
		if r := fetch(t, c, root+"private/7"); r.status != 200 {
			t.Errorf("%sprivate/7: %d, want 200", root, r.status)
		}
	}
	off := start(t, Options{Hosts: 1})
	for _, p := range []string{"robots.txt", "private/7"} {
		if r := fetch(t, c, off.HostURLs()[0]+p); r.status != 404 {
			t.Errorf("Robots off: %s: %d, want 404", p, r.status)
		}
	}
}

func TestPageSize(t *testing.T) {
	for _, size := range []int{0, 1024, 20000} {
		s := start(t, Options{Hosts: 2, PagesPerHost: 20, PageBytes: size, Robots: true, Specials: true})
		want := s.Options().PageBytes
		c := newClient(t)
		for h := range 2 {
			for p := range 20 {
				r := fetch(t, c, s.PageURL(h, p))
				if n := len(r.body); n < want || n > want+100 {
					t.Errorf("PageBytes %d: %s is %d bytes", want, s.PageURL(h, p), n)
				}
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	opts := Options{Hosts: 3, PagesPerHost: 40, Robots: true, Specials: true, Seed: 99}
	a, b := start(t, opts), start(t, opts)
	opts.Seed = 100
	other := start(t, opts)
	c := newClient(t)
	// normalized fetches every page with addresses replaced by host numbers.
	normalized := func(s *Site) []string {
		var repl []string
		for i, root := range s.HostURLs() {
			repl = append(repl, strings.TrimPrefix(strings.TrimSuffix(root, "/"), "http://"), fmt.Sprintf("HOST%d", i))
		}
		r := strings.NewReplacer(repl...)
		var out []string
		for h := range 3 {
			for p := range 40 {
				out = append(out, r.Replace(string(fetch(t, c, s.PageURL(h, p)).body)))
			}
		}
		return out
	}
	na := normalized(a)
	if diff := cmp.Diff(na, normalized(b)); diff != "" {
		t.Errorf("same seed, different pages (-a +b):\n%s", diff)
	}
	if cmp.Equal(na, normalized(other)) {
		t.Error("different seeds, same pages")
	}
}

func TestLatency(t *testing.T) {
	const latency = 150 * time.Millisecond
	s := start(t, Options{Hosts: 1, Latency: latency})
	c := newClient(t)
	before := time.Now()
	fetch(t, c, s.Seeds()[0])
	if d := time.Since(before); d < latency {
		t.Errorf("response after %v, want ≥ %v", d, latency)
	}
	if h := s.Hits(); len(h) != 1 || h[0].At.Sub(before) > latency/2 {
		t.Errorf("hit recorded at %v after the request, want before the delay: %+v", h[0].At.Sub(before), h)
	}
}

func TestCloseReleasesPorts(t *testing.T) {
	s, err := Start(Options{Hosts: 3})
	if err != nil {
		t.Fatal(err)
	}
	roots := s.HostURLs()
	s.Close()
	s.Close() // idempotent
	for _, root := range roots {
		addr := strings.TrimSuffix(strings.TrimPrefix(root, "http://"), "/")
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still bound after Close: %v", addr, err)
			continue
		}
		ln.Close()
	}
}

func TestStartBindError(t *testing.T) {
	blocker, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	port := blocker.Addr().(*net.TCPAddr).Port
	_, err = Start(Options{Hosts: 3, Port: port})
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Start on a bound address: %v, want EADDRINUSE", err)
	}
	// Host 0 was bound before the failure and must have been released.
	blocker.Close()
	s := start(t, Options{Hosts: 2, Port: port})
	want := []string{fmt.Sprintf("http://127.0.0.2:%d/", port), fmt.Sprintf("http://127.0.0.3:%d/", port)}
	if diff := cmp.Diff(want, s.HostURLs()); diff != "" {
		t.Errorf("HostURLs with a fixed port (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:1], s.Seeds()); diff != "" {
		t.Errorf("Seeds (-want +got):\n%s", diff)
	}
	if got := s.PageURL(1, 5); got != want[1]+"page/5" {
		t.Errorf("PageURL(1, 5) = %s", got)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{
		{Hosts: -1}, {Hosts: 255}, {Port: -1}, {Port: 70000}, {PagesPerHost: -3},
		{LinksPerPage: -1}, {CrossHostRatio: 1.5}, {PageBytes: -1}, {Latency: -time.Second},
		{Hosts: 2, FailingHosts: 3}, {FailingHosts: -1},
	} {
		if s, err := Start(o); err == nil {
			s.Close()
			t.Errorf("Start(%+v) succeeded", o)
		} else if !strings.HasPrefix(err.Error(), "testsite: ") {
			t.Errorf("Start(%+v): %v", o, err)
		}
	}
}

func TestPageURLPanics(t *testing.T) {
	s := start(t, Options{Hosts: 1, PagesPerHost: 3})
	defer func() {
		if recover() == nil {
			t.Error("PageURL(0, 3) did not panic")
		}
	}()
	s.PageURL(0, 3)
}

func TestMethodAndHead(t *testing.T) {
	s := start(t, Options{Hosts: 1, Gzip: true})
	c := newClient(t)
	req, _ := http.NewRequest(http.MethodPost, s.Seeds()[0], nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, err = c.Head(s.Seeds()[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength <= 0 {
		t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

// TestCloseNoLeaks closes the site while a request sleeps in Latency.
func TestCloseNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := Start(Options{Hosts: 2, Latency: time.Minute, Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(s.Seeds()[0])
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); len(s.Hits()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("request never arrived")
		}
	}
	closed := time.Now()
	s.Close()
	if d := time.Since(closed); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-done; err == nil {
		t.Error("request survived Close")
	}
}

func BenchmarkServe(b *testing.B) {
	s := start(b, Options{Seed: 1})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	o := s.Options()
	var next sync.Mutex
	i := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			next.Lock()
			i++
			u := s.PageURL(i%o.Hosts, i%o.PagesPerHost)
			next.Unlock()
			resp, err := c.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}

func BenchmarkRender(b *testing.B) {
	s := start(b, Options{Seed: 1})
	var buf bytes.Buffer
	var pi pageInfo
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf.Reset()
		s.build(&pi, i%5, i%200)
		s.renderPage(&buf, &pi)
	}
}
