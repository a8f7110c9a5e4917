package slaved_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// harness is a seeded crawl of a test site that slaves are run against in
// phases.
type harness struct {
	t   testing.TB
	rdb *redis.Client
	f   *frontier.Redis
	st  *frontier.Stream
}

type crawlResult struct {
	stats  frontier.Stats
	events []events.Envelope
}

func newHarness(t testing.TB, cfg *config.Config, site *testsite.Site) *harness {
	t.Helper()
	ctx := context.Background()
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	t.Cleanup(func() { rdb.Close() })
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	st := f.Stream("test")
	if err := st.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed(ctx, siteSeeds(site)); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, rdb: rdb, f: f, st: st}
}

// run runs slaves with cfg until done says so (nil: the crawl is
// finished), bounded by limit, and returns the stats and the events
// written meanwhile.
func (h *harness) run(cfg *config.Config, slaves int, done func(frontier.Stats) bool, limit time.Duration) crawlResult {
	t := h.t
	t.Helper()
	ctx := context.Background()
	runCtx, stop := context.WithCancel(ctx)
	errs := make(chan error, slaves)
	for i := range slaves {
		s, err := slaved.New(cfg, slaved.Options{ID: "pipe-" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		go func() { errs <- s.Run(runCtx) }()
	}
	ok := false
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if done == nil {
			if fin, err := h.f.CheckFinished(ctx, time.Second); err == nil && fin {
				ok = true
				break
			}
		} else if st, err := h.f.Stats(ctx); err == nil && done(st) {
			ok = true
			break
		}
	}
	stop()
	for range slaves {
		if err := <-errs; err != nil {
			t.Errorf("slave run: %v", err)
		}
	}
	var res crawlResult
	var err error
	if res.stats, err = h.f.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("crawl phase not done after %v: %+v", limit, res.stats)
	}
	for {
		es, err := h.st.Read(ctx, "c", 1000, -1, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		ids := make([]string, len(es))
		for i, e := range es {
			env, err := events.Decode(e.ID, e.Type, e.Data)
			if err != nil {
				t.Fatal(err)
			}
			res.events = append(res.events, env)
			ids[i] = e.StreamID
		}
		h.st.Ack(ctx, ids...)
	}
	return res
}

// siteSeeds are the site's seed URLs as depth-0 tasks.
func siteSeeds(site *testsite.Site) []frontier.Task {
	var seeds []frontier.Task
	for _, raw := range site.Seeds() {
		u, _ := url.Parse(raw)
		seeds = append(seeds, frontier.NewTask(u, 0, 0))
	}
	return seeds
}

// crawl seeds the site and runs slaves until the crawl is finished.
func crawl(t testing.TB, cfg *config.Config, site *testsite.Site, slaves int, limit time.Duration) crawlResult {
	t.Helper()
	return newHarness(t, cfg, site).run(cfg, slaves, nil, limit)
}

// startSite starts the test site and n recording proxies; stop closes
// them (before a deferred goleak check, unlike t.Cleanup).
func startSite(t testing.TB, opt testsite.Options, n int) (*testsite.Site, []*testsite.Proxy, func()) {
	t.Helper()
	site, err := testsite.Start(opt)
	if err != nil {
		t.Fatal(err)
	}
	var proxies []*testsite.Proxy
	if n > 0 {
		if proxies, err = testsite.StartProxies(n); err != nil {
			site.Close()
			t.Fatal(err)
		}
	}
	return site, proxies, func() {
		for _, p := range proxies {
			p.Close()
		}
		site.Close()
	}
}

// exceptionsByURL maps URLs to the kinds of their exceptions.
func (r crawlResult) exceptionsByURL() map[string][]string {
	out := map[string][]string{}
	for _, e := range r.events {
		if x := e.Exception; x != nil {
			out[x.URL] = append(out[x.URL], x.Kind)
		}
	}
	return out
}

func (r crawlResult) pages() map[string]*events.Page {
	out := map[string]*events.Page{}
	for _, e := range r.events {
		if p := e.Page; p != nil {
			out[p.URL] = p
		}
	}
	return out
}

func has(kinds []string, k string) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// TestHostileSite crawls the test site's hostile pages through two proxies
// with WARC storage on, and checks that every one of them is bounded and
// recorded: charsets decoded before link extraction, a gzip bomb and a
// huge page cut at the cap, slow and stalled pages ended at the deadline,
// redirect loops stopped, calendar, query and path traps bounded, session
// ids stripped, duplicate content found, binary files stored unparsed.
func TestHostileSite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, proxies, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 20, Robots: true, Hostile: true, Seed: 7}, 2)
	defer stop()
	cfg := testConfig(t, site)
	for _, p := range proxies {
		cfg.Fetch.Proxies = append(cfg.Fetch.Proxies, p.URL())
	}
	cfg.Fetch.StickyRequests = 0 // spread every host over both proxies
	cfg.Fetch.Timeout = 1500 * time.Millisecond
	cfg.Fetch.MaxBodyBytes = 1 << 20
	cfg.Lease.MaxAttempts = 2
	cfg.Lease.RetryBase = 50 * time.Millisecond
	cfg.Crawl.MaxPagesPerHost = 150
	cfg.Crawl.MaxQueryVariants = 50
	cfg.Crawl.MaxDateVariants = 8 // the day-query trap's ?d=YYYY-MM-DD
	cfg.Slave.Concurrency = 8
	cfg.Storage.WARCDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	res := crawl(t, cfg, site, 1, 3*time.Minute)
	h := site.Hostile()
	hits := site.HitCounts()
	exc := res.exceptionsByURL()
	pages := res.pages()

	// ordinary pages: all of them, once
	for u, want := range site.Expected() {
		if hits[u] != want {
			t.Errorf("%s fetched %d times, want %d", u, hits[u], want)
		}
	}
	// charsets: the link of every page was decoded to UTF-8 before it
	// was extracted, so its target (and nothing else under /enc/) was hit
	for _, e := range h.Encodings {
		if hits[e.Target] != 1 {
			t.Errorf("%s (%s, declared %s): target %s fetched %d times, want 1", e.URL, e.Charset, e.Declared, e.Target, hits[e.Target])
		}
		if p := pages[e.URL]; p == nil || p.Charset == "" {
			t.Errorf("%s: no page record with a charset: %+v", e.URL, p)
		}
	}
	for _, hit := range site.Hits() {
		if strings.Contains(hit.Path, "/hostile/enc/") && hit.Status == 404 {
			t.Errorf("wrongly decoded link requested: %s", hit.URL())
		}
		if hit.Via == "" {
			t.Errorf("%s went direct, not through a proxy", hit.URL())
		}
	}
	// bounded bodies and deadlines
	for _, c := range []struct{ url, kind string }{
		{h.Bomb, events.KindTooLarge}, {h.Huge, events.KindTooLarge},
		{h.Slow, events.KindTimeout}, {h.Stall, events.KindTimeout},
		{h.LoopSelf, events.KindRedirect},
	} {
		if !has(exc[c.url], c.kind) {
			t.Errorf("%s: exceptions %v, want %s", c.url, exc[c.url], c.kind)
		}
	}
	// traps
	calendar, days, deep, sid := 0, 0, 0, 0
	for u, n := range hits {
		p, _ := url.Parse(u)
		switch {
		case strings.HasPrefix(p.Path, "/hostile/calendar/"):
			calendar += n
		case strings.HasPrefix(p.Path, "/hostile/cal"):
			days += n
		case strings.HasPrefix(p.Path, "/hostile/deep/"):
			deep += n
			if strings.Contains(p.Path, "a/a/a") {
				t.Errorf("repeated-segment trap followed: %s", u)
			}
		case strings.HasPrefix(p.Path, "/hostile/sid/page"):
			sid += n
		}
	}
	if calendar > int(cfg.Crawl.MaxPagesPerHost) {
		t.Errorf("calendar trap: %d fetches, above the host cap %d", calendar, cfg.Crawl.MaxPagesPerHost)
	}
	if days > cfg.Crawl.MaxDateVariants+1 {
		t.Errorf("day-query trap: %d fetches, above %d date variants", days, cfg.Crawl.MaxDateVariants)
	}
	if sid != 1 {
		t.Errorf("session-id trap: %d fetches of the session page, want 1 (ids stripped)", sid)
	}
	t.Logf("traps: calendar %d, day-query %d, deep %d fetches; %d links dropped by the frontier", calendar, days, deep, res.stats.TrapDropped)
	// duplicates: the five identical pages are one content
	dups := 0
	for _, e := range res.events {
		if d := e.Duplicate; d != nil {
			dups++
			if !strings.Contains(d.FirstURL, "/hostile/") || d.ContentHash == "" {
				t.Errorf("duplicate record %+v", d)
			}
		}
	}
	if res.stats.Duplicates < int64(len(h.Dups)-1) || int64(dups) != res.stats.Duplicates {
		t.Errorf("duplicates: stats %d, events %d, want at least %d", res.stats.Duplicates, dups, len(h.Dups)-1)
	}
	t.Logf("duplicates found: %d", res.stats.Duplicates)
	// binary files stored, not parsed
	for _, u := range []string{h.PDF, h.PNG} {
		if p := pages[u]; p == nil || p.Handler != "store" || p.WARC == "" {
			t.Errorf("%s: page record %+v, want handler store with a WARC location", u, p)
		}
	}
	if hits[h.NotALink] != 0 {
		t.Errorf("a link inside a binary file was followed")
	}
	// every proxy carried requests
	via := map[string]int{}
	for _, hit := range site.Hits() {
		via[hit.Via]++
	}
	for _, p := range proxies {
		if via[p.Name()] == 0 {
			t.Errorf("proxy %s carried nothing: %v", p.Name(), via)
		}
	}
	// WARC: one response record per page record
	responses := countWARCResponses(t, cfg.Storage.WARCDir)
	withWARC := 0
	for _, p := range pages {
		if p.WARC != "" {
			withWARC++
		}
	}
	if withWARC == 0 || responses < withWARC {
		t.Errorf("WARC: %d response records for %d pages stored", responses, withWARC)
	}
}

