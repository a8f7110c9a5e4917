package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/benchsuite"
	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// BenchmarkClusterCrawl crawls the loopback site with the real master,
// slaves, Redis and MySQL, politeness delay 0, and reports pages/s and
// Redis commands per page.
//
//	go test -run '^$' -bench ClusterCrawl -benchtime 1x ./internal/e2e/
func BenchmarkClusterCrawl(b *testing.B) {
	for _, slaves := range []int{1, 2} {
		b.Run(fmt.Sprintf("slaves=%d", slaves), func(b *testing.B) {
			for range b.N {
				clusterCrawl(b, slaves, 0)
			}
		})
	}
	// polite: every host at most one request in flight and 25ms apart
	b.Run("slaves=3/polite", func(b *testing.B) {
		for range b.N {
			clusterCrawl(b, 3, crawltest.PoliteDelay)
		}
	})
}

func clusterCrawl(b *testing.B, slaves int, delay time.Duration) {
	cfg := crawltest.Config(b)
	site, err := testsite.Start(testsite.Options{Hosts: 10, PagesPerHost: 400, LinksPerPage: 8,
		PageBytes: 15000, Robots: true, Seed: 3})
	if err != nil {
		b.Fatal(err)
	}
	defer site.Close()
	for _, raw := range site.HostURLs() {
		h, _, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(raw, "http://"), "/"))
		cfg.Crawl.AllowHosts = append(cfg.Crawl.AllowHosts, h)
	}
	cfg.Politeness.Delay = delay
	cfg.Politeness.HostConcurrency = 4
	if delay > 0 {
		cfg.Politeness.HostConcurrency = 1
	}
	cfg.Slave.Concurrency = 32
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	if _, err := masterd.Seed(context.Background(), cfg, site.Seeds()); err != nil {
		b.Fatal(err)
	}
	hook := &benchsuite.CountHook{}
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	rdb.AddHook(hook)

	start := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range slaves {
		s, err := slaved.New(cfg, slaved.Options{ID: "bench-" + strconv.Itoa(i), Logger: crawltest.DiscardLogger(), Redis: rdb})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	mctx, mcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer mcancel()
	if err := masterd.New(cfg, masterd.Options{ExitWhenDone: true, Logger: crawltest.DiscardLogger(), Redis: rdb}).Run(mctx); err != nil {
		b.Fatal(err)
	}
	// the finish is decided after a quiescence window; do not count it
	elapsed := time.Since(start) - cfg.Master.Quiescence
	stop()
	wg.Wait()
	st, err := masterd.Status(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if !st.Finished || st.Done < int64(len(site.Expected())) {
		b.Fatalf("crawl incomplete: %+v, want %d done", st, len(site.Expected()))
	}
	pages := float64(st.Done)
	b.ReportMetric(pages/elapsed.Seconds(), "pages/s")
	b.ReportMetric(float64(hook.Cmds.Load())/pages, "redis-cmds/page")
	b.ReportMetric(float64(hook.Scripts.Load())/pages, "scripts/page")
	b.ReportMetric(pages, "pages")
}
