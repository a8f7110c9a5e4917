package workapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestAPIHeartbeatFinished: a slave of the work API learns from its
// heartbeat that the crawl is finished (slave run --exit-when-done), as
// a direct slave does, and not before.
func TestAPIHeartbeatFinished(t *testing.T) {
	e := newAPIEnv(t, defaultLimits())
	ctx := context.Background()
	c := e.slave(t, "pi1")
	beat := func() frontier.Control {
		t.Helper()
		ctl, err := c.HeartbeatControl(ctx, events.Heartbeat{Slave: "pi1", Host: "box"})
		if err != nil {
			t.Fatal(err)
		}
		return ctl
	}
	if ctl := beat(); ctl.Finished {
		t.Fatal("finished before the crawl had any work")
	}
	if _, err := e.front.Seed(ctx, []frontier.Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimWaitOpts(ctx, "pi1", 1, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != 1 {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if _, err := c.Complete(ctx, "pi1", []frontier.Completion{{Lease: res.Leases[0], Outcome: frontier.Done}}); err != nil {
		t.Fatal(err)
	}
	if ctl := beat(); ctl.Finished {
		t.Fatal("finished before the master's finish decision")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fin, err := e.front.CheckFinished(ctx, 50*time.Millisecond); err == nil && fin {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("crawl not finished in 30s")
		}
	}
	if ctl := beat(); !ctl.Finished {
		t.Error("the heartbeat after the finish decision does not say finished")
	}
}
