// Package frontiertest is the test suite every frontier implementation
// passes. An implementation's test calls Run with a factory.
package frontiertest

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// Backend is everything a frontier implementation offers.
type Backend interface {
	frontier.Frontier
	frontier.Seeder
	frontier.Supervisor
	frontier.Registry
	frontier.PolicySeeder
}

// Factory makes a fresh, empty backend for one crawl, and a function that
// drains the events written to its stream so far.
type Factory func(t *testing.T, opt frontier.Options) (Backend, func() []events.Envelope)

// Run runs the suite.
func Run(t *testing.T, newBackend Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"SeedDedup", testSeedDedup},
		{"DedupConcurrentPushers", testDedupConcurrent},
		{"BreadthFirstFIFO", testBreadthFirst},
		{"BatchClaimAcrossPriorities", testBatchClaim},
		{"CompleteClaimTakesFreedSlot", testCompleteClaim},
		{"CompleteClaimKeepsDelay", testCompleteClaimDelay},
		{"PolitenessConcurrentClaimers", testPoliteness},
		{"HostConcurrency", testHostConcurrency},
		{"CompleteEnqueuesLinksAndEvents", testCompleteLinks},
		{"ScopeBySeeds", testScopeBySeeds},
		{"LeaseExpiryRecovery", testLeaseExpiry},
		{"LostLeaseCannotAck", testLostLeaseCannotAck},
		{"ExtendLease", testExtend},
		{"RetryBackoff", testRetryBackoff},
		{"FailAndBackoff", testFailAndBackoff},
		{"ReleaseGoesFirst", testRelease},
		{"RecoverDeadSlave", testRecoverSlave},
		{"RegistryJoinLeave", testRegistry},
		{"TerminationNeverEarly", testTermination},
		{"DepthFirstLIFO", testDepthFirst},
		{"PriorityBacklinksThenScore", testPriority},
		{"AOPICTrapStarves", testAOPICTrap},
		{"TrapCaps", testTrapCaps},
		{"StrategyRequeueConsistent", testStrategyRequeue},
		{"RenderRouting", testRenderRouting},
		{"RenderPolitenessShared", testRenderPoliteness},
		{"RenderRequeue", testRenderRequeue},
		{"RenderFinish", testRenderFinish},
		{"HostPolicies", testHostPolicies},
		{"HostPolicyDelayLargerWins", testPolicyDelayLargerWins},
		// the seen-URL paths again with a Bloom filter (Options.DedupMode)
		{"SeedDedupBloom", withBloom(testSeedDedup)},
		{"DedupConcurrentPushersBloom", withBloom(testDedupConcurrent)},
		{"CompleteEnqueuesLinksAndEventsBloom", withBloom(testCompleteLinks)},
		{"ScopeBySeedsBloom", withBloom(testScopeBySeeds)},
		{"PriorityBacklinksThenScoreBloom", withBloom(testPriority)},
		{"AOPICTrapStarvesBloom", withBloom(testAOPICTrap)},
		{"TrapCapsBloom", withBloom(testTrapCaps)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newBackend) })
	}
}

// withBloom runs a test on crawls that dedup with a Bloom filter; sized
// for opts' 10,000 URLs at 1e-6, a false positive among a test's few
// hundred URLs has a chance of about 1e-4 (and the URLs are fixed).
func withBloom(fn func(*testing.T, Factory)) func(*testing.T, Factory) {
	return func(t *testing.T, nb Factory) {
		fn(t, func(t *testing.T, opt frontier.Options) (Backend, func() []events.Envelope) {
			opt.DedupMode = frontier.DedupBloom
			return nb(t, opt)
		})
	}
}

func opts(crawl string) frontier.Options {
	return frontier.Options{Crawl: crawl, Delay: 0, HostConcurrency: 1, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 10000, DeadAfter: 10 * time.Second}
}

// task builds a task for a URL.
func task(raw string, depth int) frontier.Task {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return frontier.Task{URL: raw, Host: u.Host, ScopeHost: u.Hostname(), Depth: depth, Priority: int64(depth)}
}

func urls(ls []frontier.Lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.URL)
	}
	sort.Strings(out)
	return out
}

// pageURLs lists the URLs of the page events among evs, in order.
func pageURLs(evs []events.Envelope) []string {
	var out []string
	for _, e := range evs {
		if e.Page != nil {
			out = append(out, e.Page.URL)
		}
	}
	return out
}

// claimAll claims until nothing is claimable, completing each lease Done.
func claimAll(t *testing.T, f Backend, slave string) []frontier.Lease {
	t.Helper()
	ctx := context.Background()
	var all []frontier.Lease
	for range 1000 {
		ls, err := claimN(ctx, f, slave, 50)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(ls) == 0 {
			return all
		}
		all = append(all, ls...)
		var cs []frontier.Completion
		for _, l := range ls {
			cs = append(cs, frontier.Completion{Lease: l, Outcome: frontier.Done})
		}
		if _, err := f.Complete(ctx, slave, cs); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	t.Fatal("claimAll did not drain")
	return nil
}

func mustSeed(t *testing.T, f Backend, ts ...frontier.Task) int {
	t.Helper()
	n, err := f.Seed(context.Background(), ts)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	return n
}

func testSeedDedup(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("seed"))
	a, b := task("http://a.test/", 0), task("http://b.test/x", 0)
	if n := mustSeed(t, f, a, b, a); n != 2 {
		t.Fatalf("first seed added %d, want 2", n)
	}
	if n := mustSeed(t, f, a, b); n != 0 {
		t.Fatalf("second seed added %d, want 0", n)
	}
	st, _ := f.Stats(context.Background())
	if st.Queued != 2 || st.Seen != 2 {
		t.Fatalf("stats queued=%d seen=%d, want 2 2", st.Queued, st.Seen)
	}
	got := urls(claimAll(t, f, "s1"))
	if d := cmp.Diff([]string{"http://a.test/", "http://b.test/x"}, got); d != "" {
		t.Fatalf("claimed (-want +got):\n%s", d)
	}
}

func testDedupConcurrent(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("dedupc"))
	const workers, n = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ts []frontier.Task
			for i := range n {
				// every worker pushes the same URLs, in a different order
				j := (i*7 + w*31) % n
				ts = append(ts, task(fmt.Sprintf("http://h%d.test/p/%d", j%10, j), 1))
			}
			for len(ts) > 0 {
				k := min(37, len(ts))
				if _, err := f.Seed(context.Background(), ts[:k]); err != nil {
					errs <- err
					return
				}
				ts = ts[k:]
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := claimAll(t, f, "s1")
	if len(got) != n {
		t.Fatalf("claimed %d tasks, want %d (each URL once)", len(got), n)
	}
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l.URL] {
			t.Fatalf("%s claimed twice", l.URL)
		}
		seen[l.URL] = true
	}
}

