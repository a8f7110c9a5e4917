package frontier_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestPauseResume(t *testing.T) {
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "pause", nil)
	ctx := context.Background()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Pause(ctx); err != nil || !ok {
		t.Fatalf("pause = %v, %v; want true", ok, err)
	}
	if ok, _ := f.Pause(ctx); ok {
		t.Error("second pause reported a change")
	}
	res, err := f.ClaimWaitOpts(ctx, "s1", 10, frontier.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leases) != 0 || res.Wait <= 0 {
		t.Fatalf("paused claim = %d leases, wait %v; want none and a positive wait", len(res.Leases), res.Wait)
	}
	st, err := f.Stats(ctx)
	if err != nil || !st.Paused || st.PausedSince.IsZero() || st.Queued != 2 {
		t.Fatalf("stats while paused = %+v, %v", st, err)
	}
	if ok, err := f.Resume(ctx); err != nil || !ok {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	ls, err := claimN(ctx, f, "s1", 10)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim after resume = %d, %v; want 2", len(ls), err)
	}
	if st, _ := f.Stats(ctx); st.Paused {
		t.Error("stats still paused after resume")
	}
}

func TestDrainAndRetireThroughHeartbeat(t *testing.T) {
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "drain", nil)
	ctx := context.Background()
	if ok, err := f.Drain(ctx, "ghost"); err != nil || ok {
		t.Fatalf("drain of an unknown slave = %v, %v; want false", ok, err)
	}
	for _, s := range []string{"s1", "s2"} {
		if _, err := f.HeartbeatControl(ctx, events.Heartbeat{Slave: s}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Drain(ctx, "s1"); err != nil || !ok {
		t.Fatalf("drain = %v, %v", ok, err)
	}
	for _, p := range []string{"http://p2.test:3128", "http://u:xxxxx@p1.test:3128"} {
		if ok, err := f.RetireProxy(ctx, p); err != nil || !ok {
			t.Fatalf("retire %s = %v, %v", p, ok, err)
		}
	}
	tests := []struct {
		slave string
		want  frontier.Control
	}{
		{"s1", frontier.Control{Drain: true, RetiredProxies: []string{"http://p2.test:3128", "http://u:xxxxx@p1.test:3128"}}},
		{"s2", frontier.Control{RetiredProxies: []string{"http://p2.test:3128", "http://u:xxxxx@p1.test:3128"}}},
	}
	for _, tc := range tests {
		got, err := f.HeartbeatControl(ctx, events.Heartbeat{Slave: tc.slave})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s control (-want +got):\n%s", tc.slave, d)
		}
	}
	if ls, err := claimN(ctx, f, "s1", 10); err != nil || len(ls) != 0 {
		t.Fatalf("draining slave claimed %d, %v", len(ls), err)
	}
	if ls, err := claimN(ctx, f, "s2", 10); err != nil || len(ls) != 2 {
		t.Fatalf("other slave claimed %d, %v; want 2", len(ls), err)
	}
	if err := f.Leave(ctx, "s1", "drained"); err != nil {
		t.Fatal(err)
	}
	// the slave's own user cannot write the control hash: the master's
	// monitor drops the drain with the slave it finds gone
	if ss, err := f.Registered(ctx); err != nil || len(ss) != 2 || !ss[0].Gone {
		t.Fatalf("registered after leave = %+v, %v; want s1 gone", ss, err)
	}
	if n, err := f.RetireGone(ctx, "s1"); err != nil || n != 0 {
		t.Fatalf("retire gone = %d, %v", n, err)
	}
	d, err := f.Draining(ctx)
	if err != nil || len(d) != 0 {
		t.Fatalf("draining after leave = %v, %v; want none", d, err)
	}
}

func TestRequeueFailed(t *testing.T) {
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "requeue", nil)
	ctx := context.Background()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/x", 0), tk("http://b.test/y", 0)}); err != nil {
		t.Fatal(err)
	}
	ls, err := claimN(ctx, f, "s1", 10)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim = %d, %v", len(ls), err)
	}
	cs := []frontier.Completion{{Lease: ls[0], Outcome: frontier.Fail}, {Lease: ls[1], Outcome: frontier.Fail}}
	if _, err := f.Complete(ctx, "s1", cs); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Stats(ctx); st.Failed != 2 || st.Queued != 0 {
		t.Fatalf("after fail: failed %d queued %d", st.Failed, st.Queued)
	}
	n, err := f.RequeueFailed(ctx, 1)
	if err != nil || n != 1 {
		t.Fatalf("requeue 1 = %d, %v", n, err)
	}
	n, err = f.RequeueFailed(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("requeue rest = %d, %v", n, err)
	}
	st, _ := f.Stats(ctx)
	if st.Failed != 0 || st.Queued != 2 || st.Requeued != 2 || st.Finished {
		t.Fatalf("after requeue: %+v", st)
	}
	ls, err = claimN(ctx, f, "s1", 10)
	if err != nil || len(ls) != 2 {
		t.Fatalf("claim requeued = %d, %v", len(ls), err)
	}
	for _, l := range ls {
		if l.Attempt != 0 {
			t.Errorf("%s attempt %d; want 0 after requeue", l.URL, l.Attempt)
		}
	}
}

