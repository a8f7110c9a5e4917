package workapi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// TestWatcherWait: a watch answers at once for what happened since the
// slave's last answer (its seq), the announcements between two watches
// included, and waits otherwise.
func TestWatcherWait(t *testing.T) {
	seq := func(n uint64) *uint64 { return &n }
	for _, tc := range []struct {
		name  string
		rules string // the version in force; "" = not read yet
		work  int    // announcements so far
		have  string
		seen  *uint64
		want  api.WatchResponse
	}{
		{"nothing new: waits", "v1", 2, "v1", seq(2), api.WatchResponse{Seq: 2}},
		{"the first watch counts from now", "v1", 2, "v1", nil, api.WatchResponse{Seq: 2}},
		{"work between two watches", "v1", 3, "v1", seq(2), api.WatchResponse{Work: true, Seq: 3}},
		{"new rules", "v2", 2, "v1", seq(2), api.WatchResponse{Rules: "v2", Seq: 2}},
		{"both", "v2", 5, "v1", seq(2), api.WatchResponse{Rules: "v2", Work: true, Seq: 5}},
		{"rules not read yet", "", 0, "v1", seq(0), api.WatchResponse{}},
		{"another master's seq: a wake-up, then in step", "v1", 1, "v1", seq(7), api.WatchResponse{Work: true, Seq: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWatcher()
			if tc.rules != "" {
				w.set(tc.rules, false)
			}
			for range tc.work {
				w.set("+work", true)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if diff := cmp.Diff(tc.want, w.wait(ctx, tc.have, tc.seen)); diff != "" {
				t.Errorf("wait (-want +got):\n%s", diff)
			}
		})
	}
	// a waiting watch wakes for an announcement
	w := newWatcher()
	w.set("v1", false)
	done := make(chan api.WatchResponse)
	go func() { done <- w.wait(context.Background(), "v1", nil) }()
	time.Sleep(20 * time.Millisecond)
	w.set("+work", true)
	select {
	case got := <-done:
		if diff := cmp.Diff(api.WatchResponse{Work: true, Seq: 1}, got); diff != "" {
			t.Errorf("woken wait (-want +got):\n%s", diff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not wake")
	}
}