func testBreadthFirst(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("bfs"))
	mustSeed(t, f, task("http://a.test/d2a", 2), task("http://a.test/d1a", 1),
		task("http://a.test/d2b", 2), task("http://a.test/d0", 0), task("http://a.test/d1b", 1))
	var got []string
	for _, l := range claimAll(t, f, "s1") {
		got = append(got, l.URL)
	}
	want := []string{"http://a.test/d0", "http://a.test/d1a", "http://a.test/d1b", "http://a.test/d2a", "http://a.test/d2b"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("claim order (-want +got):\n%s", d)
	}
}

// testBatchClaim takes several tasks of one host in one claim (delay 0,
// free slots): they come in priority order, FIFO within a priority, across
// a priority whose queue runs out mid-claim; once the host's queue is
// empty nothing more is claimed, and acking the leases finishes the crawl.
func testBatchClaim(t *testing.T, nb Factory) {
	o := opts("batch")
	o.HostConcurrency = 10
	f, drain := nb(t, o)
	mustSeed(t, f, task("http://a.test/d1a", 1), task("http://a.test/d0a", 0), task("http://a.test/d1b", 1),
		task("http://a.test/d0b", 0), task("http://a.test/d1c", 1), task("http://b.test/d0", 0))
	ctx := context.Background()
	var got []string
	var leases []frontier.Lease
	for _, max := range []int{5, 5, 5} {
		ls, err := claimN(ctx, f, "s1", max)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Host == "a.test" {
				got = append(got, l.URL)
			}
		}
		leases = append(leases, ls...)
	}
	want := []string{"http://a.test/d0a", "http://a.test/d0b", "http://a.test/d1a", "http://a.test/d1b", "http://a.test/d1c"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("a.test claim order (-want +got):\n%s", d)
	}
	if len(leases) != 6 {
		t.Fatalf("%d leases, want 6", len(leases))
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 0 || st.InFlight != 6 {
		t.Fatalf("after claiming everything: queued %d, in flight %d; want 0 and 6", st.Queued, st.InFlight)
	}
	cs := make([]frontier.Completion, len(leases))
	for i, l := range leases {
		cs[i] = frontier.Completion{Lease: l, Outcome: frontier.Done,
			Events: []frontier.Event{{Type: events.TypePage, Data: []byte(`{"url":"` + l.URL + `"}`)}}}
	}
	acked, err := f.Complete(ctx, "s1", cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range acked {
		if !ok {
			t.Errorf("lease of %s not acked", leases[i].URL)
		}
	}
	if st, err = f.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Done != 6 || st.InFlight != 0 || st.Queued != 0 {
		t.Fatalf("after acking: %+v", st)
	}
	// one page event per ack, whatever the stream entries hold
	if pages := len(pageURLs(drain())); pages != 6 {
		t.Errorf("%d page events, want 6", pages)
	}
}

// testCompleteClaim: acking a lease and claiming in one call gets the
// slot the ack frees, which another slave's claim could not get before;
// the ack's effects (done, events) are those of Complete.
func testCompleteClaim(t *testing.T, nb Factory) {
	f, drain := nb(t, opts("cc")) // one request in flight per host, delay 0
	mustSeed(t, f, task("http://a.test/1", 0), task("http://a.test/2", 0), task("http://a.test/3", 0))
	ctx := context.Background()
	first, err := claimN(ctx, f, "s1", 5)
	if err != nil || len(first) != 1 {
		t.Fatalf("first claim: %d leases, %v; want 1", len(first), err)
	}
	res, err := f.ClaimWaitOpts(ctx, "s2", 5, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 0 || !res.Busy {
		t.Fatalf("s2 while a.test is full: %d leases, busy %v, %v; want none and busy", len(res.Leases), res.Busy, err)
	}
	c := frontier.Completion{Lease: first[0], Outcome: frontier.Done,
		Events: []frontier.Event{{Type: events.TypePage, Data: []byte(`{"url":"` + first[0].URL + `"}`)}}}
	acked, res, err := f.CompleteClaim(ctx, "s1", []frontier.Completion{c}, 5, frontier.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]bool{true}, acked); d != "" {
		t.Errorf("acks (-want +got):\n%s", d)
	}
	var got []string
	for _, l := range res.Leases {
		got = append(got, l.URL)
	}
	if d := cmp.Diff([]string{"http://a.test/2"}, got); d != "" {
		t.Fatalf("claimed with the ack (-want +got):\n%s", d)
	}
	if res.Leases[0].Slave != "s1" || res.Leases[0].Token == first[0].Token {
		t.Errorf("lease %+v: want s1's, with a new token", res.Leases[0])
	}
	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Done != 1 || st.InFlight != 1 || st.Queued != 1 {
		t.Errorf("stats done %d, in flight %d, queued %d; want 1, 1, 1", st.Done, st.InFlight, st.Queued)
	}
	// the same lease again is lost, and the claim still answers
	acked, res, err = f.CompleteClaim(ctx, "s1", []frontier.Completion{c}, 5, frontier.ClaimOptions{})
	if err != nil || len(acked) != 1 || acked[0] || len(res.Leases) != 0 || !res.Busy {
		t.Errorf("second ack of the same lease: acked %v, %d leases, busy %v, %v; want lost, none, busy", acked, len(res.Leases), res.Busy, err)
	}
	if pages := len(pageURLs(drain())); pages != 1 {
		t.Errorf("%d page events, want 1", pages)
	}
}

// testCompleteClaimDelay: the claim in CompleteClaim keeps the host's
// politeness delay, counted from the end of the fetch just acked, and says
// how long to wait.
func testCompleteClaimDelay(t *testing.T, nb Factory) {
	o := opts("ccdelay")
	o.Delay = 300 * time.Millisecond
	f, _ := nb(t, o)
	mustSeed(t, f, task("http://a.test/1", 0), task("http://a.test/2", 0))
	ctx := context.Background()
	first, err := claimN(ctx, f, "s1", 5)
	if err != nil || len(first) != 1 {
		t.Fatalf("first claim: %d leases, %v; want 1", len(first), err)
	}
	acked, res, err := f.CompleteClaim(ctx, "s1", []frontier.Completion{{Lease: first[0], Outcome: frontier.Done}}, 5, frontier.ClaimOptions{})
	if err != nil || len(acked) != 1 || !acked[0] {
		t.Fatalf("ack: %v, %v", acked, err)
	}
	if len(res.Leases) != 0 {
		t.Fatalf("claimed %s within the delay", res.Leases[0].URL)
	}
	if res.Wait <= 0 || res.Wait > o.Delay+10*time.Millisecond {
		t.Errorf("wait %v, want (0, %v]", res.Wait, o.Delay)
	}
}

// testPoliteness runs concurrent claimers against three hosts and checks,
// on the frontier's own clock, that no two claims of one host start closer
// than the delay, and that a host is never held by two slaves at once.
func testPoliteness(t *testing.T, nb Factory) {
	o := opts("polite")
	o.Delay = 60 * time.Millisecond
	o.Jitter = 0.5
	f, _ := nb(t, o)
	var ts []frontier.Task
	for h := range 3 {
		for p := range 6 {
			ts = append(ts, task(fmt.Sprintf("http://h%d.test/%d", h, p), 0))
		}
	}
	mustSeed(t, f, ts...)
	type claim struct {
		at, end time.Time
	}
	var mu sync.Mutex
	byHost := map[string][]claim{}
	var wg sync.WaitGroup
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slave := fmt.Sprintf("s%d", s)
			for time.Now().Before(deadline) {
				st, err := f.Stats(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if st.Queued == 0 && st.InFlight == 0 {
					return
				}
				ls, err := claimN(ctx, f, slave, 4)
				if err != nil {
					t.Error(err)
					return
				}
				for _, l := range ls {
					time.Sleep(5 * time.Millisecond) // the fetch
					mu.Lock()
					byHost[l.Host] = append(byHost[l.Host], claim{at: l.LeasedAt})
					mu.Unlock()
					if _, err := f.Complete(ctx, slave, []frontier.Completion{{Lease: l, Outcome: frontier.Done}}); err != nil {
						t.Error(err)
						return
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	total := 0
	for host, cs := range byHost {
		sort.Slice(cs, func(i, j int) bool { return cs[i].at.Before(cs[j].at) })
		total += len(cs)
		for i := 1; i < len(cs); i++ {
			// the completion of the previous fetch came at least 5ms after its claim
			if gap := cs[i].at.Sub(cs[i-1].at); gap < o.Delay {
				t.Errorf("host %s: claims %v apart, delay is %v", host, gap, o.Delay)
			}
		}
	}
	if total != len(ts) {
		t.Fatalf("claimed %d tasks, want %d", total, len(ts))
	}
}

func testHostConcurrency(t *testing.T, nb Factory) {
	o := opts("hconc")
	o.HostConcurrency = 3
	f, _ := nb(t, o)
	var ts []frontier.Task
	for p := range 10 {
		ts = append(ts, task(fmt.Sprintf("http://one.test/%d", p), 0))
	}
	mustSeed(t, f, ts...)
	ctx := context.Background()
	ls, err := claimN(ctx, f, "s1", 10)
	if err != nil {
		t.Fatal(err)
	}
	more, err := claimN(ctx, f, "s2", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls)+len(more) != 3 {
		t.Fatalf("in flight on one host: %d, want host_concurrency 3", len(ls)+len(more))
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	again, err := claimN(ctx, f, "s2", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 {
		t.Fatalf("after one completion claimed %d, want 1", len(again))
	}
}

func testCompleteLinks(t *testing.T, nb Factory) {
	f, drain := nb(t, opts("links"))
	mustSeed(t, f, task("http://a.test/", 0))
	ctx := context.Background()
	ls, err := claimN(ctx, f, "s1", 5)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %d", err, len(ls))
	}
	ev, err := frontier.NewEvent(&events.Page{Crawl: "links", URL: ls[0].URL, Status: 200})
	if err != nil {
		t.Fatal(err)
	}
	links := []frontier.Task{task("http://a.test/1", 1), task("http://a.test/2", 1), task("http://a.test/", 1)}
	acked, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links, Events: []frontier.Event{ev}}})
	if err != nil || !acked[0] {
		t.Fatalf("complete: %v %v", err, acked)
	}
	st, _ := f.Stats(ctx)
	if st.Done != 1 || st.Queued != 2 || st.InFlight != 0 {
		t.Fatalf("stats %+v, want done 1 queued 2 (the seed is not enqueued twice)", st)
	}
	if d := cmp.Diff([]string{"http://a.test/"}, pageURLs(drain())); d != "" {
		t.Fatalf("page events (-want +got):\n%s", d)
	}
}

func testScopeBySeeds(t *testing.T, nb Factory) {
	o := opts("scope")
	o.ScopeBySeeds = true
	f, _ := nb(t, o)
	mustSeed(t, f, task("http://in.test/", 0))
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "s1", 5)
	links := []frontier.Task{task("http://in.test:8080/a", 1), task("http://out.test/b", 1)}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"http://in.test:8080/a"}, urls(claimAll(t, f, "s1"))); d != "" {
		t.Fatalf("in scope (-want +got):\n%s", d)
	}
}

