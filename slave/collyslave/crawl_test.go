package collyslave_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/collyslave"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// overlap counts the callbacks of one collector running at once.
type overlap struct{ now, max atomic.Int32 }

func (o *overlap) enter() {
	n := o.now.Add(1)
	for m := o.max.Load(); n > m && !o.max.CompareAndSwap(m, n); m = o.max.Load() {
	}
}

func (o *overlap) leave() { o.now.Add(-1) }

// pageCollector follows every link of the site's hosts, obeying
// robots.txt, and emits each page's title.
func pageCollector(hosts []string, async bool, ov *overlap, emit func(r *colly.Request, title string)) *colly.Collector {
	c := colly.NewCollector(colly.AllowedDomains(hosts...), colly.Async(async))
	c.IgnoreRobotsTxt = false
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnHTML("h1#top", func(e *colly.HTMLElement) {
		ov.enter()
		defer ov.leave()
		time.Sleep(200 * time.Microsecond) // a callback that takes a while
		emit(e.Request, e.Text)
	})
	return c
}

// TestCrawl crawls the test site's pages with one collector run by plain
// colly, then by three slaves in this process, and checks that both find
// the same pages; that the slaves fetched each page once, never two
// requests to a host closer than the politeness delay; and that the
// callbacks of a collector that is not Async never ran at once, as
// standalone.
func TestCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("a crawl with Redis and MySQL")
	}
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async %v", async), func(t *testing.T) {
			site, err := testsite.Start(testsite.Options{Hosts: 3, PagesPerHost: 40, LinksPerPage: 5, PageBytes: 1500,
				Robots: true, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(site.Close)
			var hosts []string
			for _, h := range site.HostURLs() {
				u, _ := url.Parse(h)
				hosts = append(hosts, u.Hostname())
			}

			// plain colly
			var mu sync.Mutex
			var plain []string
			c := pageCollector(hosts, async, &overlap{}, func(_ *colly.Request, title string) {
				mu.Lock()
				plain = append(plain, title)
				mu.Unlock()
			})
			for _, s := range site.Seeds() {
				if err := c.Visit(s); err != nil {
					t.Fatal(err)
				}
			}
			c.Wait()
			slices.Sort(plain)
			plain = slices.Compact(plain)
			if want := len(site.Expected()); len(plain) != want {
				t.Errorf("plain colly found %d pages, the site has %d", len(plain), want)
			}

			// three slaves
			site.ResetHits()
			cfg := crawlConfig(t, hosts)
			if res, err := masterd.Seed(context.Background(), cfg, site.Seeds()); err != nil || res.Added != 1 {
				t.Fatalf("seed: %+v %v", res, err)
			}
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			overlaps := make([]*overlap, 3)
			for i := range overlaps {
				overlaps[i] = &overlap{}
				c := pageCollector(hosts, async, overlaps[i], func(r *colly.Request, title string) {
					if err := collyslave.AddItem(r, "title", "", map[string]any{"title": title}); err != nil {
						t.Error(err)
					}
				})
				s, err := collyslave.New(cfg, c, slaved.Options{ID: fmt.Sprintf("colly-%d", i+1), Logger: logger()})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() { defer wg.Done(); s.Run(ctx) }()
			}
			mctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err = masterd.New(cfg, masterd.Options{ExitWhenDone: true, Logger: logger()}).Run(mctx)
			stop()
			wg.Wait()
			if err != nil || mctx.Err() != nil {
				t.Fatalf("master: %v, %v", err, mctx.Err())
			}

			db, err := store.Open(context.Background(), cfg.MySQL.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var distributed []string
			bySlave := map[string]int{}
			err = db.ExportItems(context.Background(), store.ItemFilter{Crawl: cfg.Crawl.Name, Item: "title"}, func(r store.ItemRow) error {
				var it struct{ Title string }
				if err := json.Unmarshal(r.Data, &it); err != nil {
					return fmt.Errorf("item %s: %w", r.URL, err)
				}
				bySlave[r.Slave]++
				distributed = append(distributed, it.Title)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(distributed)
			if d := cmp.Diff(plain, distributed); d != "" {
				t.Errorf("pages found (-plain colly +slaves):\n%s", d)
			}
			if len(bySlave) != 3 {
				t.Errorf("items by slave %v, want the three slaves", bySlave)
			}
			checkSiteSaw(t, site, cfg.Politeness.Delay)
			for i, o := range overlaps {
				t.Logf("slave %d: at most %d pages' callbacks at once", i+1, o.max.Load())
				if !async && o.max.Load() != 1 {
					t.Errorf("slave %d ran the callbacks of %d pages at once; a collector that is not Async runs one", i+1, o.max.Load())
				}
			}
		})
	}
}

// crawlConfig is the config of a test crawl of hosts.
func crawlConfig(t *testing.T, hosts []string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("colly")
	cfg.Crawl.AllowHosts = hosts
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.Timeout = 5 * time.Second
	cfg.Politeness.Delay = 10 * time.Millisecond
	cfg.Lease.RetryBase = 100 * time.Millisecond
	cfg.Slave.Concurrency = 8
	cfg.Slave.HeartbeatInterval = 200 * time.Millisecond
	cfg.Slave.IdlePoll = 50 * time.Millisecond
	cfg.Master.Quiescence = 800 * time.Millisecond
	cfg.Master.RecoverInterval = 200 * time.Millisecond
	cfg.Dedup.ExpectedURLs = 1000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		opt, err := redis.ParseURL(cfg.Redis.URL)
		if err != nil {
			return
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name)
	})
	return &cfg
}

// checkSiteSaw checks the site's request log: every expected page once,
// robots.txt once per host, nothing else, and politeness per host.
func checkSiteSaw(t *testing.T, site *testsite.Site, delay time.Duration) {
	t.Helper()
	expected := site.Expected()
	byHost := map[string][]time.Time{}
	robots := 0
	for _, h := range site.Hits() {
		byHost[h.Host] = append(byHost[h.Host], h.At.Round(0))
		switch {
		case h.Path == "/robots.txt":
			robots++
		case expected[h.URL()] == 0:
			t.Errorf("unexpected request: %s", h.URL())
		}
	}
	hits := site.HitCounts()
	for u, n := range expected {
		if hits[u] != n {
			t.Errorf("%s fetched %d times, want %d", u, hits[u], n)
		}
	}
	if robots != len(site.HostURLs()) {
		t.Errorf("robots.txt fetched %d times for %d hosts", robots, len(site.HostURLs()))
	}
	for host, ts := range byHost {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < delay {
				t.Errorf("host %s: two requests %v apart, the delay is %v", host, gap, delay)
				break
			}
		}
	}
}

func logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}
