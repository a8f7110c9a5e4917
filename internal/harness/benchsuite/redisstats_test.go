package benchsuite

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// TestSeenMemoryGrowingBuckets checks the seen-set sampler on a crawl
// whose seen buckets have grown part of the way through a level, so
// that they hold one or two shares of URLs: the scaled sample must stay
// close to the MEMORY USAGE of every bucket.
func TestSeenMemoryGrowingBuckets(t *testing.T) {
	cfg := config.Default()
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	rdb, err := redisconn.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	crawl := testutil.CrawlName("bench-seenmem")
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, ExpectedURLs: 10_000_000})
	if err != nil {
		t.Fatal(err)
	}
	// 75,000 URLs: 256 buckets grown to 390, the first 134 split in two
	const n = 75_000
	batch := make([]frontier.Task, 0, 1000)
	for i := range n {
		host := fmt.Sprintf("h%d.test", i%50)
		batch = append(batch, frontier.Task{URL: fmt.Sprintf("http://%s/p/%d", host, i), Host: host, ScopeHost: host})
		if len(batch) == cap(batch) {
			if _, err := f.Seed(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	got, buckets, err := seenMemory(ctx, rdb, crawl)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	iter := rdb.Scan(ctx, 0, f.Keys().Prefix+"seen:*", 1000).Iterator()
	for iter.Next(ctx) {
		m, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		want += m
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if buckets <= MaxSeenSample {
		t.Fatalf("%d buckets: the sample is all of them, nothing scaled", buckets)
	}
	if r := float64(got) / float64(want); math.Abs(r-1) > 0.05 {
		t.Errorf("sampled %d bytes for %d buckets, all of them hold %d (× %.3f), want within 5%%", got, buckets, want, r)
	}
}
