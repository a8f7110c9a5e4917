package frontier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// TestLimits checks a crawl's limits over one shard and three: the claims
// of two slaves take no more pages than max_pages between them, whatever
// shard their hosts are on, and none once it is reached; a claim cut short
// gives back what it did not lease, a completion without a page (a retry)
// its page; the items of completions count with the next claim; the master's clock ends a crawl (LimitOver); a crawl a
// limit ended is finished with the limit named, and reopened by higher
// limits; a slave that opened the crawl before it had limits claims
// without them (uncounted) until its heartbeat.
func TestLimits(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			ctx := context.Background()
			rdb := testRedis(t)
			master := newFrontier(t, rdb, "limits", func(o *frontier.Options) { o.Shards = shards })
			crawl := master.Keys().Prefix[len("crawl:{") : len(master.Keys().Prefix)-2]
			open := func(slave string) *frontier.Redis {
				f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, Slave: slave, Shards: shards,
					HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 10000})
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
			early := open("early") // before the crawl has limits
			var seeds []frontier.Task
			for i := range 30 {
				seeds = append(seeds, tk(fmt.Sprintf("http://h%d.test/", i), 0))
			}
			if _, err := master.Seed(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			if reached, reopened, err := master.SetLimits(ctx, frontier.Limits{MaxPages: 7, MaxItems: 4}, 0, 0); err != nil || reached != "" || reopened {
				t.Fatalf("SetLimits = %q, %v, %v", reached, reopened, err)
			}
			s1 := open("s1")
			claim := func(f *frontier.Redis, slave string, n int) []frontier.Lease {
				t.Helper()
				res, err := f.ClaimWaitOpts(ctx, slave, n, frontier.ClaimOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return res.Leases
			}
			// the early slave claims without limits until its heartbeat
			if n := len(claim(early, "early", 2)); n != 2 {
				t.Fatalf("early slave before its heartbeat: %d leases, want 2", n)
			}
			if _, err := early.HeartbeatControl(ctx, events.Heartbeat{Slave: "early"}); err != nil {
				t.Fatal(err)
			}
			// its 2 pages went uncounted: 7 more
			got := len(claim(s1, "s1", 3))
			got += len(claim(early, "early", 10))
			if got != 7 {
				t.Fatalf("claims of two slaves under max_pages 7: %d leases, want 7", got)
			}
			res, err := s1.ClaimWaitOpts(ctx, "s1", 5, frontier.ClaimOptions{})
			if err != nil || len(res.Leases) != 0 || res.Wait >= 0 {
				t.Fatalf("claim past the limit = %d leases, wait %v, %v; want none and nothing to wait for", len(res.Leases), res.Wait, err)
			}
			if r, err := master.LimitReached(ctx); err != nil || r != frontier.LimitMaxPages {
				t.Fatalf("LimitReached = %q, %v; want max_pages", r, err)
			}

			// higher: the counts stay (not the pages so far given), 3 more
			if reached, _, err := master.SetLimits(ctx, frontier.Limits{MaxPages: 10, MaxItems: 4}, 100, 100); err != nil || reached != "" {
				t.Fatalf("SetLimits 10 = %q, %v", reached, err)
			}
			ls := claim(s1, "s1", 10)
			if len(ls) != 3 {
				t.Fatalf("claims under max_pages 10: %d leases, want 3", len(ls))
			}
			st, err := master.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := &frontier.LimitStats{MaxPages: 10, MaxItems: 4, Pages: 10}
			if d := cmp.Diff(want, st.Limits); d != "" {
				t.Errorf("Stats.Limits (-want +got):\n%s", d)
			}

			// items: 5 on the completions of two pages, counted with the next claim
			var cs []frontier.Completion
			for i, l := range ls[:2] {
				c := frontier.Completion{Lease: l, Outcome: frontier.Done, Events: []frontier.Event{pageEvent(t, crawl, l.URL)}}
				for j := range 2 + i {
					ev, err := frontier.NewEvent(&events.Item{Crawl: crawl, URL: l.URL, Rule: "r", Item: fmt.Sprint(j)})
					if err != nil {
						t.Fatal(err)
					}
					c.Events = append(c.Events, ev)
				}
				cs = append(cs, c)
			}
			if _, err := s1.Complete(ctx, "s1", cs); err != nil {
				t.Fatal(err)
			}
			if r, err := s1.LimitReached(ctx); err != nil || r != frontier.LimitMaxItems {
				t.Fatalf("LimitReached after 5 items = %q, %v; want max_items", r, err)
			}
			// the third lease ends without a page (a retry): its page is
			// given back at once
			if _, err := s1.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[2], Outcome: frontier.Retry,
				RetryIn: time.Hour}}); err != nil {
				t.Fatal(err)
			}
			if st, _ := master.Stats(ctx); st.Limits.Pages != 9 || st.Limits.Items != 5 {
				t.Errorf("after a retry: limits %+v, want 9 pages and 5 items", st.Limits)
			}

			// ended by the limit, and reopened by higher ones
			if err := master.EndByLimit(ctx, frontier.LimitMaxItems); err != nil {
				t.Fatal(err)
			}
			if st, _ := master.Stats(ctx); !st.Finished || st.Limits == nil || st.Limits.EndedBy != frontier.LimitMaxItems {
				t.Fatalf("after EndByLimit: finished %v, limits %+v", st.Finished, st.Limits)
			}
			reached, reopened, err := master.SetLimits(ctx, frontier.Limits{MaxPages: 11, Timed: true}, 0, 0)
			if err != nil || reached != "" || !reopened {
				t.Fatalf("SetLimits 11 = %q, %v, %v; want reopened", reached, reopened, err)
			}
			if st, _ := master.Stats(ctx); st.Finished || st.Limits.EndedBy != "" {
				t.Fatalf("reopened crawl: finished %v, limits %+v", st.Finished, st.Limits)
			}
			if n := len(claim(s1, "s1", 5)); n != 2 {
				t.Fatalf("claim after reopening: %d leases, want 2 (9 pages of 11)", n)
			}
			// the master's clock
			if err := master.LimitOver(ctx, frontier.LimitMaxDuration); err != nil {
				t.Fatal(err)
			}
			if n := len(claim(s1, "s1", 1)); n != 0 {
				t.Fatalf("claim past max_duration: %d leases, want none", n)
			}
			if r, _ := s1.LimitReached(ctx); r != frontier.LimitMaxDuration {
				t.Fatalf("LimitReached = %q, want max_duration", r)
			}
			// no limits: the hash goes, claims are free again
			if _, _, err := master.SetLimits(ctx, frontier.Limits{}, 0, 0); err != nil {
				t.Fatal(err)
			}
			if n, _ := rdb.Exists(ctx, master.Keys().Limits).Result(); n != 0 {
				t.Error("the limits hash outlived the limits")
			}
			if _, err := s1.HeartbeatControl(ctx, events.Heartbeat{Slave: "s1"}); err != nil {
				t.Fatal(err)
			}
			if n := len(claim(s1, "s1", 3)); n != 3 {
				t.Fatalf("claim without limits: %d leases, want 3", n)
			}
		})
	}
}