// countWARCResponses counts the response records of the finished WARC
// files in dir.
func countWARCResponses(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	n := 0
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr) // every gzip member: small files in tests
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n += bytes.Count(b, []byte("\r\nWARC-Type: response\r\n"))
		f.Close()
	}
	return n
}

// TestBannedProxy bans one of two proxies (it answers 403 to everything):
// the slave cools it down, then retires it, and the crawl completes through
// the other; every state change is in the event stream.
func TestBannedProxy(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, proxies, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 25, Seed: 3}, 2)
	defer stop()
	bad, good := proxies[0], proxies[1]
	bad.SetStatus(403)
	cfg := testConfig(t, site)
	cfg.Politeness.ObeyRobots = false
	cfg.Fetch.Proxies = []string{bad.URL(), good.URL()}
	cfg.Fetch.StickyRequests = 0
	cfg.Fetch.ProxyCooldown = 100 * time.Millisecond
	cfg.Fetch.ProxyMaxErrors = 2
	cfg.Lease.RetryBase = 20 * time.Millisecond
	cfg.Lease.MaxAttempts = 5
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	res := crawl(t, cfg, site, 1, time.Minute)
	hits := site.HitCounts()
	for u, want := range site.Expected() {
		if hits[u] != want {
			t.Errorf("%s fetched %d times, want %d", u, hits[u], want)
		}
	}
	if bad.Requests() == 0 {
		t.Fatalf("the banned proxy was never tried")
	}
	for _, hit := range site.Hits() {
		if hit.Via != good.Name() {
			t.Errorf("%s reached the site via %q", hit.URL(), hit.Via)
		}
	}
	var states []string
	for _, e := range res.events {
		if p := e.Proxy; p != nil && strings.Contains(bad.URL(), strings.TrimPrefix(p.Proxy, "http://")) {
			states = append(states, p.State)
		}
	}
	if !has(states, events.ProxyCooling) || !has(states, events.ProxyRetired) {
		t.Errorf("banned proxy states %v, want cooling then retired", states)
	}
	if res.stats.Failed != 0 {
		t.Errorf("%d tasks failed", res.stats.Failed)
	}
}

