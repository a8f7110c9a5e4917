package frontier_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// drainClaims claims and completes (done, with links for the first lease of
// the first round) until nothing is claimable, one task per host per
// claim, and returns the URLs in the order claimed.
func drainClaims(t *testing.T, f *frontier.Redis, links []frontier.Task) []string {
	t.Helper()
	ctx := context.Background()
	var got []string
	for round := 0; round < 20; round++ {
		ls, err := claimN(ctx, f, "s1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			return got
		}
		cs := make([]frontier.Completion, len(ls))
		for i, l := range ls {
			got = append(got, l.URL)
			cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done}
		}
		cs[0].Links, links = links, nil
		if _, err := f.Complete(ctx, "s1", cs); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("still claiming after 20 rounds")
	return nil
}

// TestFreshHosts: a host's first queued tasks (up to 4) wait in the fresh
// hash, with no queue, priorities or ready entry of their own; a fifth
// (in another call) moves them to the host's queue; either way a host's
// tasks are claimed in priority order and FIFO within a priority, and the
// front of its priority for a released task. A host whose next fetch time
// is pending gets a queue of its own at once.
func TestFreshHosts(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	exists := func(key string) bool {
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	var k frontier.Keys
	layout := func() []bool {
		fresh, err := rdb.HExists(ctx, k.Fresh, "a.test").Result()
		if err != nil {
			t.Fatal(err)
		}
		return []bool{fresh, exists(k.Prios("a.test")), exists(k.Ready)}
	}
	for _, tc := range []struct {
		name   string
		seeds  []frontier.Task
		layout []bool // fresh, prios, ready
		want   []string
	}{
		{"one", []frontier.Task{tk("http://a.test/5", 5)}, []bool{true, false, false}, []string{"http://a.test/5"}},
		{"four", []frontier.Task{tk("http://a.test/5", 5), tk("http://a.test/0", 0), {URL: "https://a.test/0b", Host: "a.test", ScopeHost: "a.test"},
			tk("http://a.test/3", 3)}, []bool{true, false, false},
			[]string{"http://a.test/0", "https://a.test/0b", "http://a.test/3", "http://a.test/5"}},
		{"five", []frontier.Task{tk("http://a.test/5", 5), tk("http://a.test/0", 0), tk("http://a.test/0b", 0),
			tk("http://a.test/3", 3), tk("http://a.test/0c", 0)}, []bool{false, true, true},
			[]string{"http://a.test/0", "http://a.test/0b", "http://a.test/0c", "http://a.test/3", "http://a.test/5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFrontier(t, rdb, "fresh", nil)
			k = f.Keys()
			for _, s := range tc.seeds {
				if _, err := f.Seed(ctx, []frontier.Task{s}); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(tc.layout, layout()); d != "" {
				t.Errorf("fresh, prios, ready (-want +got):\n%s", d)
			}
			// the first is released and claimed again
			ls, err := claimN(ctx, f, "s1", 10)
			if err != nil || len(ls) != 1 {
				t.Fatalf("claim: %v %v", ls, err)
			}
			if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Release}}); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, drainClaims(t, f, nil)); d != "" {
				t.Errorf("claimed (-want +got):\n%s", d)
			}
		})
	}

	// a delay: the host's next task, found by its page, waits for its turn
	// in its own queue, not in fresh
	f := newFrontier(t, rdb, "freshdelay", func(o *frontier.Options) { o.Delay = time.Hour })
	k = f.Keys()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	got := drainClaims(t, f, []frontier.Task{tk("http://a.test/next", 1), tk("http://c.test/", 1)})
	sort.Strings(got)
	if d := cmp.Diff([]string{"http://a.test/", "http://b.test/", "http://c.test/"}, got); d != "" {
		t.Errorf("claimed with a delay (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{false, true, true}, layout()); d != "" {
		t.Errorf("a task of a host with its next time pending: fresh, prios, ready (-want +got):\n%s", d)
	}
}

