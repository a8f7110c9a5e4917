package frontier_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

func seenMemory(b *testing.B, n int, mode string) {
	rdb := testRedis(b)
	ctx := context.Background()
	crawl := uniqueCrawl(b, rdb, "mem")
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, ExpectedURLs: int64(n),
		DedupMode: mode})
	if err != nil {
		b.Fatal(err)
	}
	const hosts = 100
	urlBytes := 0
	batch := make([]frontier.Task, 0, 1000)
	for i := range n {
		host := fmt.Sprintf("www.host%03d.example.com", i%hosts)
		u := fmt.Sprintf("https://%s/articles/%d/some-title-%d.html", host, i, i*7)
		urlBytes += len(u)
		batch = append(batch, frontier.Task{URL: u, Host: host, ScopeHost: host, Depth: 3, Priority: 3})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := f.Seed(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	keys := f.Keys()
	queued := sumMemory(b, rdb, keys.Prefix+"q:*") + sumMemory(b, rdb, keys.Prefix+"qp:*")
	b.ReportMetric(float64(queued-urlBytes)/float64(n), "queued-overhead-bytes/url")
	b.ReportMetric(float64(urlBytes)/float64(n), "url-len")
	if mode == frontier.DedupBloom {
		seen := sumMemory(b, rdb, keys.Prefix+"bloom:*")
		perURL := float64(seen) / float64(n)
		b.ReportMetric(perURL, "seen-bytes/url")
		if n >= 1_000_000 && perURL > 4 {
			b.Errorf("bloom filter at 1e-6: %.2f bytes per URL, want at most 4", perURL)
		}
		return
	}
	seen := sumMemory(b, rdb, keys.Prefix+"seen:*")
	enc, _ := rdb.ObjectEncoding(ctx, keys.Seen(0)).Result()
	b.ReportMetric(float64(seen)/float64(n), "seen-bytes/url")
	if !strings.Contains(enc, "listpack") {
		b.Errorf("seen bucket encoding %q, want listpack", enc)
	}
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
