package frontier_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestReseedValidators checks that a recrawl's validators travel with the
// task to the claim that leases it, once: the lease carries them, the val
// hash forgets them, and a task re-enqueued without validators gets none.
// It runs for every strategy class, on one shard and on four, and through
// both claim paths (ClaimWaitOpts, CompleteClaim).
func TestReseedValidators(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		shards   int
	}{{"bfs", 1}, {"priority", 1}, {"bfs", 4}, {"dfs", 4}} {
		t.Run(fmt.Sprintf("%s/%d", tc.strategy, tc.shards), func(t *testing.T) {
			rdb := testRedis(t)
			f := newFrontier(t, rdb, "reval", func(o *frontier.Options) {
				o.Strategy, o.Shards, o.HostConcurrency = tc.strategy, tc.shards, 8
			})
			ctx := context.Background()
			var tasks []frontier.Task
			want := map[string]*frontier.Validators{}
			for h := range 6 {
				for p := range 3 {
					u := fmt.Sprintf("http://h%d.test/p%d", h, p)
					task := tk(u, 1)
					switch p {
					case 0:
						task.Revisit = &frontier.Validators{ETag: `"e` + u + `"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", Checksum: "00112233aabbccdd"}
					case 1:
						task.Revisit = &frontier.Validators{} // fetched before, nothing known
					}
					want[u] = task.Revisit
					tasks = append(tasks, task)
				}
			}
			// the first crawl: seen, done
			if _, err := f.Seed(ctx, tasks); err != nil {
				t.Fatal(err)
			}
			drain(t, f, "s1", nil)
			if n, err := f.Reseed(ctx, tasks, nil); err != nil || n != len(tasks) {
				t.Fatalf("reseed = %d, %v; want %d", n, err, len(tasks))
			}
			got := drain(t, f, "s1", nil)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("validators of the leases (-want +got):\n%s", d)
			}
			for k := range f.NumShards() {
				if n, err := rdb.Exists(ctx, f.ShardKeysOf(k).Validators).Result(); err != nil || n != 0 {
					t.Errorf("shard %d: val hash left after the claims: %d, %v", k, n, err)
				}
			}
			// again through CompleteClaim
			if _, err := f.Reseed(ctx, tasks, nil); err != nil {
				t.Fatal(err)
			}
			var held []frontier.Lease
			got = drain(t, f, "s1", &held)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("validators through CompleteClaim (-want +got):\n%s", d)
			}
		})
	}
}

// drain claims until nothing is left and completes every lease Done,
// returning each URL's validators. With held non-nil the leases are
// completed through CompleteClaim.
func drain(t *testing.T, f *frontier.Redis, slave string, held *[]frontier.Lease) map[string]*frontier.Validators {
	t.Helper()
	ctx := context.Background()
	got := map[string]*frontier.Validators{}
	var pending []frontier.Lease
	for range 100 {
		var ls []frontier.Lease
		if held != nil && len(pending) > 0 {
			cs := make([]frontier.Completion, len(pending))
			for i, l := range pending {
				cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done}
			}
			_, res, err := f.CompleteClaim(ctx, slave, cs, 50, frontier.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ls, pending = res.Leases, nil
		} else {
			res, err := f.ClaimWaitOpts(ctx, slave, 50, frontier.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ls = res.Leases
		}
		for _, l := range ls {
			got[l.URL] = l.Revisit
		}
		if held != nil {
			pending = append(pending, ls...)
		} else if len(ls) > 0 {
			cs := make([]frontier.Completion, len(ls))
			for i, l := range ls {
				cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done}
			}
			if _, err := f.Complete(ctx, slave, cs); err != nil {
				t.Fatal(err)
			}
		}
		if len(ls) == 0 && len(pending) == 0 {
			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Queued == 0 && st.InFlight == 0 {
				return got
			}
		}
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Fatalf("frontier not drained after 100 claims; got %v", keys)
	return nil
}

// TestStartRecrawl checks that recrawl runs are numbered and stamped.
func TestStartRecrawl(t *testing.T) {
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "rerun", func(o *frontier.Options) { o.Shards = 2 })
	ctx := context.Background()
	for want := int64(1); want <= 2; want++ {
		run, at, err := f.StartRecrawl(ctx)
		if err != nil || run != want || at.IsZero() {
			t.Fatalf("StartRecrawl = %d, %v, %v; want run %d", run, at, err, want)
		}
		st, err := f.Stats(ctx)
		if err != nil || st.RecrawlRun != want || st.RecrawlAt != at.UnixMilli() {
			t.Fatalf("stats run %d at %d, %v; want %d at %d", st.RecrawlRun, st.RecrawlAt, err, want, at.UnixMilli())
		}
	}
}