func testLeaseExpiry(t *testing.T, nb Factory) {
	o := opts("expiry")
	o.LeaseDuration = 150 * time.Millisecond
	f, drain := nb(t, o)
	mustSeed(t, f, task("http://a.test/", 0))
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "dead", 5)
	if len(ls) != 1 {
		t.Fatalf("claimed %d", len(ls))
	}
	if n, _ := f.RecoverExpired(ctx, 100); n != 0 {
		t.Fatalf("recovered %d before expiry", n)
	}
	time.Sleep(250 * time.Millisecond)
	n, err := f.RecoverExpired(ctx, 100)
	if err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	again, _ := claimN(ctx, f, "alive", 5)
	if len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("reclaimed %+v, want the task at attempt 1", again)
	}
	var lost []events.Lost
	for _, e := range drain() {
		if e.Lost != nil {
			lost = append(lost, *e.Lost)
		}
	}
	if len(lost) != 1 || lost[0].Slave != "dead" || lost[0].Reason != events.LostExpired || lost[0].Attempt != 1 || lost[0].URL != "http://a.test/" {
		t.Fatalf("lost records %+v", lost)
	}
	st, _ := f.Stats(ctx)
	if st.Lost != 1 {
		t.Fatalf("stats lost %d", st.Lost)
	}
}

func testLostLeaseCannotAck(t *testing.T, nb Factory) {
	o := opts("lostack")
	o.LeaseDuration = 100 * time.Millisecond
	f, drain := nb(t, o)
	mustSeed(t, f, task("http://a.test/", 0))
	ctx := context.Background()
	old, _ := claimN(ctx, f, "slow", 5)
	time.Sleep(200 * time.Millisecond)
	if _, err := f.RecoverExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	cur, _ := claimN(ctx, f, "slow", 5) // the same slave claims it again: a new token
	if len(cur) != 1 {
		t.Fatalf("reclaim %d", len(cur))
	}
	drain()
	ev, _ := frontier.NewEvent(&events.Page{URL: "http://a.test/"})
	acked, err := f.Complete(ctx, "slow", []frontier.Completion{{Lease: old[0], Outcome: frontier.Done,
		Links: []frontier.Task{task("http://a.test/x", 1)}, Events: []frontier.Event{ev}}})
	if err != nil || acked[0] {
		t.Fatalf("stale ack accepted: %v %v", acked, err)
	}
	if es := drain(); len(es) != 0 {
		t.Fatalf("stale ack wrote %d events", len(es))
	}
	held, err := f.Extend(ctx, "slow", old)
	if err != nil || held[0] {
		t.Fatalf("stale extend accepted: %v %v", held, err)
	}
	acked, err = f.Complete(ctx, "slow", []frontier.Completion{{Lease: cur[0], Outcome: frontier.Done}})
	if err != nil || !acked[0] {
		t.Fatalf("current ack refused: %v %v", acked, err)
	}
	st, _ := f.Stats(ctx)
	if st.Done != 1 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func testExtend(t *testing.T, nb Factory) {
	o := opts("extend")
	o.LeaseDuration = 200 * time.Millisecond
	f, _ := nb(t, o)
	mustSeed(t, f, task("http://a.test/", 0))
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "s1", 5)
	for range 4 {
		time.Sleep(100 * time.Millisecond)
		held, err := f.Extend(ctx, "s1", ls)
		if err != nil || !held[0] {
			t.Fatalf("extend: %v %v", held, err)
		}
		if n, _ := f.RecoverExpired(ctx, 10); n != 0 {
			t.Fatal("extended lease was recovered")
		}
	}
	if held, _ := f.Extend(ctx, "other", ls); held[0] {
		t.Fatal("another slave extended the lease")
	}
}

