package slaved_test

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

func testConfig(t testing.TB, site *testsite.Site) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("st")
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	for _, raw := range site.HostURLs() {
		u, _ := url.Parse(raw)
		cfg.Crawl.AllowHosts = append(cfg.Crawl.AllowHosts, u.Hostname())
	}
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Politeness.Delay = 5 * time.Millisecond
	cfg.Slave.HeartbeatInterval = 100 * time.Millisecond
	cfg.Slave.IdlePoll = 20 * time.Millisecond
	cfg.Slave.Concurrency = 4
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		opt, _ := redis.ParseURL(cfg.Redis.URL)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name)
	})
	return &cfg
}

// testFrontier opens cfg's crawl in Redis with its event stream's
// consumer group "test"; the client is closed when the test ends.
func testFrontier(t testing.TB, cfg *config.Config) (*frontier.Redis, *frontier.Stream) {
	t.Helper()
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	st := f.Stream("test")
	if err := st.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	return f, st
}

// TestGracefulLeave crawls a small site with one slave, stops it, and
// checks that it left cleanly: no goroutines, no leases, deregistered with
// a join and a leave in the event stream.
func TestGracefulLeave(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 30, Robots: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	cfg := testConfig(t, site)
	ctx := context.Background()
	f, st := testFrontier(t, cfg)
	seedURL, _ := url.Parse(site.Seeds()[0])
	if _, err := f.Seed(ctx, []frontier.Task{{URL: seedURL.String(), Host: seedURL.Host, ScopeHost: seedURL.Hostname()}}); err != nil {
		t.Fatal(err)
	}

	s, err := slaved.New(cfg, slaved.Options{ID: "leaver"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- s.Run(runCtx) }()
	want := int64(len(site.Expected()))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s, _ := f.Stats(ctx); s.Done >= want/2 {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	stats, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.InFlight != 0 {
		t.Errorf("%d leases left after a graceful leave", stats.InFlight)
	}
	if ss, _ := f.Slaves(ctx); len(ss) != 0 {
		t.Errorf("still registered: %+v", ss)
	}
	var kinds []string
	pages := 0
	for {
		es, err := st.Read(ctx, "c", 1000, -1, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			env, err := events.Decode(e.ID, e.Type, e.Data)
			if err != nil {
				t.Fatal(err)
			}
			if env.Slave != nil {
				kinds = append(kinds, env.Slave.Kind)
			}
			if env.Page != nil {
				pages++
			}
		}
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.StreamID
		}
		st.Ack(ctx, ids...)
	}
	if len(kinds) != 2 || kinds[0] != events.SlaveJoin || kinds[1] != events.SlaveLeave {
		t.Errorf("slave events %v, want join then leave", kinds)
	}
	if pages == 0 {
		t.Error("no page events")
	}
	// the rest of the crawl is still there for other slaves
	if stats.Done+stats.Queued < want/2 {
		t.Errorf("work lost: %+v", stats)
	}
}
