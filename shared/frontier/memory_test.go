package frontier_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// BenchmarkSeenMemory measures the Redis memory of a seen URL (fingerprint
// buckets; with bloom/, the Bloom filter's segments at the default 1e-6)
// and of a queued URL (per-host lists), from MEMORY USAGE of the crawl's
// keys, for a crawl sized for the URLs it holds.
//
//	go test -run '^$' -bench SeenMemory -benchtime 1x ./shared/frontier/
func BenchmarkSeenMemory(b *testing.B) {
	for _, mode := range []string{frontier.DedupExact, frontier.DedupBloom} {
		for _, n := range []int{100_000, 1_000_000} {
			name := strconv.Itoa(n)
			if mode != frontier.DedupExact {
				name = mode + "/" + name
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					seenMemory(b, n, mode)
				}
			})
		}
	}
}

// BenchmarkSeenMemorySizing measures the Redis memory of a seen URL
// (exact dedup) in crawls whose dedup.expected_urls is right (expected =
// URLs) and far too big (the default 10M), at 100k and 1M URLs, and
// reports the oversized crawl's cost relative to the right-sized one at
// 100k (oversized-ratio): a crawl that asks for far more than it gets
// should not pay much more per URL.
//
//	go test -run '^$' -bench SeenMemorySizing -benchtime 1x ./shared/frontier/
func BenchmarkSeenMemorySizing(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				right := seenBytes(b, n, int64(n), frontier.DedupExact)
				over := seenBytes(b, n, 10_000_000, frontier.DedupExact)
				b.ReportMetric(right, "seen-bytes/url")
				b.ReportMetric(over, "expected-10M-seen-bytes/url")
				b.ReportMetric(over/right, "oversized-ratio")
			}
		})
	}
}

func seenMemory(b *testing.B, n int, mode string) {
	b.ReportMetric(seenBytes(b, n, int64(n), mode), "seen-bytes/url")
}

// seedArticles seeds n article URLs (~70 bytes) spread over hosts hosts,
// in batches of 1,000, and returns the URLs' total length.
func seedArticles(b *testing.B, f *frontier.Redis, n, hosts int) int {
	b.Helper()
	urlBytes := 0
	batch := make([]frontier.Task, 0, 1000)
	for i := range n {
		host := fmt.Sprintf("www.host%03d.example.com", i%hosts)
		u := fmt.Sprintf("https://%s/articles/%d/some-title-%d.html", host, i, i*7)
		urlBytes += len(u)
		batch = append(batch, frontier.Task{URL: u, Host: host, ScopeHost: host, Depth: 3, Priority: 3})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := f.Seed(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return urlBytes
}

// seenBytes seeds n URLs into a new crawl created with expected URLs and
// returns the seen set's bytes per URL; it reports the queues' overhead
// per URL as metrics.
func seenBytes(b *testing.B, n int, expected int64, mode string) float64 {
	rdb := testRedis(b)
	ctx := context.Background()
	crawl := uniqueCrawl(b, rdb, "mem")
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, ExpectedURLs: expected,
		DedupMode: mode})
	if err != nil {
		b.Fatal(err)
	}
	urlBytes := seedArticles(b, f, n, 100)
	keys := f.Keys()
	queued := sumMemory(b, rdb, keys.Prefix+"q:*") + sumMemory(b, rdb, keys.Prefix+"qp:*") + sumMemory(b, rdb, keys.Fresh)
	b.ReportMetric(float64(queued-urlBytes)/float64(n), "queued-overhead-bytes/url")
	b.ReportMetric(float64(urlBytes)/float64(n), "url-len")
	if mode == frontier.DedupBloom {
		seen := sumMemory(b, rdb, keys.Prefix+"bloom:*")
		perURL := float64(seen) / float64(n)
		if n >= 1_000_000 && perURL > 4 {
			b.Errorf("bloom filter at 1e-6: %.2f bytes per URL, want at most 4", perURL)
		}
		return perURL
	}
	seen := sumMemory(b, rdb, keys.Prefix+"seen:*")
	// one bucket's encoding (bucket 0 may be empty in an oversized crawl)
	some, _, err := rdb.Scan(ctx, 0, keys.Prefix+"seen:*", 1000).Result()
	if err != nil || len(some) == 0 {
		b.Fatalf("no seen bucket found: %v", err)
	}
	enc, _ := rdb.ObjectEncoding(ctx, some[0]).Result()
	if enc != "intset" {
		b.Errorf("seen bucket encoding %q, want intset", enc)
	}
	return float64(seen) / float64(n)
}

func sumMemory(b *testing.B, rdb *redis.Client, pattern string) int {
	ctx := context.Background()
	total := 0
	iter := rdb.Scan(ctx, 0, pattern, 5000).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		total += int(n)
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	return total
}