func testRetryBackoff(t *testing.T, nb Factory) {
	o := opts("retry")
	o.MaxAttempts = 2
	f, drain := nb(t, o)
	mustSeed(t, f, task("http://a.test/", 0))
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "s1", 5)
	acked, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Retry, RetryIn: 300 * time.Millisecond, Reason: "http 500"}})
	if err != nil || !acked[0] {
		t.Fatal(err)
	}
	st, _ := f.Stats(ctx)
	if st.Retry != 1 || st.Queued != 0 {
		t.Fatalf("stats %+v, want one waiting for retry", st)
	}
	if got, _ := claimN(ctx, f, "s1", 5); len(got) != 0 {
		t.Fatal("retry came back before its backoff")
	}
	var again []frontier.Lease
	for range 50 {
		time.Sleep(50 * time.Millisecond)
		if again, _ = claimN(ctx, f, "s1", 5); len(again) > 0 {
			break
		}
	}
	if len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("retry %+v, want attempt 1", again)
	}
	if time.Since(ls[0].LeasedAt) < 300*time.Millisecond {
		t.Fatal("retry came back before its backoff")
	}
	drain()
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: again[0], Outcome: frontier.Retry, RetryIn: time.Millisecond, Reason: "http 500"}}); err != nil {
		t.Fatal(err)
	}
	st, _ = f.Stats(ctx)
	if st.Failed != 1 || st.Retry != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v, want failed after max attempts", st)
	}
	var kinds []string
	for _, e := range drain() {
		if e.Exception != nil {
			kinds = append(kinds, e.Exception.Kind)
		}
	}
	if d := cmp.Diff([]string{events.KindFailed}, kinds); d != "" {
		t.Fatalf("exceptions (-want +got):\n%s", d)
	}
}

func testFailAndBackoff(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("failbo"))
	mustSeed(t, f, task("http://a.test/1", 0), task("http://a.test/2", 0))
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "s1", 5)
	if len(ls) != 1 {
		t.Fatalf("claimed %d with host concurrency 1", len(ls))
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Fail, Backoff: 400 * time.Millisecond, Reason: "http 404"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := claimN(ctx, f, "s1", 5); len(got) != 0 {
		t.Fatal("host claimed during its backoff")
	}
	time.Sleep(450 * time.Millisecond)
	if got, _ := claimN(ctx, f, "s1", 5); len(got) != 1 {
		t.Fatalf("after backoff claimed %d", len(got))
	}
	st, _ := f.Stats(ctx)
	if st.Failed != 1 {
		t.Fatalf("failed %d", st.Failed)
	}
}

func testRelease(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("release"))
	mustSeed(t, f, task("http://a.test/1", 0), task("http://a.test/2", 0))
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "s1", 5)
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Release}}); err != nil {
		t.Fatal(err)
	}
	again, _ := claimN(ctx, f, "s2", 5)
	if len(again) != 1 || again[0].URL != ls[0].URL || again[0].Attempt != 0 {
		t.Fatalf("after release claimed %+v, want %s at attempt 0", again, ls[0].URL)
	}
}

func testRecoverSlave(t *testing.T, nb Factory) {
	f, drain := nb(t, opts("deadslave"))
	mustSeed(t, f, task("http://a.test/", 0), task("http://b.test/", 0), task("http://c.test/", 0))
	ctx := context.Background()
	if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "victim", Host: "pi"}); err != nil {
		t.Fatal(err)
	}
	mine, _ := claimN(ctx, f, "victim", 2)
	other, _ := claimN(ctx, f, "other", 2)
	if len(mine) != 2 || len(other) != 1 {
		t.Fatalf("claims %d %d", len(mine), len(other))
	}
	n, err := f.RecoverSlave(ctx, "victim")
	if err != nil || n != 2 {
		t.Fatalf("recover slave: %d %v", n, err)
	}
	st, _ := f.Stats(ctx)
	if st.InFlight != 1 || st.Queued != 2 || st.Lost != 2 {
		t.Fatalf("stats %+v", st)
	}
	var lost, deaths int
	for _, e := range drain() {
		if e.Lost != nil && e.Lost.Reason == events.LostSlaveDead && e.Lost.Slave == "victim" {
			lost++
		}
		if e.Slave != nil && e.Slave.Kind == events.SlaveDeath && e.Slave.Slave == "victim" && e.Slave.Host == "pi" {
			deaths++
		}
	}
	if lost != 2 || deaths != 1 {
		t.Fatalf("lost %d deaths %d", lost, deaths)
	}
	if ss, _ := f.Slaves(ctx); len(ss) != 0 {
		t.Fatalf("dead slave still registered: %+v", ss)
	}
}

func testRegistry(t *testing.T, nb Factory) {
	f, drain := nb(t, opts("registry"))
	ctx := context.Background()
	for i := range 3 {
		if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "s1", Host: "box", Pages: int64(i), PagesPerSec: 2}); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := f.Slaves(ctx)
	if err != nil || len(ss) != 1 || ss[0].Pages != 2 {
		t.Fatalf("slaves %+v %v", ss, err)
	}
	st, _ := f.Stats(ctx)
	if st.SlavesAlive != 1 || st.PagesPerSec != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := f.Leave(ctx, "s1", "signal"); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range drain() {
		if e.Slave != nil {
			kinds = append(kinds, e.Slave.Kind)
		}
	}
	if d := cmp.Diff([]string{events.SlaveJoin, events.SlaveLeave}, kinds); d != "" {
		t.Fatalf("slave events (-want +got):\n%s", d)
	}
}

