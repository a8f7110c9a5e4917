package frontier_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestSeenGrows grows crawls' seen buckets through several levels of
// splits (a load of a few URLs per bucket) by seeding and by completions'
// links, and checks that no URL is forgotten, that none is taken for seen
// before it was, that each duplicate page is still found (content
// buckets), and that every shard's bucket state matches what its buckets
// hold.
func TestSeenGrows(t *testing.T) {
	single := testRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		shards, load int
		seeds        int
		wantMinLevel int // the fullest shard's seen level at least
		cluster      bool
	}{
		{"one shard load 1", 1, 1, 3000, 12, false},
		{"three shards load 1", 3, 1, 3000, 10, false},
		{"one shard load 3", 1, 3, 3000, 10, false},
		{"three shards load 1 on a cluster", 3, 1, 1500, 9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rdb redis.UniversalClient = single
			if tc.cluster {
				rdb = testCluster(t)
			}
			crawl := uniqueCrawl(t, rdb, "grow")
			t.Cleanup(func() {
				for k := 1; k < tc.shards; k++ {
					testutil.DeleteCrawl(context.Background(), rdb, crawl+":"+strconv.Itoa(k))
				}
			})
			f, err := frontier.NewRedis(ctx, rdb, frontier.WithSeenLoad(frontier.Options{Crawl: crawl, Shards: tc.shards,
				HostConcurrency: 10_000, LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 10_000_000}, tc.load))
			if err != nil {
				t.Fatal(err)
			}
			const hosts = 20
			seed := func(i int) frontier.Task {
				// pages 2j and 2j+1 share a host (and content, below)
				return tk(fmt.Sprintf("http://h%d.test/s/%d", (i/2)%hosts, i), 0)
			}
			link := func(j int) frontier.Task { return tk(fmt.Sprintf("http://h%d.test/l/%d", (j*7)%hosts, j), 1) }
			never := func(i int) frontier.Task { return tk(fmt.Sprintf("http://h%d.test/never/%d", i%hosts, i), 0) }

			// seeds in batches that repeat earlier seeds and their own
			rng := rand.New(rand.NewPCG(1, 2))
			for from := 0; from < tc.seeds; from += 250 {
				var batch []frontier.Task
				for i := from; i < min(from+250, tc.seeds); i++ {
					batch = append(batch, seed(i))
					if i%10 == 0 {
						batch = append(batch, seed(i), seed(rng.IntN(i+1)))
					}
				}
				n, err := f.Seed(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				if want := min(from+250, tc.seeds) - from; n != want {
					t.Fatalf("seeds %d..: %d new, want %d", from, n, want)
				}
			}

			// every page completed once, until none is left: seed page i
			// links to link i/2 (new for the first page of a pair) and to
			// seed i/3 (seen), and the second page of a pair has its
			// partner's content; link pages have no links
			pages := 0
			for {
				ls, err := claimN(ctx, f, "s1", 200)
				if err != nil {
					t.Fatal(err)
				}
				if len(ls) == 0 {
					break
				}
				cs := make([]frontier.Completion, len(ls))
				for k, l := range ls {
					cs[k] = frontier.Completion{Lease: l, Outcome: frontier.Done}
					if !strings.Contains(l.URL, "/s/") {
						continue
					}
					i, err := strconv.Atoi(l.URL[strings.LastIndex(l.URL, "/")+1:])
					if err != nil {
						t.Fatalf("lease %q: %v", l.URL, err)
					}
					cs[k].Links = []frontier.Task{link(i / 2), seed(i / 3)}
					cs[k].ContentHash = frontier.Fingerprint("content " + strconv.Itoa(i/2))
				}
				acked, err := f.Complete(ctx, "s1", cs)
				if err != nil {
					t.Fatal(err)
				}
				for k, ok := range acked {
					if !ok {
						t.Fatalf("completion of %s not acked", cs[k].Lease.URL)
					}
				}
				pages += len(ls)
			}
			if want := tc.seeds + tc.seeds/2; pages != want {
				t.Errorf("%d pages crawled, want %d", pages, want)
			}

			var in, out []frontier.Task
			for i := range tc.seeds {
				in = append(in, seed(i))
				out = append(out, never(i))
			}
			for j := range tc.seeds / 2 {
				in = append(in, link(j))
			}
			assertSeen(t, f, in, true)
			assertSeen(t, f, out, false)
			if n, err := f.Seed(ctx, in); err != nil || n != 0 {
				t.Fatalf("seeding every seen URL again: %d new, %v; want 0", n, err)
			}
			// a recrawl's reseed marks what it enqueues seen too
			if n, err := f.Reseed(ctx, append(out[:100:100], in[:100]...), nil); err != nil || n != 200 {
				t.Fatalf("reseed: %d enqueued, %v; want 200", n, err)
			}
			assertSeen(t, f, out[:100], true)
			assertSeen(t, f, out[100:], false)

			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := struct{ Seen, Duplicates int64 }{int64(len(in)), int64(tc.seeds / 2)}
			if diff := cmp.Diff(want, struct{ Seen, Duplicates int64 }{st.Seen, st.Duplicates}); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
			level := 0
			for k := range f.NumShards() {
				level = max(level, checkSeen(t, nodeOf(t, rdb, f.ShardKeysOf(k).Meta), f.ShardKeysOf(k)))
			}
			if level < tc.wantMinLevel {
				t.Errorf("seen level reached %d, want at least %d", level, tc.wantMinLevel)
			}
		})
	}
}

