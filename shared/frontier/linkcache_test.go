package frontier_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestLinkCache checks that links an acked, followed completion carried
// are not sent again, and that links of duplicate pages and lost leases
// are. To see what is sent, the seen set is emptied between completions:
// a link the cache skips is then not enqueued again.
func TestLinkCache(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		strategy string
		cache    int
		// second page's link x enqueued again after the seen set is emptied
		wantX bool
	}{
		{"bfs with cache", "bfs", 1024, false},
		{"dfs with cache", "dfs", 1024, false},
		{"bfs without cache", "bfs", 0, true},
		{"priority ignores the cache", "priority", 1024, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testRedis(t)
			f := newFrontier(t, rdb, "links", func(o *frontier.Options) { o.Strategy, o.LinkCache = tc.strategy, tc.cache })
			if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://b.test/1", 0), tk("http://c.test/1", 0)}); err != nil {
				t.Fatal(err)
			}
			ls := claimAll(t, f, 3)
			byHost := map[string]frontier.Lease{}
			for _, l := range ls {
				byHost[l.Host] = l
			}
			x, y := tk("http://x.test/", 1), tk("http://y.test/", 1)
			if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: byHost["a.test"], Outcome: frontier.Done,
				Links: []frontier.Task{x, y}, ContentHash: 0xaaaa}}); err != nil {
				t.Fatal(err)
			}
			forgetSeen(t, rdb, f)
			before, _ := f.Stats(ctx)
			if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: byHost["b.test"], Outcome: frontier.Done,
				Links: []frontier.Task{x}, ContentHash: 0xbbbb}}); err != nil {
				t.Fatal(err)
			}
			after, _ := f.Stats(ctx)
			if got := after.Queued > before.Queued; got != tc.wantX {
				t.Errorf("x enqueued again = %v, want %v (queued %d -> %d)", got, tc.wantX, before.Queued, after.Queued)
			}
			// KnownLink (the work API's look-up) says what the cache skips
			if got := f.KnownLink(y.URL); got == tc.wantX {
				t.Errorf("KnownLink(%s) = %v, want %v", y.URL, got, !tc.wantX)
			}
			if f.KnownLink("http://never.test/") {
				t.Error("KnownLink of a link never sent = true")
			}
		})
	}

	// a URL this process leased is known: its task was put through the
	// seen set when it was queued, so a page linking it need not send it
	t.Run("leased URLs are known", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			cache     int
			wantKnown bool
		}{{"with cache", 1024, true}, {"without cache", 0, false}} {
			t.Run(tc.name, func(t *testing.T) {
				rdb := testRedis(t)
				f := newFrontier(t, rdb, "links", func(o *frontier.Options) { o.LinkCache = tc.cache })
				a, b := tk("http://a.test/1", 0), tk("http://b.test/1", 0)
				if _, err := f.Seed(ctx, []frontier.Task{a, b}); err != nil {
					t.Fatal(err)
				}
				if f.KnownLink(b.URL) {
					t.Fatal("KnownLink(b) = true before any lease")
				}
				ls := claimAll(t, f, 2)
				if got := f.KnownLink(b.URL); got != tc.wantKnown {
					t.Errorf("KnownLink(b) after its lease = %v, want %v", got, tc.wantKnown)
				}
				var la frontier.Lease
				for _, l := range ls {
					if l.Host == "a.test" {
						la = l
					}
				}
				// with the seen set gone, a link the cache does not skip
				// is enqueued again
				forgetSeen(t, rdb, f)
				before, _ := f.Stats(ctx)
				if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: la, Outcome: frontier.Done,
					Links: []frontier.Task{tk(b.URL, 1)}, ContentHash: 0xaaaa}}); err != nil {
					t.Fatal(err)
				}
				after, _ := f.Stats(ctx)
				if sent := after.Queued > before.Queued; sent == tc.wantKnown {
					t.Errorf("link to the leased b sent = %v, want %v (queued %d -> %d)", sent, !tc.wantKnown, before.Queued, after.Queued)
				}
			})
		}
	})

	t.Run("duplicate page's links stay uncached", func(t *testing.T) {
		rdb := testRedis(t)
		f := newFrontier(t, rdb, "links", func(o *frontier.Options) { o.LinkCache = 1024 })
		if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://b.test/1", 0), tk("http://c.test/1", 0)}); err != nil {
			t.Fatal(err)
		}
		ls := claimAll(t, f, 3)
		w := tk("http://w.test/", 1)
		// a.test/1 first with content 0xcccc; b.test/1 the same content: a duplicate, w not followed
		if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, ContentHash: 0xcccc}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[1], Outcome: frontier.Done, ContentHash: 0xcccc,
			Links: []frontier.Task{w}}}); err != nil {
			t.Fatal(err)
		}
		before, _ := f.Stats(ctx)
		if before.Duplicates != 1 {
			t.Fatalf("duplicates %d, want 1", before.Duplicates)
		}
		if f.KnownLink(w.URL) {
			t.Error("KnownLink(w) = true after only a duplicate page carried it")
		}
		// a third page links w: it must reach Redis and be enqueued
		if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[2], Outcome: frontier.Done, ContentHash: 0xdddd,
			Links: []frontier.Task{w}}}); err != nil {
			t.Fatal(err)
		}
		if after, _ := f.Stats(ctx); after.Queued != before.Queued+1 {
			t.Errorf("w not enqueued after a duplicate page carried it: queued %d -> %d", before.Queued, after.Queued)
		}
		if !f.KnownLink(w.URL) {
			t.Error("KnownLink(w) = false after a page that was not a duplicate carried it")
		}
	})

	t.Run("lost lease's links stay uncached", func(t *testing.T) {
		rdb := testRedis(t)
		f := newFrontier(t, rdb, "links", func(o *frontier.Options) { o.LinkCache = 1024 })
		if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://b.test/1", 0)}); err != nil {
			t.Fatal(err)
		}
		ls := claimAll(t, f, 2)
		w := tk("http://w.test/", 1)
		stale := ls[0]
		stale.Token++ // not the lease's token: the ack is refused
		acked, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: stale, Outcome: frontier.Done, Links: []frontier.Task{w}}})
		if err != nil || len(acked) != 1 || acked[0] {
			t.Fatalf("stale ack = %v, %v; want refused", acked, err)
		}
		if f.KnownLink(w.URL) {
			t.Error("KnownLink(w) = true after a refused ack carried it")
		}
		before, _ := f.Stats(ctx)
		if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[1], Outcome: frontier.Done, Links: []frontier.Task{w}}}); err != nil {
			t.Fatal(err)
		}
		if after, _ := f.Stats(ctx); after.Queued != before.Queued+1 {
			t.Errorf("w not enqueued after a refused ack carried it: queued %d -> %d", before.Queued, after.Queued)
		}
	})
}

func claimAll(t *testing.T, f *frontier.Redis, n int) []frontier.Lease {
	t.Helper()
	ls, err := claimN(context.Background(), f, "s1", n)
	if err != nil || len(ls) != n {
		t.Fatalf("claim = %d, %v; want %d", len(ls), err, n)
	}
	return ls
}

// forgetSeen deletes the crawl's seen buckets.
func forgetSeen(t *testing.T, rdb *redis.Client, f *frontier.Redis) {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), f.Keys().Prefix+"seen:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("seen keys %v, %v", keys, err)
	}
	if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
}