func testTermination(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("term"))
	ctx := context.Background()
	const q = 150 * time.Millisecond
	mustSeed(t, f, task("http://a.test/", 0))
	ls, _ := claimN(ctx, f, "s1", 5)
	for range 4 { // in flight for longer than the window: never finished
		if done, _ := f.CheckFinished(ctx, q); done {
			t.Fatal("finished while a task was in flight")
		}
		time.Sleep(q / 2)
	}
	// completing with a link keeps the crawl going
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: []frontier.Task{task("http://a.test/next", 1)}}}); err != nil {
		t.Fatal(err)
	}
	if done, _ := f.CheckFinished(ctx, q); done {
		t.Fatal("finished with a task queued")
	}
	next, _ := claimN(ctx, f, "s1", 5)
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: next[0], Outcome: frontier.Retry, RetryIn: 50 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	if done, _ := f.CheckFinished(ctx, q); done {
		t.Fatal("finished with a task waiting for retry")
	}
	time.Sleep(60 * time.Millisecond)
	last, _ := claimN(ctx, f, "s1", 5)
	if len(last) != 1 {
		t.Fatalf("retry not claimable: %d", len(last))
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: last[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	// empty now: the first check starts the window, a check within it is not finished
	if done, _ := f.CheckFinished(ctx, q); done {
		t.Fatal("finished before the quiescence window")
	}
	finished := false
	for range 20 {
		time.Sleep(q / 2)
		if finished, _ = f.CheckFinished(ctx, q); finished {
			break
		}
	}
	if !finished {
		t.Fatal("never finished")
	}
	st, _ := f.Stats(ctx)
	if !st.Finished || st.Done != 2 {
		t.Fatalf("stats %+v", st)
	}
	// a new seed reopens the crawl
	mustSeed(t, f, task("http://a.test/more", 0))
	if st, _ = f.Stats(ctx); st.Finished {
		t.Fatal("still finished after a new seed")
	}
}

func testDepthFirst(t *testing.T, nb Factory) {
	o := opts("dfs")
	o.Strategy = frontier.StrategyDFS
	f, _ := nb(t, o)
	mustSeed(t, f, task("http://a.test/d2a", 2), task("http://a.test/d1a", 1),
		task("http://a.test/d2b", 2), task("http://a.test/d0", 0), task("http://a.test/d1b", 1))
	ctx := context.Background()
	ls, err := claimN(ctx, f, "s1", 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %d", err, len(ls))
	}
	// the deepest, newest first; then its own links, newest first
	links := []frontier.Task{task("http://a.test/d3a", 3), task("http://a.test/d3b", 3)}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
		t.Fatal(err)
	}
	got := []string{ls[0].URL}
	for _, l := range claimAll(t, f, "s1") {
		got = append(got, l.URL)
	}
	want := []string{"http://a.test/d2b", "http://a.test/d3b", "http://a.test/d3a", "http://a.test/d2a",
		"http://a.test/d1b", "http://a.test/d1a", "http://a.test/d0"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("claim order (-want +got):\n%s", d)
	}
}

// claimed is a lease's URL and importance, in claim order.
type claimed struct {
	URL        string
	Importance float64
}

func testPriority(t *testing.T, nb Factory) {
	o := opts("prio")
	o.Strategy = frontier.StrategyPriority
	o.HostConcurrency = 3
	f, _ := nb(t, o)
	mustSeed(t, f, task("http://s.test/a", 0), task("http://s.test/b", 0), task("http://s.test/c", 0))
	ctx := context.Background()
	ls, err := claimN(ctx, f, "s1", 3)
	if err != nil || len(ls) != 3 {
		t.Fatalf("claim: %v %d", err, len(ls))
	}
	scored := func(raw string, il float64) frontier.Task {
		tk := task(raw, 1)
		tk.Score = il
		return tk
	}
	u3, u1 := task("http://t.test/u3", 1), task("http://t.test/u1", 1)
	hi, lo := scored("http://t.test/hi", 0.5), scored("http://t.test/lo", 0.25)
	links := map[string][]frontier.Task{
		"http://s.test/a": {u3, u1},
		"http://s.test/b": {u3},
		"http://s.test/c": {u3, lo, hi},
	}
	var cs []frontier.Completion
	for _, l := range ls {
		cs = append(cs, frontier.Completion{Lease: l, Outcome: frontier.Done, Links: links[l.URL]})
	}
	if _, err := f.Complete(ctx, "s1", cs); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Stats(ctx); st.Queued != 4 {
		t.Fatalf("queued %d, want 4 (each URL once)", st.Queued)
	}
	var got []claimed
	for _, l := range claimAll(t, f, "s1") {
		got = append(got, claimed{l.URL, l.Importance})
	}
	// X·backlinks + Y·score with X = Y = 1
	want := []claimed{{"http://t.test/u3", 3}, {"http://t.test/hi", 1.5}, {"http://t.test/lo", 1.25}, {"http://t.test/u1", 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("claim order (-want +got):\n%s", d)
	}
}

// testAOPICTrap crawls a site whose normal pages link to each other and
// to a calendar: each calendar page links to the next (new) month, back to
// the previous one and home. Normal pages are claimed first and the cash of
// calendar pages shrinks by the tax at every step.
func testAOPICTrap(t *testing.T, nb Factory) {
	o := opts("aopic")
	o.Strategy = frontier.StrategyAOPIC
	o.AOPICLambdaMin = 1e9 // no gifts from lambda: the decay is exact
	f, _ := nb(t, o)
	const normal = 6
	page := func(p string) string { return "http://a.test/" + p }
	var norm []string
	for i := range normal {
		norm = append(norm, page(fmt.Sprintf("n%d", i)))
	}
	outLinks := func(u string) []string {
		switch {
		case u == page("home"):
			return append(append([]string{}, norm...), page("cal/1"))
		case u == page("about"):
			return append([]string{page("home")}, norm...)
		case len(u) > len(page("cal/")) && u[:len(page("cal/"))] == page("cal/"):
			var k int
			fmt.Sscanf(u[len(page("cal/")):], "%d", &k)
			return []string{page(fmt.Sprintf("cal/%d", k+1)), page(fmt.Sprintf("cal/%d", max(k-1, 1))), page("home")}
		}
		var out []string
		for _, n := range norm {
			if n != u {
				out = append(out, n)
			}
		}
		return append(out, page("home"))
	}
	mustSeed(t, f, task(page("home"), 0), task(page("about"), 0))
	ctx := context.Background()
	var order []claimed
	for range 30 {
		ls, err := claimN(ctx, f, "s1", 1)
		if err != nil || len(ls) != 1 {
			t.Fatalf("claim: %v %d", err, len(ls))
		}
		l := ls[0]
		order = append(order, claimed{l.URL, l.Importance})
		var links []frontier.Task
		for _, u := range outLinks(l.URL) {
			links = append(links, task(u, l.Depth+1))
		}
		if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: l, Outcome: frontier.Done, Links: links}}); err != nil {
			t.Fatal(err)
		}
	}
	firstCal, normals := -1, 0
	var cal []float64
	for i, c := range order {
		isCal := len(c.URL) > len(page("cal/")) && c.URL[:len(page("cal/"))] == page("cal/")
		if isCal {
			if firstCal < 0 {
				firstCal = i
			}
			cal = append(cal, c.Importance)
		} else if c.URL != page("home") && c.URL != page("about") {
			normals++
			if firstCal >= 0 {
				t.Errorf("normal page %s claimed after calendar pages (order %+v)", c.URL, order)
			}
		}
	}
	if normals != normal || len(cal) < 10 {
		t.Fatalf("claimed %d normal pages and %d calendar pages: %+v", normals, len(cal), order)
	}
	for k := 1; k < len(cal); k++ {
		// the next month gets (1 - tax) of the cash: its only new or queued link
		if cal[k] <= 0 || cal[k] > 0.9*cal[k-1]*(1+1e-9) {
			t.Fatalf("calendar cash does not decay: %v", cal)
		}
	}
}