// assertSeen checks that the crawl takes each task's URL for seen (want)
// or not.
func assertSeen(t *testing.T, f *frontier.Redis, tasks []frontier.Task, want bool) {
	t.Helper()
	has, err := f.MaybeSeenTasks(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	var wrong []string
	for i, h := range has {
		if h != want {
			wrong = append(wrong, tasks[i].URL)
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d URLs with seen %v, want %v: %q", len(wrong), !want, want, wrong[:min(len(wrong), 5)])
	}
}

// nodeOf returns the client of the node that holds key: rdb itself, or a
// cluster's master for its slot (a shard's keys share one).
func nodeOf(t *testing.T, rdb redis.UniversalClient, key string) *redis.Client {
	t.Helper()
	switch c := rdb.(type) {
	case *redis.Client:
		return c
	case *redis.ClusterClient:
		n, err := c.MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("client %T", rdb)
	return nil
}

// checkSeen checks that a shard's seen buckets are the sets that its
// state in meta allows, that they hold its count of members, that its
// content buckets are within their fixed count, and returns its level.
func checkSeen(t *testing.T, rdb *redis.Client, keys frontier.Keys) int {
	t.Helper()
	ctx := context.Background()
	st, err := rdb.HMGet(ctx, keys.Meta, "layout", "seen_level", "seen_split", "seen_count", "content_bits").Result()
	if err != nil {
		t.Fatal(err)
	}
	num := func(v any) int {
		s, _ := v.(string)
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("meta %v: %v", st, err)
		}
		return n
	}
	if num(st[0]) != 1 || num(st[4]) != frontier.ContentBits {
		t.Fatalf("meta layout %v, content_bits %v; want 1 and %d", st[0], st[4], frontier.ContentBits)
	}
	level, split, count := num(st[1]), num(st[2]), num(st[3])
	var members int64
	match := keys.Prefix + "seen:*"
	iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		b, err := strconv.ParseUint(iter.Val()[len(match)-1:], 16, 32)
		if err != nil || b >= 1<<level+uint64(split) {
			t.Errorf("seen bucket %q beyond level %d split %d", iter.Val(), level, split)
		}
		n, err := rdb.SCard(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		members += n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if members != int64(count) {
		t.Errorf("%d members in the seen buckets, meta seen_count %d", members, count)
	}
	match = keys.Prefix + "content:*"
	iter = rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		if b, err := strconv.ParseUint(iter.Val()[len(match)-1:], 16, 32); err != nil || b >= 1<<frontier.ContentBits {
			t.Errorf("content bucket %q beyond %d bits", iter.Val(), frontier.ContentBits)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return level
}

// TestSeenMemberBit checks the bit of a seen bucket member that the
// scripts split buckets by against Go's, at every level that splits.
func TestSeenMemberBit(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "bit", nil)
	rng := rand.New(rand.NewPCG(3, 4))
	fps := []uint64{0, 1<<64 - 1, 1 << 63, 1<<56 - 1, 0x5555555555555555}
	for range 100 {
		fps = append(fps, rng.Uint64())
	}
	for _, fp := range fps {
		seen, err := f.MemberBits(ctx, fp)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for b := frontier.SeenFloor; b < frontier.SeenMaxLevel; b++ {
			want = append(want, int64(fp>>b&1))
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("fingerprint %#x: seen member bits from level %d (-want +got):\n%s", fp, frontier.SeenFloor, diff)
		}
	}
}
