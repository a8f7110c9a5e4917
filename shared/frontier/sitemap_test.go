package frontier_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestSitemapTaskMarks: a sitemap task's level and any-host mark and a
// page's lastmod survive the queue of every strategy, a retry, and links
// that cross shards; a render mark stays the first byte.
func TestSitemapTaskMarks(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	for _, strategy := range []string{frontier.StrategyBFS, frontier.StrategyPriority} {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/%d", strategy, shards), func(t *testing.T) {
				f := newFrontier(t, rdb, "smarks", func(o *frontier.Options) {
					o.Shards, o.Strategy = shards, strategy
				})
				sm := tk("http://a.test/sitemap.xml", 0)
				sm.Sitemap, sm.SitemapAnyHost = 1, true
				if _, err := f.Seed(ctx, []frontier.Task{sm}); err != nil {
					t.Fatal(err)
				}
				ls, err := claimN(ctx, f, "s1", 10)
				if err != nil || len(ls) != 1 {
					t.Fatalf("claim: %v, %v", ls, err)
				}
				if got := ls[0].Task; got.Sitemap != 1 || !got.SitemapAnyHost || got.Depth != 0 {
					t.Fatalf("claimed %+v", got)
				}
				// a retry keeps the marks
				if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Retry}}); err != nil {
					t.Fatal(err)
				}
				if ls, err = claimN(ctx, f, "s1", 10); err != nil || len(ls) != 1 {
					t.Fatalf("claim after retry: %v, %v", ls, err)
				}
				if got := ls[0].Task; got.Sitemap != 1 || !got.SitemapAnyHost || got.Attempt != 1 {
					t.Fatalf("after retry %+v", got)
				}
				var links []frontier.Task
				for i, h := range []string{"a.test", "b.test", "c.test", "d.test", "e.test"} {
					p := tk("http://"+h+"/page", 1)
					p.LastMod, p.Score = 1700000000+int64(i), 0.5
					child := tk("http://"+h+"/sitemap-2.xml", 0)
					child.Sitemap = 2
					r := tk("http://"+h+"/render", 1)
					r.Render, r.LastMod = true, 1
					links = append(links, p, child, r)
				}
				if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
					t.Fatal(err)
				}
				var got []frontier.Task
				for range 20 {
					ls, err := f.ClaimWaitOpts(ctx, "s1", 50, frontier.ClaimOptions{Render: true})
					if err != nil {
						t.Fatal(err)
					}
					if len(ls.Leases) == 0 {
						break
					}
					var cs []frontier.Completion
					for _, l := range ls.Leases {
						got = append(got, l.Task)
						cs = append(cs, frontier.Completion{Lease: l, Outcome: frontier.Done})
					}
					if _, err := f.Complete(ctx, "s1", cs); err != nil {
						t.Fatal(err)
					}
				}
				sort.Slice(got, func(i, j int) bool { return got[i].URL < got[j].URL })
				sort.Slice(links, func(i, j int) bool { return links[i].URL < links[j].URL })
				ignore := cmpopts.IgnoreFields(frontier.Task{}, "Priority", "Score", "ScopeHost")
				if d := cmp.Diff(links, got, ignore); d != "" {
					t.Fatalf("claimed links (-want +got):\n%s", d)
				}
			})
		}
	}
}
