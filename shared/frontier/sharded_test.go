package frontier_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestJumpHash(t *testing.T) {
	// balance: 10,000 hosts over 6 shards, each within 10% of 1/6
	counts := make([]int, 6)
	for i := range 10000 {
		counts[frontier.ShardOfHost(fmt.Sprintf("host-%d.example:80", i), 6)]++
	}
	for k, n := range counts {
		if n < 1500 || n > 1834 {
			t.Errorf("shard %d has %d of 10000 hosts, want about 1667", k, n)
		}
	}
	// consistency: going from 6 to 7 shards moves only hosts to the new shard
	moved := 0
	for i := range 10000 {
		h := fmt.Sprintf("host-%d.example:80", i)
		a, b := frontier.ShardOfHost(h, 6), frontier.ShardOfHost(h, 7)
		if a != b {
			if b != 6 {
				t.Fatalf("%s moved from shard %d to %d, not to the new shard", h, a, b)
			}
			moved++
		}
	}
	if moved < 1200 || moved > 1650 { // ~1/7
		t.Errorf("%d of 10000 hosts moved, want about 1429", moved)
	}
	if frontier.ShardOfHost("x", 1) != 0 || frontier.JumpHash(123, 0) != 0 {
		t.Error("one shard: everything in shard 0")
	}
}

// twoShardHosts returns two hosts that fall in different shards of n.
func twoShardHosts(t *testing.T, n int) (string, string) {
	t.Helper()
	a := "a.test"
	for i := range 100 {
		b := fmt.Sprintf("b%d.test", i)
		if frontier.ShardOfHost(b, n) != frontier.ShardOfHost(a, n) {
			return a, b
		}
	}
	t.Fatal("no two hosts in different shards")
	return "", ""
}

// TestCrossShardLinkOnce: a link found on shard A for a host of shard B is
// fetched exactly once, including when the slave dies between enqueueing
// it on B and acknowledging the page on A: the page is fetched again and
// its link dropped by B's dedup.
func TestCrossShardLinkOnce(t *testing.T) {
	for _, die := range []bool{false, true} {
		t.Run(fmt.Sprintf("slave dies before its ack: %v", die), func(t *testing.T) {
			rdb := testRedis(t)
			ctx := context.Background()
			f := newFrontier(t, rdb, "xshard", func(o *frontier.Options) { o.Shards = 4; o.DeadAfter = time.Minute })
			a, b := twoShardHosts(t, 4)
			if _, err := f.Seed(ctx, []frontier.Task{tk("http://"+a+"/", 0)}); err != nil {
				t.Fatal(err)
			}
			// got: every URL claimed after the page's first fetch
			var got []string
			complete := func(slave string, l frontier.Lease) {
				got = append(got, l.URL)
				if _, err := f.Complete(ctx, slave, []frontier.Completion{{Lease: l, Outcome: frontier.Done}}); err != nil {
					t.Fatal(err)
				}
			}
			page := func(slave string) frontier.Completion {
				ls, err := claimN(ctx, f, slave, 10)
				if err != nil {
					t.Fatal(err)
				}
				var c *frontier.Completion
				for _, l := range ls {
					if l.URL != "http://"+a+"/" {
						complete(slave, l) // the link enqueued before the slave died
						continue
					}
					if l.Shard != f.ShardOf(a) {
						t.Fatalf("lease of shard %d, host %s is in %d", l.Shard, a, f.ShardOf(a))
					}
					c = &frontier.Completion{Lease: l, Outcome: frontier.Done,
						Links: []frontier.Task{tk("http://"+b+"/x", 1), tk("http://"+a+"/y", 1)}}
				}
				if c == nil {
					t.Fatalf("%s did not get the page: %+v", slave, ls)
				}
				return *c
			}
			c := page("s1")
			if die {
				if err := f.CompleteRemoteOnly(ctx, "s1", []frontier.Completion{c}); err != nil {
					t.Fatal(err)
				}
				// s1 is dead: the master takes its lease back and the
				// page is fetched again, by s2, who finds the same links
				if n, err := f.RecoverSlave(ctx, "s1"); err != nil || n != 1 {
					t.Fatalf("recover s1: %d %v", n, err)
				}
				c = page("s2")
			}
			if acked, err := f.Complete(ctx, c.Lease.Slave, []frontier.Completion{c}); err != nil || !acked[0] {
				t.Fatalf("ack: %v %v", acked, err)
			}
			for range 10 {
				ls, err := claimN(ctx, f, "s3", 10)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range ls {
					complete("s3", l)
				}
				if len(ls) == 0 {
					break
				}
			}
			if d := cmp.Diff([]string{"http://" + a + "/y", "http://" + b + "/x"}, slices.Sorted(slices.Values(got))); d != "" {
				t.Errorf("links claimed (-want +got):\n%s", d)
			}
			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Seen != 3 || st.Queued != 0 || st.InFlight != 0 {
				t.Errorf("stats %+v: want 3 seen, nothing left", st)
			}
			if done, err := f.CheckFinished(ctx, 0); err != nil {
				t.Fatal(err)
			} else if !done {
				// the first idle collect starts the window; with a window of
				// 0 the next one finishes
				if done, err = f.CheckFinished(ctx, 0); err != nil || !done {
					t.Errorf("not finished: %v %v", done, err)
				}
			}
		})
	}
}