func testTrapCaps(t *testing.T, nb Factory) {
	o := opts("traps")
	o.MaxPagesPerHost = 3
	o.MaxQueryVariants = 2
	f, drain := nb(t, o)
	mustSeed(t, f, task("http://a.test/", 0)) // counts towards a.test's cap
	variant := func(raw string) frontier.Task {
		tk := task(raw, 1)
		tk.PathKey = "http://b.test/s"
		return tk
	}
	ctx := context.Background()
	ls, _ := claimN(ctx, f, "s1", 5)
	links := []frontier.Task{task("http://a.test/1", 1), task("http://a.test/2", 1), task("http://a.test/3", 1),
		task("http://a.test/4", 1), variant("http://b.test/s?x=1"), variant("http://b.test/s?x=2"),
		variant("http://b.test/s?x=3"), task("http://b.test/s", 1), task("http://a.test/1", 1)}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
		t.Fatal(err)
	}
	got := urls(claimAll(t, f, "s1"))
	want := []string{"http://a.test/1", "http://a.test/2", "http://b.test/s", "http://b.test/s?x=1", "http://b.test/s?x=2"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("enqueued (-want +got):\n%s", d)
	}
	// more drops from the same host: counted, but reported once
	mustSeed(t, f, task("http://c.test/", 0))
	ls, _ = claimN(ctx, f, "s2", 5)
	more := []frontier.Task{task("http://a.test/5", 1), task("http://a.test/6", 1)}
	if _, err := f.Complete(ctx, "s2", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: more}}); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stats(ctx)
	if st.TrapDropped != 5 || st.Queued != 0 {
		t.Fatalf("stats trap_dropped=%d queued=%d, want 5 0", st.TrapDropped, st.Queued)
	}
	var traps []events.Exception
	for _, e := range drain() {
		if e.Exception != nil && e.Exception.Kind == "trap" {
			ex := *e.Exception
			ex.At = 0
			traps = append(traps, ex)
		}
	}
	wantTraps := []events.Exception{{Crawl: traps0Crawl(traps), Kind: "trap", URL: "http://a.test/3", Host: "a.test",
		Slave: "s1", Message: "host page cap 3 reached"}}
	if d := cmp.Diff(wantTraps, traps); d != "" {
		t.Fatalf("trap exceptions (-want +got):\n%s", d)
	}
}

// traps0Crawl is the crawl name of the first record (the factory picks it).
func traps0Crawl(ts []events.Exception) string {
	if len(ts) == 0 {
		return ""
	}
	return ts[0].Crawl
}

// testStrategyRequeue releases, retries and loses leases under every
// strategy and checks the queued count, that every task comes back once
// (with its importance) and that the crawl finishes.
func testStrategyRequeue(t *testing.T, nb Factory) {
	for _, strat := range []string{frontier.StrategyBFS, frontier.StrategyDFS, frontier.StrategyPriority, frontier.StrategyAOPIC} {
		t.Run(strat, func(t *testing.T) {
			o := opts("requeue-" + strat)
			o.Strategy = strat
			o.MaxAttempts = 5
			f, _ := nb(t, o)
			ctx := context.Background()
			seeds := []frontier.Task{task("http://a.test/", 0), task("http://b.test/", 0), task("http://c.test/", 0)}
			mustSeed(t, f, seeds...)
			queued := func(want int64) {
				t.Helper()
				st, err := f.Stats(ctx)
				if err != nil || st.Queued != want {
					t.Fatalf("queued %d (%v), want %d", st.Queued, err, want)
				}
			}
			if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "victim"}); err != nil {
				t.Fatal(err)
			}
			ls, err := claimN(ctx, f, "victim", 3)
			if err != nil || len(ls) != 3 {
				t.Fatalf("claim: %v %d", err, len(ls))
			}
			queued(0)
			before := map[string]float64{}
			for _, l := range ls {
				before[l.URL] = l.Importance
			}
			sort.Slice(ls, func(i, j int) bool { return ls[i].URL < ls[j].URL })
			if _, err := f.Complete(ctx, "victim", []frontier.Completion{
				{Lease: ls[0], Outcome: frontier.Release},
				{Lease: ls[1], Outcome: frontier.Retry, RetryIn: time.Millisecond, Reason: "http 503"},
			}); err != nil {
				t.Fatal(err)
			}
			queued(1)
			if n, err := f.RecoverSlave(ctx, "victim"); err != nil || n != 1 {
				t.Fatalf("recover slave: %d %v", n, err)
			}
			queued(2)
			if done, _ := f.CheckFinished(ctx, 0); done {
				t.Fatal("finished with tasks queued")
			}
			time.Sleep(5 * time.Millisecond) // the retry is due
			var got []claimed
			for _, l := range claimAll(t, f, "s1") {
				got = append(got, claimed{l.URL, l.Importance})
			}
			sort.Slice(got, func(i, j int) bool { return got[i].URL < got[j].URL })
			want := []claimed{{"http://a.test/", before["http://a.test/"]}, {"http://b.test/", before["http://b.test/"]},
				{"http://c.test/", before["http://c.test/"]}}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("claimed after requeue (-want +got):\n%s", d)
			}
			queued(0)
			finished := false
			for range 5 {
				if finished, _ = f.CheckFinished(ctx, 0); finished {
					break
				}
			}
			if !finished {
				t.Fatal("never finished")
			}
		})
	}
}

func rtask(raw string, depth int) frontier.Task {
	t := task(raw, depth)
	t.Render = true
	return t
}

// claimOpts claims once with options, failing the test on an error.
func claimOpts(t *testing.T, f Backend, slave string, max int, render bool) []frontier.Lease {
	t.Helper()
	res, err := f.ClaimWaitOpts(context.Background(), slave, max, frontier.ClaimOptions{Render: render})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return res.Leases
}

