package frontier_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// BenchmarkHostMemory seeds 100,000 URLs on as many hosts (~60-byte URLs,
// ~25-byte host names) through the frontier's seed path, with the
// defaults that cost per host (scope by seeds, max_pages_per_host), and
// reports the Redis bytes per queued host: the server's used_memory delta
// (run it on a Redis of its own: REDCRAWL_TEST_REDIS) and the crawl's keys
// by MEMORY USAGE, in parts by key (queue, fresh, ready, hpages,
// scopehosts, seen, rest). A host with one queued URL must cost at most
// 250 bytes.
//
//	redis-server --port 6392 --daemonize yes --save "" --appendonly no
//	REDCRAWL_TEST_REDIS=redis://127.0.0.1:6392/0 go test -run '^$' -bench HostMemory -benchtime 1x ./shared/frontier/
func BenchmarkHostMemory(b *testing.B) {
	for _, urls := range []int{1, 3} {
		b.Run(strconv.Itoa(urls)+"-urls", func(b *testing.B) {
			for range b.N {
				hostMemory(b, 100_000, urls)
			}
		})
	}
}

func hostMemory(b *testing.B, hosts, perHost int) {
	ctx := context.Background()
	rdb := testRedis(b)
	crawl := uniqueCrawl(b, rdb, "hostmem")
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, ExpectedURLs: 10_000_000,
		ScopeBySeeds: true, MaxPagesPerHost: 1_000_000})
	if err != nil {
		b.Fatal(err)
	}
	used := func() int64 {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO memory")
		return 0
	}
	before := used()
	urlBytes := 0
	batch := make([]frontier.Task, 0, 1000)
	for i := range hosts * perHost {
		host := fmt.Sprintf("www.host%06d.example.com", i%hosts)
		u := fmt.Sprintf("https://%s/articles/%d/title-%d.html", host, i/hosts, i*7%1000)
		urlBytes += len(u)
		batch = append(batch, frontier.Task{URL: u, Host: host, ScopeHost: host, Depth: 0, Priority: 0})
		if len(batch) == cap(batch) || i == hosts*perHost-1 {
			if _, err := f.Seed(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	delta := used() - before
	parts := keyParts(b, rdb, f.Keys())
	total := int64(0)
	for _, v := range parts {
		total += v
	}
	per := func(v int64) float64 { return float64(v) / float64(hosts) }
	b.ReportMetric(per(delta), "used-bytes/host")
	b.ReportMetric(per(total), "crawl-bytes/host")
	names := make([]string, 0, len(parts))
	for k := range parts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.ReportMetric(per(parts[k]), k+"-bytes/host")
	}
	b.ReportMetric(float64(urlBytes)/float64(hosts*perHost), "url-len")
	if perHost == 1 && per(total) > 250 {
		b.Errorf("a queued host with one URL costs %.0f bytes of Redis (its keys), want at most 250", per(total))
	}
}

// keyParts sums the MEMORY USAGE of a crawl's keys by part: the name of
// the key after the prefix up to its first colon.
func keyParts(b *testing.B, rdb *redis.Client, keys frontier.Keys) map[string]int64 {
	ctx := context.Background()
	parts := map[string]int64{}
	iter := rdb.Scan(ctx, 0, keys.Prefix+"*", 5000).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		part, _, _ := strings.Cut(strings.TrimPrefix(iter.Val(), keys.Prefix), ":")
		switch part {
		case "q", "qp", "fresh", "ready", "hpages", "scope", "scopehosts", "seen", "hnext", "hinfl":
		default:
			part = "rest"
		}
		parts[part] += n
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	return parts
}