// TestLimitsSetIsMasterOnly runs the limits with the Redis users of
// bin/master acl: a slave's takes pages and counts items within its
// rights (nothing in the ACL log) but may not set the limits.
func TestLimitsSetIsMasterOnly(t *testing.T) {
	ctx := context.Background()
	crawl := testutil.CrawlName("limitacl")
	srv := frontiertest.StartACLRedis(t, crawl, "s1")
	opt := frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3,
		ExpectedURLs: 10000, DeadAfter: 10 * time.Second}
	master, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleMaster, ""), opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := master.SetLimits(ctx, frontier.Limits{MaxPages: 1, MaxItems: 5}, 0, 0); err != nil {
		t.Fatal(err)
	}
	s1, err := frontier.NewRedis(ctx, srv.Client(t, frontier.RoleSlave, "s1"), asSlave(opt, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s1.SetLimits(ctx, frontier.Limits{MaxPages: 100}, 0, 0); err == nil {
		t.Error("a slave's user set the limits")
	}
	if _, err := master.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	res, err := s1.ClaimWaitOpts(ctx, "s1", 2, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("the slave's claim under max_pages 1 = %d leases, %v; want 1", len(res.Leases), err)
	}
	ev, err := frontier.NewEvent(&events.Item{Crawl: crawl, URL: res.Leases[0].URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s1.CompleteClaim(ctx, "s1", []frontier.Completion{{Lease: res.Leases[0], Outcome: frontier.Done,
		Events: []frontier.Event{pageEvent(t, crawl, res.Leases[0].URL), ev}}}, 1, frontier.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := master.Stats(ctx); err != nil || st.Limits == nil || st.Limits.Items != 1 || st.Limits.Pages != 1 {
		t.Fatalf("limits after the slave's completion: %+v, %v; want 1 page, 1 item", st.Limits, err)
	}
	if d := srv.Denials(t); len(d) > 1 {
		t.Errorf("ACL log: %v, want only the refused limits_set", d)
	}
}

// pageEvent is the page record of a fetched URL.
func pageEvent(t *testing.T, crawl, url string) frontier.Event {
	t.Helper()
	ev, err := frontier.NewEvent(&events.Page{Crawl: crawl, URL: url, Status: 200})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