// claimAllOpts claims until nothing is claimable, completing each lease
// Done; it returns url -> Task.Render of every lease.
func claimAllOpts(t *testing.T, f Backend, slave string, render bool) map[string]bool {
	t.Helper()
	ctx := context.Background()
	got := map[string]bool{}
	for range 1000 {
		ls := claimOpts(t, f, slave, 3, render)
		if len(ls) == 0 {
			return got
		}
		var cs []frontier.Completion
		for _, l := range ls {
			if _, dup := got[l.URL]; dup {
				t.Fatalf("%s claimed twice", l.URL)
			}
			got[l.URL] = l.Render
			cs = append(cs, frontier.Completion{Lease: l, Outcome: frontier.Done})
		}
		if _, err := f.Complete(ctx, slave, cs); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	t.Fatal("claimAllOpts did not drain")
	return nil
}

// mixedSeeds: static and render tasks, some hosts with both.
func mixedSeeds() []frontier.Task {
	return []frontier.Task{task("http://a.test/1", 0), task("http://a.test/2", 0), rtask("http://a.test/r1", 0),
		task("http://b.test/1", 0), rtask("http://c.test/r1", 0), rtask("http://c.test/r2", 0),
		rtask("http://d.test/r1", 0), task("http://d.test/1", 0)}
}

func testRenderRouting(t *testing.T, nb Factory) {
	for _, strat := range []string{frontier.StrategyBFS, frontier.StrategyAOPIC} {
		t.Run(strat, func(t *testing.T) {
			o := opts("render-" + strat)
			o.Strategy = strat
			f, _ := nb(t, o)
			ctx := context.Background()
			mustSeed(t, f, mixedSeeds()...)
			st, _ := f.Stats(ctx)
			if st.Queued != 8 || st.RenderQueued != 4 {
				t.Fatalf("stats queued=%d render_queued=%d, want 8 4", st.Queued, st.RenderQueued)
			}
			// a slave that cannot render gets the static tasks, never a render task
			static := claimAll(t, f, "plain")
			if d := cmp.Diff([]string{"http://a.test/1", "http://a.test/2", "http://b.test/1", "http://d.test/1"}, urls(static)); d != "" {
				t.Fatalf("non-render slave claimed (-want +got):\n%s", d)
			}
			res, err := f.ClaimWaitOpts(ctx, "plain", 5, frontier.ClaimOptions{})
			if err != nil || len(res.Leases) != 0 || res.Wait >= 0 {
				t.Fatalf("non-render claim with only render tasks queued: %+v %v, want nothing and no wait hint", res, err)
			}
			st, _ = f.Stats(ctx)
			if st.Queued != 4 || st.RenderQueued != 4 {
				t.Fatalf("stats queued=%d render_queued=%d, want 4 4", st.Queued, st.RenderQueued)
			}
			got := claimAllOpts(t, f, "browser", true)
			want := map[string]bool{"http://a.test/r1": true, "http://c.test/r1": true, "http://c.test/r2": true, "http://d.test/r1": true}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("render slave claimed (-want +got):\n%s", d)
			}
			if st, _ = f.Stats(ctx); st.Queued != 0 || st.RenderQueued != 0 {
				t.Fatalf("stats queued=%d render_queued=%d after draining", st.Queued, st.RenderQueued)
			}

			// a render-capable slave gets both kinds, with their flags
			mustSeed(t, f, task("http://e.test/1", 0), rtask("http://e.test/r", 0), rtask("http://f.test/r", 0), task("http://g.test/1", 0))
			got = claimAllOpts(t, f, "browser", true)
			want = map[string]bool{"http://e.test/1": false, "http://e.test/r": true, "http://f.test/r": true, "http://g.test/1": false}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("render slave claimed (-want +got):\n%s", d)
			}
			// links keep their flag
			mustSeed(t, f, task("http://h.test/", 0))
			ls := claimOpts(t, f, "browser", 5, true)
			if len(ls) != 1 {
				t.Fatalf("claimed %d", len(ls))
			}
			links := []frontier.Task{rtask("http://h.test/r", 1), task("http://h.test/s", 1)}
			if _, err := f.Complete(ctx, "browser", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, Links: links}}); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(map[string]bool{"http://h.test/s": false}, claimAllOpts(t, f, "plain", false)); d != "" {
				t.Fatalf("non-render slave claimed links (-want +got):\n%s", d)
			}
			if d := cmp.Diff(map[string]bool{"http://h.test/r": true}, claimAllOpts(t, f, "browser", true)); d != "" {
				t.Fatalf("render slave claimed links (-want +got):\n%s", d)
			}
		})
	}
}

