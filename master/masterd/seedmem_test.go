package masterd_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// BenchmarkSeedMemory seeds 100k and 1M URLs (1,000 hosts, ~70-byte URLs)
// through the real seed path (masterd.Seed: bin/master seed --file) into a
// crawl with the default dedup.expected_urls, and reports the Redis bytes
// per seeded URL: the used_memory delta (the whole server: noisy when
// other tests share it), the crawl's keys by MEMORY USAGE, their seen
// (dedup) and queue parts. The seeds themselves are recorded in MySQL:
// the MySQL side is mysql-bytes/seed (the seeds table's data and index length
// after ANALYZE TABLE: InnoDB's page-level estimate). 1M takes about a
// minute; -short runs 100k only.
//
//	go test -run '^$' -bench SeedMemory -benchtime 1x ./master/masterd/
func BenchmarkSeedMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			if n > 100_000 && testing.Short() {
				b.Skip("1M seeds: not with -short")
			}
			for range b.N {
				seedMemory(b, n)
			}
		})
	}
}

func seedMemory(b *testing.B, n int) {
	ctx := context.Background()
	cfg := crawltest.Config(b)
	cfg.Dedup.ExpectedURLs = config.Default().Dedup.ExpectedURLs
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	urls := make([]string, n)
	urlBytes := 0
	for i := range urls {
		urls[i] = fmt.Sprintf("https://www.host%04d.example.com/articles/%d/some-title-%d.html", i%1000, i, i*7)
		urlBytes += len(urls[i])
	}
	ropt, err := cfg.RedisOptions()
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	usedMemory := func() int64 {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		v, _ := strconv.ParseInt(testutil.InfoField(info, "used_memory"), 10, 64)
		return v
	}

	before := usedMemory()
	b.ResetTimer()
	start := time.Now()
	res, err := masterd.Seed(ctx, cfg, urls)
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil || res.Added != n {
		b.Fatalf("seed = %d added, %d seen, %d rejected, %v; want %d added", res.Added, res.Seen, len(res.Rejected), err, n)
	}
	used := usedMemory() - before

	keys := frontier.NewKeys(cfg.Crawl.Name)
	var crawl, seen, queued int64
	iter := rdb.Scan(ctx, 0, testutil.CrawlKeyPattern(cfg.Crawl.Name), 5000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		m, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		crawl += m
		switch rest := strings.TrimPrefix(k, keys.Prefix); {
		case strings.HasPrefix(rest, "seen:"):
			seen += m
		case strings.HasPrefix(rest, "q:"), strings.HasPrefix(rest, "qp:"), rest == "fresh":
			queued += m
		}
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}

	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var rows, mysqlBytes int64
	if err := db.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM seeds WHERE crawl = ?", cfg.Crawl.Name).Scan(&rows); err != nil || rows != int64(n) {
		b.Fatalf("%d seeds rows (%v), want %d", rows, err, n)
	}
	if _, err := db.DB.ExecContext(ctx, "ANALYZE TABLE seeds"); err != nil {
		b.Fatal(err)
	}
	if err := db.DB.QueryRowContext(ctx, `SELECT data_length + index_length FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'seeds'`).Scan(&mysqlBytes); err != nil {
		b.Fatal(err)
	}

	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(used), "used-bytes/seed")
	b.ReportMetric(per(crawl), "crawl-bytes/seed")
	b.ReportMetric(per(seen), "seen-bytes/seed")
	b.ReportMetric(per(queued), "queued-bytes/seed")
	b.ReportMetric(per(mysqlBytes), "mysql-bytes/seed")
	b.ReportMetric(float64(urlBytes)/float64(n), "url-len")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "seeds/s")
}