func TestReseed(t *testing.T) {
	for _, strategy := range []string{"bfs", "priority"} {
		t.Run(strategy, func(t *testing.T) {
			rdb := testRedis(t)
			f := newFrontier(t, rdb, "reseed", func(o *frontier.Options) { o.Strategy = strategy })
			ctx := context.Background()
			seeds := []frontier.Task{tk("http://a.test/", 0), tk("http://b.test/", 0)}
			if _, err := f.Seed(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			// both still queued: nothing added
			if n, err := f.Reseed(ctx, seeds, nil); err != nil || n != 0 {
				t.Fatalf("reseed of queued seeds = %d, %v; want 0", n, err)
			}
			ls, err := claimN(ctx, f, "s1", 10)
			if err != nil || len(ls) != 2 {
				t.Fatalf("claim = %d, %v", len(ls), err)
			}
			// a.test leased, b.test done
			var bl frontier.Lease
			for _, l := range ls {
				if l.Host == "b.test" {
					bl = l
				}
			}
			if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: bl, Outcome: frontier.Done}}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Seed(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			if n, err := f.Reseed(ctx, seeds, nil); err != nil || n != 1 {
				t.Fatalf("reseed = %d, %v; want 1 (b.test done, a.test leased)", n, err)
			}
			st, _ := f.Stats(ctx)
			if st.Queued != 1 || st.Reseeded != 1 {
				t.Fatalf("after reseed: queued %d reseeded %d", st.Queued, st.Reseeded)
			}
		})
	}
}

// TestClaimBusyHint checks the claim's idle hints: Busy while tasks are
// queued behind hosts at their concurrency or requests are in flight, not
// once nothing is queued or in flight.
func TestClaimBusyHint(t *testing.T) {
	rdb := testRedis(t)
	f := newFrontier(t, rdb, "busy", nil) // host concurrency 1
	ctx := context.Background()
	if _, err := f.Seed(ctx, []frontier.Task{tk("http://a.test/1", 0), tk("http://a.test/2", 0)}); err != nil {
		t.Fatal(err)
	}
	res, err := f.ClaimWaitOpts(ctx, "s1", 10, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim = %d leases, %v; want 1 (concurrency 1)", len(res.Leases), err)
	}
	again, err := f.ClaimWaitOpts(ctx, "s2", 10, frontier.ClaimOptions{})
	if err != nil || len(again.Leases) != 0 || again.Wait >= 0 || !again.Busy {
		t.Fatalf("claim behind a busy host = %d leases, wait %v, busy %v, %v; want none, negative, busy",
			len(again.Leases), again.Wait, again.Busy, err)
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: res.Leases[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	last, err := f.ClaimWaitOpts(ctx, "s2", 10, frontier.ClaimOptions{})
	if err != nil || len(last.Leases) != 1 {
		t.Fatalf("claim after the ack = %d, %v; want 1", len(last.Leases), err)
	}
	// nothing queued, a request in flight: its ack may bring links
	inFlight, err := f.ClaimWaitOpts(ctx, "s1", 10, frontier.ClaimOptions{})
	if err != nil || len(inFlight.Leases) != 0 || inFlight.Wait >= 0 || !inFlight.Busy {
		t.Fatalf("claim with nothing queued, one in flight = %d leases, wait %v, busy %v, %v; want none, negative, busy",
			len(inFlight.Leases), inFlight.Wait, inFlight.Busy, err)
	}
	if _, err := f.Complete(ctx, "s2", []frontier.Completion{{Lease: last.Leases[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	idle, err := f.ClaimWaitOpts(ctx, "s2", 10, frontier.ClaimOptions{})
	if err != nil || len(idle.Leases) != 0 || idle.Busy {
		t.Fatalf("claim with nothing queued or in flight = %d leases, busy %v, %v; want none, not busy", len(idle.Leases), idle.Busy, err)
	}
}
