package frontier_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// BenchmarkShardedMemory compares, in one run, the Redis memory of a seen
// URL and of a queued URL in a crawl of one shard and in the same crawl of
// 4 shards on one Redis (each shard sized for a quarter of the URLs, as
// NewRedis does): the same 100,000 URLs of 400 hosts seeded into both,
// MEMORY USAGE of every shard's seen (or bloom) keys and queue keys. The
// s4/s1 ratios should be 1: sharding splits the sets, it does not make
// their entries dearer.
//
//	go test -run '^$' -bench ShardedMemory -benchtime 1x ./shared/frontier/
func BenchmarkShardedMemory(b *testing.B) {
	const n, shards = 100_000, 4
	for _, mode := range []string{frontier.DedupExact, frontier.DedupBloom} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				one := shardedMemory(b, n, 1, mode)
				four := shardedMemory(b, n, shards, mode)
				b.ReportMetric(one.seen, "s1-seen-bytes/url")
				b.ReportMetric(four.seen, "s4-seen-bytes/url")
				b.ReportMetric(four.seen/one.seen, "s4/s1-seen")
				b.ReportMetric(one.queued, "s1-queued-overhead-bytes/url")
				b.ReportMetric(four.queued, "s4-queued-overhead-bytes/url")
				b.ReportMetric(four.queued/one.queued, "s4/s1-queued")
				b.Logf("%s: %d URLs; S=1: %.2f seen bytes/URL, %.2f queued overhead bytes/URL; S=%d: %.2f and %.2f (shards' seen URLs %v)",
					mode, n, one.seen, one.queued, shards, four.seen, four.queued, four.perShard)
			}
		})
	}
}

type shardMem struct {
	seen, queued float64 // bytes per URL; queued less the URL's own bytes
	perShard     []int64 // seen URLs per shard
}

func shardedMemory(b *testing.B, n, shards int, mode string) shardMem {
	rdb := testRedis(b)
	ctx := context.Background()
	crawl := uniqueCrawl(b, rdb, "smem")
	b.Cleanup(func() {
		for k := 1; k < shards; k++ { // DeleteCrawl knows shard 0's keys only
			testutil.DeleteCrawl(context.Background(), rdb, crawl+":"+strconv.Itoa(k))
		}
	})
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1,
		ExpectedURLs: int64(n), DedupMode: mode, Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	urlBytes := seedArticles(b, f, n, 400)
	var seen, queued int
	set := "seen:*"
	if mode == frontier.DedupBloom {
		set = "bloom:*"
	}
	st, err := f.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var out shardMem
	for k := range f.NumShards() {
		p := f.ShardKeysOf(k).Prefix
		seen += sumMemory(b, rdb, p+set)
		queued += sumMemory(b, rdb, p+"q:*") + sumMemory(b, rdb, p+"qp:*") + sumMemory(b, rdb, p+"fresh")
	}
	for _, s := range st.Shards {
		out.perShard = append(out.perShard, s.Seen)
	}
	if st.Seen != int64(n) {
		b.Fatalf("S=%d: %d URLs seen, want %d", shards, st.Seen, n)
	}
	out.seen = float64(seen) / float64(n)
	out.queued = float64(queued-urlBytes) / float64(n)
	return out
}
