package frontier_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// BenchmarkHostMemory seeds 1 and 3 URLs on each of 100,000 hosts (~60-byte
// URLs, ~25-byte host names) through the frontier's seed path, with the
// defaults that cost per host (scope by seeds, max_pages_per_host), and
// reports the Redis bytes per queued host: the server's used_memory delta
// (run it on a Redis of its own: REDCRAWL_TEST_REDIS) and the crawl's keys
// by MEMORY USAGE, in parts by key (q, qp, fresh, ready, hpages, scope,
// seen, rest). A queued host with one or three URLs must cost at most 250
// bytes (its keys).
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
	if per(total) > 250 {
		b.Errorf("a queued host with %d URLs costs %.0f bytes of Redis (its keys), want at most 250", perHost, per(total))
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

// BenchmarkClaimManyHosts measures a claim of 10 (and its completion)
// while a crawl holds many queued hosts, few of them ready: fresh hosts
// with one URL each (claimable), plus 100,000 hosts with two URLs whose
// next fetch time is an hour away (queued in their own lists, in the
// ready set with a future score). It reports claim latency p50 and p99
// (ms); a claim's cost must not grow with the hosts queued. 1M hosts take
// a few minutes to seed; -short runs 100k only.
//
//	REDCRAWL_TEST_REDIS=redis://127.0.0.1:6392/0 go test -run '^$' -bench ClaimManyHosts -benchtime 2000x -timeout 30m ./shared/frontier/
func BenchmarkClaimManyHosts(b *testing.B) {
	for _, hosts := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(hosts), func(b *testing.B) {
			if hosts > 100_000 && testing.Short() {
				b.Skip("1M hosts: not with -short")
			}
			claimManyHosts(b, hosts, 100_000)
		})
	}
}

func claimManyHosts(b *testing.B, fresh, waiting int) {
	ctx := context.Background()
	rdb := testRedis(b)
	crawl := uniqueCrawl(b, rdb, "claimhosts")
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, ExpectedURLs: 10_000_000,
		MaxPagesPerHost: 1_000_000, Delay: time.Second, LeaseDuration: time.Hour, MaxAttempts: 3})
	if err != nil {
		b.Fatal(err)
	}
	k := f.Keys()
	later := time.Now().Add(time.Hour).UnixMilli()
	for i := 0; i < waiting; i += 1000 {
		pipe := rdb.Pipeline()
		for j := i; j < min(i+1000, waiting); j++ {
			pipe.HSet(ctx, k.HostNext, fmt.Sprintf("wait%06d.example.com", j), later)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]frontier.Task, 0, 1000)
	seed := func() {
		if _, err := f.Seed(ctx, batch); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range waiting * 2 {
		host := fmt.Sprintf("wait%06d.example.com", i/2)
		batch = append(batch, frontier.Task{URL: fmt.Sprintf("https://%s/page/%d.html", host, i%2), Host: host, ScopeHost: host})
		if len(batch) == cap(batch) {
			seed()
		}
	}
	for i := range fresh {
		host := fmt.Sprintf("www.host%07d.example.com", i)
		batch = append(batch, frontier.Task{URL: "https://" + host + "/", Host: host, ScopeHost: host})
		if len(batch) == cap(batch) {
			seed()
		}
	}
	if len(batch) > 0 {
		seed()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		ls, err := claimN(ctx, f, "s1", 10)
		lat = append(lat, time.Since(start))
		if err != nil || len(ls) == 0 {
			b.Fatalf("claim: %d leases, %v", len(ls), err)
		}
		cs := make([]frontier.Completion, len(ls))
		for i, l := range ls {
			cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done}
		}
		if _, err := f.Complete(ctx, "s1", cs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "claim-p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "claim-p99-ms")
}
