package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// BenchmarkIdle runs a master and 4 slaves, with the default timings
// (heartbeats, idle poll, recoverer, lease), on a private Redis while the
// crawl waits on one slow page (a fetch that answers only at the end), and
// reports idle-cmds/s, the commands Redis ran per second over 5 s, the
// ones the functions ran included (INFO commandstats), the benchmark's own
// left out (target ≤ 100), and idle-fcalls/s, the function calls among
// them. Then, with every slave idle, it seeds 60 pages one by one, each on
// a host of its own that is ready at once (delay 0), and reports
// wake-p50-ms and wake-p99-ms: the time from the seed (Frontier.Seed) to
// its page's request arriving at the site.
//
//	go test -run '^$' -bench Idle -benchtime 1x -v ./internal/e2e/
func BenchmarkIdle(b *testing.B) { benchIdle(b, false) }

// BenchmarkIdleAPI is BenchmarkIdle with the 4 slaves of the work API:
// what they cost the master (idle-api-requests/s, the watches left out)
// and Redis (the commands the master runs for them) while they wait, and
// how soon a seed reaches them.
//
//	go test -run '^$' -bench 'IdleAPI$' -benchtime 1x -v ./internal/e2e/
func BenchmarkIdleAPI(b *testing.B) { benchIdle(b, true) }

// benchIdle runs runIdleBench b.N times and reports its figures.
func benchIdle(b *testing.B, api bool) {
	for range b.N {
		r := runIdleBench(b, api)
		b.ReportMetric(r.cmds, "idle-cmds/s")
		b.ReportMetric(r.fcalls, "idle-fcalls/s")
		if api {
			b.ReportMetric(r.requests, "idle-api-requests/s")
		}
		b.ReportMetric(pct(r.wakes, 50), "wake-p50-ms")
		b.ReportMetric(pct(r.wakes, 99), "wake-p99-ms")
	}
}

// idleResult is what runIdleBench measured: Redis commands and function
// calls a second while every slave waits, the work API's requests a
// second (API slaves), and each seed's time to its fetch, ms.
type idleResult struct {
	cmds, fcalls, requests float64
	wakes                  []float64
}

// pct is the p-th percentile of ms values (nearest rank).
func pct(ms []float64, p int) float64 {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	sort.Float64s(s)
	i := (p*len(s) + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// idleSite serves /slow, which answers when release is closed, and
// /fast/<n>, which answers at once and records when its request came.
type idleSite struct {
	release chan struct{}
	mu      sync.Mutex
	hits    map[string]time.Time
	arrived chan string
}

func (s *idleSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/slow":
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
	case strings.HasPrefix(r.URL.Path, "/fast/"):
		s.mu.Lock()
		s.hits[r.URL.Path] = time.Now()
		s.mu.Unlock()
		select {
		case s.arrived <- r.URL.Path:
		default:
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, "<html><body>page</body></html>")
}

// redisCalls reads the commands Redis ran (the sum of INFO commandstats
// calls, less the benchmark's own INFO) and the function calls among them.
func redisCalls(ctx context.Context, rdb *redis.Client) (calls, fcalls int64, err error) {
	cs, err := testutil.CommandStats(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	for name, c := range cs {
		if name != "info" {
			calls += c.Calls
		}
		if name == "fcall" || name == "fcall_ro" {
			fcalls += c.Calls
		}
	}
	return calls, fcalls, nil
}

func runIdleBench(b *testing.B, api bool) (r idleResult) {
	b.Helper()
	ctx := context.Background()
	srv := testutil.StartRedis(b, nil)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()

	site := &idleSite{release: make(chan struct{}), hits: map[string]time.Time{}, arrived: make(chan string, 1)}
	slow := httptest.NewServer(site)
	defer slow.Close()
	defer close(site.release)
	// the fast pages: one host (port) each, so each is ready at once
	const seeds = 60
	fast := make([]*httptest.Server, seeds)
	for i := range fast {
		fast[i] = httptest.NewServer(site)
		defer fast[i].Close()
	}

	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("idle")
	cfg.Redis.URL = "redis://" + srv.Addr + "/0"
	cfg.MySQL.DSN = storetest.DSN(b)
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Politeness.ObeyRobots = false
	cfg.Politeness.Delay = 0
	cfg.Crawl.Sitemaps = "off"
	cfg.Render.Enabled = false
	cfg.Slave.Concurrency = 8
	cfg.Dedup.ExpectedURLs = 10000
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}

	var apiSl *crawltest.APISlaves
	var requests atomic.Int64
	mopt := masterd.Options{Logger: crawltest.DiscardLogger()}
	if api {
		apiSl = crawltest.WithAPI(b, &cfg)
		mopt.APIServed = func(string, time.Duration) { requests.Add(1) }
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := masterd.New(&cfg, mopt).Run(runCtx); err != nil && runCtx.Err() == nil {
			b.Errorf("master: %v", err)
		}
	}()
	for i := range 4 {
		id := fmt.Sprintf("idle-%d", i)
		scfg := &cfg
		if api {
			scfg = apiSl.Config(id)
		}
		s, err := slaved.New(scfg, slaved.Options{ID: id, Logger: crawltest.DiscardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(runCtx) }()
	}
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(&cfg))
	if err != nil {
		b.Fatal(err)
	}
	seed := func(raw string) time.Time {
		u, err := url.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		at := time.Now()
		if n, err := f.Seed(ctx, []frontier.Task{frontier.NewTask(u, 0, 0)}); err != nil || n != 1 {
			b.Fatalf("seed %s: %d, %v", raw, n, err)
		}
		return at
	}
	seed(slow.URL + "/slow")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := f.Stats(ctx)
		if err == nil && st.InFlight == 1 && st.SlavesAlive == 4 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the slow page not in flight with 4 slaves alive after 30 s: %+v %v", st, err)
		}
	}
	time.Sleep(3 * time.Second) // the start's work done, every slave waiting

	const window = 5 * time.Second
	cs0, _ := testutil.CommandStats(ctx, rdb)
	c0, k0, err := redisCalls(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	q0 := requests.Load()
	time.Sleep(window)
	c1, k1, err := redisCalls(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	q1 := requests.Load()
	// the benchmark's own: one CommandStats INFO (left out) and one INFO stats
	r.cmds = float64(c1-c0-1) / window.Seconds()
	r.fcalls = float64(k1-k0) / window.Seconds()
	r.requests = float64(q1-q0) / window.Seconds()
	if testing.Verbose() {
		cs1, _ := testutil.CommandStats(ctx, rdb)
		var parts []string
		for name, c := range cs1 {
			if d := c.Calls - cs0[name].Calls; d > 0 && name != "info" {
				parts = append(parts, fmt.Sprintf("%s %d", name, d))
			}
		}
		sort.Strings(parts)
		b.Logf("commands in %v: %s", window, strings.Join(parts, ", "))
	}

	for i := range seeds {
		path := "/fast/" + strconv.Itoa(i)
		at := seed(fast[i].URL + path)
		select {
		case <-site.arrived:
		case <-time.After(30 * time.Second):
			b.Fatalf("seed %d not fetched in 30 s", i)
		}
		site.mu.Lock()
		hit := site.hits[path]
		site.mu.Unlock()
		r.wakes = append(r.wakes, float64(hit.Sub(at).Microseconds())/1000)
		if testing.Verbose() {
			b.Logf("seed %d fetched after %.1f ms", i, r.wakes[len(r.wakes)-1])
		}
		// its ack lands and every slave waits again
		time.Sleep(300 * time.Millisecond)
	}
	return r
}