// testRenderPoliteness: a host's static and render tasks share its slots
// and its next allowed time.
func testRenderPoliteness(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("rpolite"))
	ctx := context.Background()
	mustSeed(t, f, task("http://a.test/s", 0), rtask("http://a.test/r", 0))
	first := claimOpts(t, f, "browser", 10, true)
	if len(first) != 1 {
		t.Fatalf("claimed %d tasks of one host with concurrency 1, want 1", len(first))
	}
	if got := claimOpts(t, f, "browser2", 10, true); len(got) != 0 {
		t.Fatalf("second task claimable while the first is in flight: %+v", got)
	}
	if got := claimOpts(t, f, "plain", 10, false); len(got) != 0 {
		t.Fatalf("static claim while the host is busy: %+v", got)
	}
	if _, err := f.Complete(ctx, "browser", []frontier.Completion{{Lease: first[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	second := claimOpts(t, f, "browser2", 10, true)
	if len(second) != 1 || second[0].URL == first[0].URL {
		t.Fatalf("after completion claimed %+v, want the other task", second)
	}

	// with a delay the host's next time is shared too
	o := opts("rpolite-delay")
	o.Delay = time.Hour
	g, _ := nb(t, o)
	mustSeed(t, g, task("http://a.test/s", 0), rtask("http://a.test/r", 0))
	ls := claimOpts(t, g, "browser", 10, true)
	if len(ls) != 1 {
		t.Fatalf("claimed %d", len(ls))
	}
	if _, err := g.Complete(ctx, "browser", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	if got := claimOpts(t, g, "browser", 10, true); len(got) != 0 {
		t.Fatalf("other class claimed within the host's delay: %+v", got)
	}
}

// testRenderRequeue: retried, released and lost render tasks go back to
// the render queues, under every strategy.
func testRenderRequeue(t *testing.T, nb Factory) {
	for _, strat := range []string{frontier.StrategyBFS, frontier.StrategyDFS, frontier.StrategyPriority, frontier.StrategyAOPIC} {
		t.Run(strat, func(t *testing.T) {
			o := opts("rrequeue-" + strat)
			o.Strategy = strat
			o.MaxAttempts = 5
			o.LeaseDuration = 100 * time.Millisecond
			f, _ := nb(t, o)
			ctx := context.Background()
			mustSeed(t, f, rtask("http://a.test/", 0), rtask("http://b.test/", 0), rtask("http://c.test/", 0), rtask("http://d.test/", 0))
			if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "victim"}); err != nil {
				t.Fatal(err)
			}
			ls := claimOpts(t, f, "victim", 3, true)
			if len(ls) != 3 {
				t.Fatalf("claimed %d", len(ls))
			}
			sort.Slice(ls, func(i, j int) bool { return ls[i].URL < ls[j].URL })
			if _, err := f.Complete(ctx, "victim", []frontier.Completion{
				{Lease: ls[0], Outcome: frontier.Release},
				{Lease: ls[1], Outcome: frontier.Retry, RetryIn: time.Millisecond, Reason: "http 503"},
			}); err != nil {
				t.Fatal(err)
			}
			if n, err := f.RecoverSlave(ctx, "victim"); err != nil || n != 1 {
				t.Fatalf("recover slave: %d %v", n, err)
			}
			// the fourth: its lease expires
			exp := claimOpts(t, f, "slow", 1, true)
			if len(exp) != 1 {
				t.Fatalf("claimed %d", len(exp))
			}
			time.Sleep(150 * time.Millisecond) // the lease expires and the retry is due
			if n, err := f.RecoverExpired(ctx, 10); err != nil || n != 1 {
				t.Fatalf("recover expired: %d %v", n, err)
			}
			st, _ := f.Stats(ctx)
			// (the retry may be back in its queue already: a claim moves it once due)
			if st.Queued+st.Retry != 4 || st.RenderQueued != st.Queued || st.InFlight != 0 {
				t.Fatalf("stats queued=%d render_queued=%d retry=%d in_flight=%d, want 4 queued or waiting, all render",
					st.Queued, st.RenderQueued, st.Retry, st.InFlight)
			}
			if got := claimAllOpts(t, f, "plain", false); len(got) != 0 {
				t.Fatalf("non-render slave claimed requeued render tasks: %v", got)
			}
			got := claimAllOpts(t, f, "browser", true)
			want := map[string]bool{"http://a.test/": true, "http://b.test/": true, "http://c.test/": true, "http://d.test/": true}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("render slave claimed (-want +got):\n%s", d)
			}
			if st, _ = f.Stats(ctx); st.Queued != 0 || st.RenderQueued != 0 || st.Retry != 0 {
				t.Fatalf("stats %+v after draining", st)
			}
		})
	}
}

// testRenderFinish: a crawl with render tasks queued is not finished, even
// when only non-render slaves claim.
func testRenderFinish(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("rfinish"))
	ctx := context.Background()
	mustSeed(t, f, rtask("http://a.test/r", 0))
	for range 3 {
		if ls := claimOpts(t, f, "plain", 5, false); len(ls) != 0 {
			t.Fatalf("non-render slave claimed %+v", ls)
		}
		if done, err := f.CheckFinished(ctx, 0); err != nil || done {
			t.Fatalf("finished with a render task queued: %v %v", done, err)
		}
	}
	ls := claimOpts(t, f, "browser", 5, true)
	if len(ls) != 1 || !ls[0].Render {
		t.Fatalf("render claim %+v", ls)
	}
	if done, _ := f.CheckFinished(ctx, 0); done {
		t.Fatal("finished with a render task in flight")
	}
	if _, err := f.Complete(ctx, "browser", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	finished := false
	for range 5 {
		if finished, _ = f.CheckFinished(ctx, 0); finished {
			break
		}
	}
	if !finished {
		t.Fatal("never finished")
	}
}

// testHostPolicies: a host's concurrency and delay from its policy, set
// with seeds or with a completion before its links are enqueued, for both
// classes.
func testHostPolicies(t *testing.T, nb Factory) {
	f, _ := nb(t, opts("policies")) // crawl: concurrency 1, delay 0
	ctx := context.Background()
	var seeds []frontier.Task
	for _, h := range []string{"wide", "slow", "plain"} {
		for p := range 4 {
			seeds = append(seeds, task(fmt.Sprintf("http://%s.test/%d", h, p), 0))
		}
	}
	seeds = append(seeds, rtask("http://wide.test/r", 0))
	added, err := f.SeedWithPolicies(ctx, seeds, map[string]frontier.HostPolicy{
		"wide.test": {Concurrency: 3, Jitter: -1},
		"slow.test": {Delay: time.Hour, Concurrency: 4, Jitter: -1},
	})
	if err != nil || added != len(seeds) {
		t.Fatalf("seed: %d %v", added, err)
	}
	ls := claimOpts(t, f, "browser", 50, true)
	byHost := map[string]int{}
	for _, l := range ls {
		byHost[l.Host]++
	}
	// wide: 3 slots (delay 0: all at once), static and render alike; slow:
	// one per delay despite 4 slots; plain: the crawl's 1
	if d := cmp.Diff(map[string]int{"wide.test": 3, "slow.test": 1, "plain.test": 1}, byHost); d != "" {
		t.Fatalf("claimed per host (-want +got):\n%s", d)
	}
	if more := claimOpts(t, f, "browser", 50, true); len(more) != 0 {
		t.Fatalf("claimed more while the hosts are busy: %+v", more)
	}

	// a completion's policies come before its links
	var page frontier.Lease
	for _, l := range ls {
		if l.Host == "plain.test" {
			page = l
		}
	}
	links := []frontier.Task{task("http://new.test/1", 1), task("http://new.test/2", 1), rtask("http://new.test/3", 1)}
	if _, err := f.Complete(ctx, "browser", []frontier.Completion{{Lease: page, Outcome: frontier.Done, Links: links,
		Policies: map[string]frontier.HostPolicy{"new.test": {Concurrency: 2, Jitter: -1}}}}); err != nil {
		t.Fatal(err)
	}
	byHost = map[string]int{}
	for _, l := range claimOpts(t, f, "browser", 50, true) {
		byHost[l.Host]++
	}
	if d := cmp.Diff(map[string]int{"new.test": 2, "plain.test": 1}, byHost); d != "" {
		t.Fatalf("claimed per host after the completion (-want +got):\n%s", d)
	}

	// back to the crawl's defaults: one slot
	if _, err := f.SeedWithPolicies(ctx, nil, map[string]frontier.HostPolicy{"wide.test": {Jitter: -1}}); err != nil {
		t.Fatal(err)
	}
	var wide []frontier.Lease
	for _, l := range ls {
		if l.Host == "wide.test" {
			wide = append(wide, l)
		}
	}
	var cs []frontier.Completion
	for _, l := range wide {
		cs = append(cs, frontier.Completion{Lease: l, Outcome: frontier.Done})
	}
	if _, err := f.Complete(ctx, "browser", cs); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range claimOpts(t, f, "browser", 50, true) {
		if l.Host == "wide.test" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("wide.test claimed %d after its policy was reset, want the crawl's 1", n)
	}
}

// testPolicyDelayLargerWins: a policy's delay and a slave's (Crawl-delay)
// are kept apart; the larger one is in force.
func testPolicyDelayLargerWins(t *testing.T, nb Factory) {
	for _, tc := range []struct {
		name          string
		policy, slave time.Duration
	}{
		{"policy larger", time.Hour, time.Millisecond},
		{"crawl-delay larger", time.Millisecond, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := nb(t, opts("delaywin"))
			ctx := context.Background()
			if _, err := f.SeedWithPolicies(ctx, []frontier.Task{task("http://a.test/1", 0), task("http://a.test/2", 0)},
				map[string]frontier.HostPolicy{"a.test": {Delay: tc.policy, Jitter: -1}}); err != nil {
				t.Fatal(err)
			}
			ls := claimOpts(t, f, "s1", 5, false)
			if len(ls) != 1 {
				t.Fatalf("claimed %d", len(ls))
			}
			if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Done, HostDelay: tc.slave}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // the smaller delay has passed
			if got := claimOpts(t, f, "s1", 5, false); len(got) != 0 {
				t.Fatalf("claimed %+v: the smaller delay won", got)
			}
		})
	}
}

// claimN leases up to n tasks, render tasks not included
// (ClaimWaitOpts with the default options).
func claimN(ctx context.Context, f frontier.Frontier, slave string, n int) ([]frontier.Lease, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, n, frontier.ClaimOptions{})
	return res.Leases, err
}
