package frontier_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// commandCalls returns the calls of each command Redis has run (INFO
// commandstats), scripts' inner commands included.
func commandCalls(tb testing.TB, rdb *redis.Client) map[string]int64 {
	tb.Helper()
	stats, err := testutil.CommandStats(context.Background(), rdb)
	if err != nil {
		tb.Fatal(err)
	}
	out := make(map[string]int64, len(stats))
	for name, st := range stats {
		out[name] = st.Calls
	}
	return out
}

// scriptCommands is the number of commands run between two commandCalls,
// leaving out the script calls and INFO themselves.
func scriptCommands(before, after map[string]int64) int64 {
	var n int64
	for c, v := range after {
		switch c {
		case "fcall", "fcall_ro", "info", "function|list", "function|load":
			continue
		}
		n += v - before[c]
	}
	return n
}

// BenchmarkScriptCommands measures the Redis commands the claim and
// complete scripts run per fetched page (INFO commandstats), for 64 hosts
// of concurrency 1, scope by seeds, a content hash per page and 5 links
// per page of which 4 (80%) were already seen.
//
//	go test -run '^$' -bench ScriptCommands ./shared/frontier/
func BenchmarkScriptCommands(b *testing.B) {
	for _, strat := range []string{frontier.StrategyBFS, frontier.StrategyPriority} {
		b.Run(strat, func(b *testing.B) {
			const hosts = 64
			rdb := testRedis(b)
			ctx := context.Background()
			f := newFrontier(b, rdb, "cmds-"+strat, func(o *frontier.Options) {
				o.Strategy, o.HostConcurrency, o.ExpectedURLs = strat, 1, int64(b.N)*2+1000
				o.ScopeBySeeds = true
			})
			var seeds []frontier.Task
			for h := range hosts {
				seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/", h), 0))
			}
			if _, err := f.Seed(ctx, seeds); err != nil {
				b.Fatal(err)
			}
			next := 0
			var claimCmds, completeCmds, pages int64
			perClaim, perComplete := map[string]int64{}, map[string]int64{}
			b.ResetTimer()
			for pages < int64(b.N) {
				c0 := commandCalls(b, rdb)
				ls, err := claimN(ctx, f, "s1", hosts)
				if err != nil {
					b.Fatal(err)
				}
				if len(ls) == 0 {
					b.Fatal("frontier ran dry")
				}
				c1 := commandCalls(b, rdb)
				cs := make([]frontier.Completion, len(ls))
				for i, l := range ls {
					var links []frontier.Task
					next++
					for k := range 5 {
						// k = 0 is new, the 4 others were linked before
						n := max(next-k*7, 0)
						links = append(links, tk(fmt.Sprintf("http://h%d.test/p%d", n%hosts, n), l.Depth+1))
					}
					cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done, Links: links, ContentHash: contentHash(next)}
				}
				if _, err := f.Complete(ctx, "s1", cs); err != nil {
					b.Fatal(err)
				}
				c2 := commandCalls(b, rdb)
				addCalls(perClaim, c0, c1)
				addCalls(perComplete, c1, c2)
				claimCmds += scriptCommands(c0, c1)
				completeCmds += scriptCommands(c1, c2)
				pages += int64(len(ls))
			}
			b.Logf("claim per page: %s", perPage(perClaim, pages))
			b.Logf("complete per page: %s", perPage(perComplete, pages))
			b.ReportMetric(float64(claimCmds)/float64(pages), "claim-cmds/page")
			b.ReportMetric(float64(completeCmds)/float64(pages), "complete-cmds/page")
			b.ReportMetric(float64(claimCmds+completeCmds)/float64(pages), "cmds/page")
		})
	}
}

func addCalls(sum, before, after map[string]int64) {
	for c, v := range after {
		if d := v - before[c]; d != 0 && c != "info" {
			sum[c] += d
		}
	}
}

// perPage formats command counts per page, most frequent first.
func perPage(calls map[string]int64, pages int64) string {
	names := make([]string, 0, len(calls))
	for c := range calls {
		names = append(names, c)
	}
	sort.Slice(names, func(i, j int) bool { return calls[names[i]] > calls[names[j]] })
	var sb strings.Builder
	for _, c := range names {
		fmt.Fprintf(&sb, "%s=%.2f ", c, float64(calls[c])/float64(pages))
	}
	return sb.String()
}
