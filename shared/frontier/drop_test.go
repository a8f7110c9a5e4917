package frontier_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestDropCrawl drops crawls of one shard and of three, on one Redis and
// on a Redis Cluster of three masters (the shards' tags spread over its
// nodes): after the drop a SCAN of every node finds no key of the crawl,
// whose keys it counted; a crawl whose name starts with the dropped one's
// keeps all of its keys.
func TestDropCrawl(t *testing.T) {
	single := testRedis(t)
	for _, tc := range []struct {
		name    string
		cluster bool
		shards  int
	}{
		{"one redis, 1 shard", false, 1},
		{"one redis, 3 shards", false, 3},
		{"cluster, 3 shards", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var rdb redis.UniversalClient = single
			// each node's keys: the cluster's masters (no replicas)
			each := func(fn func(c *redis.Client)) { fn(single) }
			if tc.cluster {
				cc := testCluster(t)
				rdb = cc
				each = func(fn func(c *redis.Client)) {
					if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error { fn(c); return nil }); err != nil {
						t.Fatal(err)
					}
				}
			}
			crawl := uniqueCrawl(t, rdb, "drop")
			other := crawl + "x" // a name the pattern must not reach
			t.Cleanup(func() { testutil.DeleteCrawl(ctx, rdb, other) })
			for _, name := range []string{crawl, other} {
				f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: name, Shards: tc.shards, HostConcurrency: 1,
					LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 10000})
				if err != nil {
					t.Fatal(err)
				}
				var seeds []frontier.Task
				for i := range 40 {
					seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/", i), 0))
				}
				if _, err := f.Seed(ctx, seeds); err != nil {
					t.Fatal(err)
				}
				if _, err := f.HeartbeatControl(ctx, events.Heartbeat{Slave: "s1"}); err != nil {
					t.Fatal(err)
				}
				if _, err := f.ClaimWaitOpts(ctx, "s1", 5, frontier.ClaimOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, _, err := f.SetLimits(ctx, frontier.Limits{MaxPages: 100}, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			keysOf := func(name string) []string {
				var mu sync.Mutex
				var out []string
				each(func(c *redis.Client) {
					it := c.Scan(ctx, 0, frontier.CrawlPattern(name), 1000).Iterator()
					for it.Next(ctx) {
						mu.Lock()
						out = append(out, it.Val())
						mu.Unlock()
					}
					if err := it.Err(); err != nil {
						t.Error(err)
					}
				})
				return out
			}
			before, otherBefore := keysOf(crawl), len(keysOf(other))
			shardKeys := 0
			for _, k := range before {
				if !strings.HasPrefix(k, "crawl:{"+crawl+"}:") {
					shardKeys++
				}
			}
			if tc.shards > 1 && shardKeys == 0 {
				t.Fatalf("no key of shards 1 and 2 among %d", len(before))
			}
			n, err := frontier.DropCrawl(ctx, rdb, crawl)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(before)) {
				t.Errorf("DropCrawl says %d keys, %d were there", n, len(before))
			}
			if left := keysOf(crawl); len(left) > 0 {
				t.Errorf("%d keys left after the drop: %v", len(left), left)
			}
			if got := len(keysOf(other)); got != otherBefore || got == 0 {
				t.Errorf("crawl %s: %d keys after the drop of %s, %d before", other, got, crawl, otherBefore)
			}
			if _, err := frontier.DropCrawl(ctx, rdb, "bad:name"); err == nil {
				t.Error("DropCrawl took a name with a colon")
			}
		})
	}
}
