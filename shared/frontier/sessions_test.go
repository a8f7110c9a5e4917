package frontier_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestSessions: the dashboard's session state in the real Redis: an epoch
// made once and kept, revocations until their expiry, RevokeAll a new
// epoch without them, and a lost hash a new epoch (every session ends).
func TestSessions(t *testing.T) {
	ctx := context.Background()
	rdb := testRedis(t)
	crawl := uniqueCrawl(t, rdb, "sessions")
	s := frontier.NewSessions(rdb, crawl)
	other := frontier.NewSessions(rdb, crawl) // another master's view
	now := time.UnixMilli(1_700_000_000_000)

	first, err := s.State(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Epoch) < 16 {
		t.Fatalf("epoch %q", first.Epoch)
	}
	if err := s.Revoke(ctx, "a", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, "b", now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	type view struct {
		Epoch   string
		Revoked map[string]time.Time
	}
	state := func(at time.Time) view {
		t.Helper()
		st, err := other.State(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		return view(st)
	}
	steps := []struct {
		name string
		got  view
		want view
	}{
		{"both revoked", state(now), view{first.Epoch, map[string]time.Time{"a": now.Add(time.Hour), "b": now.Add(2 * time.Hour)}}},
		{"a expired", state(now.Add(time.Hour)), view{first.Epoch, map[string]time.Time{"b": now.Add(2 * time.Hour)}}},
		{"a dropped from Redis", state(now), view{first.Epoch, map[string]time.Time{"b": now.Add(2 * time.Hour)}}},
	}
	for _, st := range steps {
		if d := cmp.Diff(st.want, st.got); d != "" {
			t.Errorf("%s (-want +got):\n%s", st.name, d)
		}
	}

	if err := s.RevokeAll(ctx); err != nil {
		t.Fatal(err)
	}
	after := state(now)
	if after.Epoch == first.Epoch || len(after.Epoch) < 16 || len(after.Revoked) != 0 {
		t.Errorf("after RevokeAll: %+v; want a new epoch and nothing revoked (was %q)", after, first.Epoch)
	}
	if err := rdb.Del(ctx, frontier.NewKeys(crawl).Sessions).Err(); err != nil {
		t.Fatal(err)
	}
	if lost := state(now); lost.Epoch == after.Epoch || len(lost.Epoch) < 16 {
		t.Errorf("after the hash was lost: epoch %q, want a new one (was %q)", lost.Epoch, after.Epoch)
	}
}