// BenchmarkCalendarTrap reports how many fetches the hostile site's day
// calendar takes under the default trap settings (config.Default:
// crawl.max_date_variants 100, max_query_variants 1,000): one path whose
// ?day=YYYY-MM-DD page links to the next and the previous day, without
// end. Its month calendar (a new path per month, /calendar/YYYY/MM, which
// no per-path cap holds: with max_depth 0 only max_pages_per_host stops
// it) is bounded here by max_pages_per_host 2,000, and the site's
// timeouts by fetch.timeout 1.5 s, so the crawl ends in seconds.
//
//	go test -run '^$' -bench CalendarTrap -benchtime 1x ./slave/slaved/
func BenchmarkCalendarTrap(b *testing.B) {
	var days, months int
	for range b.N {
		site, _, stop := startSite(b, testsite.Options{Hosts: 1, PagesPerHost: 10, Robots: true, Hostile: true, Seed: 7}, 0)
		cfg := testConfig(b, site)
		def := config.Default()
		cfg.Crawl.MaxDateVariants, cfg.Crawl.MaxQueryVariants = def.Crawl.MaxDateVariants, def.Crawl.MaxQueryVariants
		cfg.Crawl.MaxPathRepeat = def.Crawl.MaxPathRepeat
		cfg.Crawl.MaxPagesPerHost = 2000
		cfg.Fetch.Timeout = 1500 * time.Millisecond
		cfg.Fetch.MaxBodyBytes = 1 << 20
		cfg.Lease.MaxAttempts = 1
		cfg.Slave.Concurrency = 8
		if err := cfg.Validate(); err != nil {
			b.Fatal(err)
		}
		crawl(b, cfg, site, 1, 5*time.Minute)
		for u, n := range site.HitCounts() {
			p, _ := url.Parse(u)
			switch {
			case strings.HasPrefix(p.Path, "/hostile/calendar/"):
				months += n
			case p.Path == "/hostile/cal":
				days += n
			}
		}
		stop()
	}
	b.ReportMetric(float64(days)/float64(b.N), "day-calendar-fetches/path")
	b.ReportMetric(float64(months)/float64(b.N), "month-calendar-fetches")
	b.ReportMetric(0, "ns/op")
}