// TestOwnShards: two masters split a crawl's shards; when one stops
// renewing, the other takes its shards after the lease; a graceful stop
// gives them back at once.
func TestOwnShards(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "own", func(o *frontier.Options) { o.Shards = 4 })
	const ttl = 300 * time.Millisecond
	a, err := f.Own(ctx, "m-a", ttl)
	if err != nil || len(a) != 4 {
		t.Fatalf("the only master owns %v, %v; want all 4", a, err)
	}
	// a second master: m-a gives back down to its share, m-b takes them
	b, err := f.Own(ctx, "m-b", ttl)
	if err != nil || len(b) != 0 {
		t.Fatalf("m-b while m-a holds everything: %v %v", b, err)
	}
	if a, err = f.Own(ctx, "m-a", ttl); err != nil || len(a) != 2 {
		t.Fatalf("m-a after m-b joined: %v %v; want 2", a, err)
	}
	if b, err = f.Own(ctx, "m-b", ttl); err != nil || len(b) != 2 {
		t.Fatalf("m-b takes the rest: %v %v; want 2", b, err)
	}
	all := append(append([]int(nil), a...), b...)
	if d := cmp.Diff([]int{0, 1, 2, 3}, slices.Sorted(slices.Values(all))); d != "" {
		t.Fatalf("shards held (-want +got):\n%s", d)
	}
	// m-a dies (stops renewing): after the lease m-b holds everything
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(ttl / 3)
		if b, err = f.Own(ctx, "m-b", ttl); err != nil {
			t.Fatal(err)
		}
		if len(b) == 4 {
			break
		}
	}
	if len(b) != 4 {
		t.Fatalf("m-b after m-a died: %v; want all 4", b)
	}
	// a graceful stop frees them at once
	if err := f.Disown(ctx, "m-b"); err != nil {
		t.Fatal(err)
	}
	if c, err := f.Own(ctx, "m-c", ttl); err != nil || len(c) != 4 {
		t.Fatalf("m-c after m-b left: %v %v; want all 4", c, err)
	}
}

// TestOnlyRetriesLeft: when the only work left waits for its retry
// backoff, Stats says so and when the next retry is due, with one shard
// and with three.
func TestOnlyRetriesLeft(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			rdb := testRedis(t)
			ctx := context.Background()
			f := newFrontier(t, rdb, "retryleft", func(o *frontier.Options) { o.Shards = shards })
			if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
				t.Fatal(err)
			}
			ls, err := claimN(ctx, f, "s1", 10)
			if err != nil || len(ls) != 2 {
				t.Fatalf("claim: %d %v", len(ls), err)
			}
			st, _ := f.Stats(ctx)
			if only, _ := st.OnlyRetries(time.Now()); only || st.NextRetryAt != 0 {
				t.Fatalf("in flight: only retries %v, next %d", only, st.NextRetryAt)
			}
			before := time.Now()
			cs := []frontier.Completion{
				{Lease: ls[0], Outcome: frontier.Retry, RetryIn: 8 * time.Second, Reason: "http 500"},
				{Lease: ls[1], Outcome: frontier.Retry, RetryIn: 20 * time.Second, Reason: "timeout"},
			}
			if _, err := f.Complete(ctx, "s1", cs); err != nil {
				t.Fatal(err)
			}
			st, err = f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			only, due := st.OnlyRetries(before)
			if !only || st.Retry != 2 || due < 7*time.Second || due > 9*time.Second {
				t.Fatalf("only retries %v, %d retries, next due in %v; want true, 2, about 8s", only, st.Retry, due)
			}
		})
	}
}

func TestOnlyRetriesTable(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	for _, tc := range []struct {
		name string
		st   frontier.Stats
		only bool
		due  time.Duration
	}{
		{"nothing", frontier.Stats{}, false, 0},
		{"queued too", frontier.Stats{Retry: 1, Queued: 1, NextRetryAt: 1_005_000}, false, 0},
		{"in flight too", frontier.Stats{Retry: 1, InFlight: 1, NextRetryAt: 1_005_000}, false, 0},
		{"finished", frontier.Stats{Retry: 1, Finished: true}, false, 0},
		{"only retries", frontier.Stats{Retry: 2, NextRetryAt: 1_005_000}, true, 5 * time.Second},
		{"overdue", frontier.Stats{Retry: 2, NextRetryAt: 999_000}, true, 0},
	} {
		only, due := tc.st.OnlyRetries(now)
		if only != tc.only || due != tc.due {
			t.Errorf("%s: %v %v, want %v %v", tc.name, only, due, tc.only, tc.due)
		}
	}
}

// TestDateVariantsCap: with the default caps, the links of a path whose
// query holds a date stop at 100 (a calendar's endless next days), while a
// listing's ?page=N goes on to a few hundred; with one shard and three.
func TestDateVariantsCap(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			rdb := testRedis(t)
			ctx := context.Background()
			f := newFrontier(t, rdb, "datecap", func(o *frontier.Options) {
				o.Shards, o.MaxQueryVariants, o.MaxDateVariants = shards, 1000, 100
			})
			if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0)}); err != nil {
				t.Fatal(err)
			}
			ls, err := claimN(ctx, f, "s1", 1)
			if err != nil || len(ls) != 1 {
				t.Fatalf("claim %d %v", len(ls), err)
			}
			var links []frontier.Task
			day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i := range 150 {
				l := tk("http://a.test/cal?d="+day.AddDate(0, 0, i).Format("2006-01-02"), 1)
				l.PathKey, l.DateQuery = "http://a.test/cal", true
				links = append(links, l)
			}
			for i := range 300 {
				l := tk(fmt.Sprintf("http://b.test/list?page=%d", i+1), 1)
				l.PathKey = "http://b.test/list"
				links = append(links, l)
			}
			if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
				t.Fatal(err)
			}
			st, err := f.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Queued != 400 || st.TrapDropped != 50 {
				t.Errorf("queued %d, trap dropped %d; want 100 calendar + 300 listing pages, 50 dropped", st.Queued, st.TrapDropped)
			}
		})
	}
}
