package e2e

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// TestShardedCrawl crawls the test site as a crawl of 4 shards on one
// Redis with a master and three slaves: every page fetched exactly once
// and recorded, politeness kept, and master status shows the shards.
func TestShardedCrawl(t *testing.T) {
	cfg := crawltest.Config(t)
	cfg.Crawl.Shards = 4
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	site := crawltest.StartSite(t, 0)
	crawltest.Seed(t, cfg, site)
	for i := range 3 {
		crawltest.StartSlave(t, cfg, fmt.Sprintf("slave-%d", i+1))
	}
	crawltest.RunMaster(t, cfg)
	crawltest.CheckCrawl(t, cfg, site, nil)

	st, err := masterd.Status(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Shards) != 4 {
		t.Fatalf("status shards %+v, want 4", st.Shards)
	}
	// each shard fetched the pages of its hosts
	want := make([]int64, 4)
	for u, n := range site.Expected() {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		want[frontier.ShardOfHost(pu.Host, 4)] += int64(n)
	}
	var done int64
	for _, s := range st.Shards {
		if s.Done < want[s.Shard] {
			t.Errorf("shard %d: %d pages done, its hosts have %d", s.Shard, s.Done, want[s.Shard])
		}
		done += s.Done
	}
	if done != st.Done {
		t.Errorf("shards' done add up to %d, status says %d", done, st.Done)
	}
}

// TestShardedTwoMasters: two masters split a crawl of 4 shards (each its
// recoverer and sink on its share; shard 0's also decides the finish) and
// both exit when it is finished, with every page recorded.
func TestShardedTwoMasters(t *testing.T) {
	cfg := crawltest.Config(t)
	cfg.Crawl.Shards = 4
	cfg.Master.ShardLease = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	site := crawltest.StartSite(t, 0)
	crawltest.Seed(t, cfg, site)
	for i := range 2 {
		crawltest.StartSlave(t, cfg, fmt.Sprintf("slave-%d", i+1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errs := make(chan error, 2)
	for _, id := range []string{"m1", "m2"} {
		go func() {
			errs <- masterd.New(cfg, masterd.Options{ID: id, ExitWhenDone: true, Logger: crawltest.Logger(t)}).Run(ctx)
		}()
	}
	// both masters hold a share while the crawl runs
	keys := func(k int) frontier.Keys { return frontier.ShardKeys(cfg.Crawl.Name, k) }
	rdb := redisClient(t, cfg)
	held := map[string]int{}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		clear(held)
		for k := range 4 {
			if o, err := rdb.Get(ctx, keys(k).Owner).Result(); err == nil {
				held[o]++
			}
		}
		if held["m1"] == 2 && held["m2"] == 2 {
			break
		}
	}
	if held["m1"] != 2 || held["m2"] != 2 {
		t.Errorf("shards held %v, want 2 each", held)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("master: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish in 3 minutes")
	}
	crawltest.CheckCrawl(t, cfg, site, nil)
}

// redisClient is a client for the test config's Redis, closed at the end.
func redisClient(t *testing.T, cfg *config.Config) redis.UniversalClient {
	t.Helper()
	rdb, err := redisconn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