// TestFreshWarmHost: with no delay, the links a completion brings to the
// host it acked go to that host's own queue and the ready set (claimed
// soon, while the slave holds its connection), those of a host it did not
// touch to the fresh hash.
func TestFreshWarmHost(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "freshwarm", nil)
	k := f.Keys()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 10)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	cs := []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done}, {Lease: ls[1], Outcome: frontier.Done}}
	cs[0].Links = []frontier.Task{tk("http://"+ls[0].Host+"/next", 1), tk("http://c.test/", 1)}
	if _, err := f.Complete(ctx, "s1", cs); err != nil {
		t.Fatal(err)
	}
	layout := func(host string) []bool {
		fresh, err := rdb.HExists(ctx, k.Fresh, host).Result()
		if err != nil {
			t.Fatal(err)
		}
		prios, err := rdb.Exists(ctx, k.Prios(host)).Result()
		if err != nil {
			t.Fatal(err)
		}
		_, zerr := rdb.ZScore(ctx, k.Ready, host).Result()
		return []bool{fresh, prios == 1, zerr == nil}
	}
	if d := cmp.Diff([]bool{false, true, true}, layout(ls[0].Host)); d != "" {
		t.Errorf("the acked host's link: fresh, prios, ready (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{true, false, false}, layout("c.test")); d != "" {
		t.Errorf("another host's link: fresh, prios, ready (-want +got):\n%s", d)
	}
	got := drainClaims(t, f, nil)
	sort.Strings(got)
	if d := cmp.Diff([]string{"http://" + ls[0].Host + "/next", "http://c.test/"}, got); d != "" {
		t.Errorf("claimed (-want +got):\n%s", d)
	}
}

// TestFreshHostPages: a fresh host's one URL counts towards
// max_pages_per_host without a field in hpages; the field is written when
// a second URL comes or the first is claimed, and the cap holds either way.
func TestFreshHostPages(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "freshpages", func(o *frontier.Options) { o.MaxPagesPerHost = 2 })
	k := f.Keys()
	pages := func(host string) string {
		v, _ := rdb.HGet(ctx, k.HostPages, host).Result()
		return v
	}
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	if p := pages("a.test"); p != "" {
		t.Errorf("hpages of a fresh host = %q, want no field", p)
	}
	links := []frontier.Task{tk("http://a.test/2", 1), tk("http://a.test/3", 1),
		tk("http://w.test/1", 1), tk("http://w.test/2", 1), tk("http://w.test/3", 1),
		tk("http://z.test/1", 1)}
	got := drainClaims(t, f, links)
	sort.Strings(got)
	want := []string{"http://a.test/", "http://a.test/2", "http://w.test/1", "http://w.test/2", "http://z.test/1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claimed under a cap of 2 (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"2", "2", "1"}, []string{pages("a.test"), pages("w.test"), pages("z.test")}); d != "" {
		t.Errorf("hpages of a, w, z (-want +got):\n%s", d)
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TrapDropped != 2 || st.Queued != 0 {
		t.Errorf("trap dropped %d, queued %d; want 2, 0", st.TrapDropped, st.Queued)
	}
}

// TestScopeSets: with scope by seeds, a link is in scope when its host is a
// seed's (the scope sets, Keys.ScopeMember).
func TestScopeSets(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "scopesets", func(o *frontier.Options) { o.ScopeBySeeds = true })
	k := f.Keys()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	key, m := k.ScopeMember("a.test")
	if ok, err := rdb.SIsMember(ctx, key, m).Result(); err != nil || !ok {
		t.Fatalf("a.test in %s as %s: %v %v", key, m, ok, err)
	}
	if enc, _ := rdb.ObjectEncoding(ctx, key).Result(); enc != "intset" {
		t.Errorf("scope set encoding %q, want intset", enc)
	}
	got := drainClaims(t, f, []frontier.Task{tk("http://new.test/y", 1), tk("http://a.test/z", 1)})
	sort.Strings(got)
	if d := cmp.Diff([]string{"http://a.test/", "http://a.test/z"}, got); d != "" {
		t.Errorf("claimed (-want +got):\n%s", d)
	}
}

// TestIdleHostCostsNothing: a host with nothing queued or in flight keeps
// its politeness fields (hnext, hdelay) only while its next fetch time is
// pending (in hcool); a claim after that time drops them.
func TestIdleHostCostsNothing(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	f := newFrontier(t, rdb, "idlehost", func(o *frontier.Options) { o.Delay = 20 * time.Millisecond })
	k := f.Keys()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 10)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done,
		HostDelay: 30 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	fields := func() []bool {
		var out []bool
		for _, key := range []string{k.HostNext, k.HostDelay, k.HostInfl} {
			ok, err := rdb.HExists(ctx, key, "a.test").Result()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ok)
		}
		n, err := rdb.ZCard(ctx, k.Cool).Result()
		if err != nil {
			t.Fatal(err)
		}
		return append(out, n == 1)
	}
	if d := cmp.Diff([]bool{true, true, false, true}, fields()); d != "" {
		t.Errorf("pending: hnext, hdelay, hinfl, in hcool (-want +got):\n%s", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && fields()[0] {
		time.Sleep(10 * time.Millisecond)
		if _, err := claimN(ctx, f, "s1", 10); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]bool{false, false, false, false}, fields()); d != "" {
		t.Errorf("passed: hnext, hdelay, hinfl, in hcool (-want +got):\n%s", d)
	}
}
