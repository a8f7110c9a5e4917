package workapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// granted reports whether acquire's result arrived, waiting at most d.
func granted(c <-chan error, d time.Duration) (error, bool) {
	select {
	case err := <-c:
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

func acquireAsync(ctx context.Context, b *fairBudget, token string, n int64) <-chan error {
	c := make(chan error, 1)
	go func() { c <- b.acquire(ctx, token, n) }()
	return c
}

// TestFairBudgetHonestTurn: a token that fills the budget and queues many
// more largest bodies does not keep another token's small request waiting
// behind all of them: the small one is served at the first release.
func TestFairBudgetHonestTurn(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	b := newFairBudget(100)
	if err := b.acquire(ctx, "flood", 60); err != nil {
		t.Fatal(err)
	}
	// a second body fits its share while the token is alone
	if err := b.acquire(ctx, "flood", 40); err != nil {
		t.Fatal(err)
	}
	flood := make(chan error, 10)
	for range cap(flood) {
		go func() { flood <- b.acquire(ctx, "flood", 60) }()
	}
	time.Sleep(20 * time.Millisecond) // the floods queue first
	honest := acquireAsync(ctx, b, "honest", 5)
	if _, ok := granted(honest, 20*time.Millisecond); ok {
		t.Fatal("honest request served while the budget was full")
	}
	b.release("flood", 60)
	if err, ok := granted(honest, time.Second); !ok || err != nil {
		t.Fatalf("honest request after a release: served %v, %v; want served at once", ok, err)
	}
	// the floods are served as room comes back, in their order
	b.release("honest", 5)
	b.release("flood", 40)
	served := 0
	for range cap(flood) {
		if _, ok := granted(flood, time.Second); !ok {
			break
		}
		served++
		b.release("flood", 60)
	}
	if served != cap(flood) {
		t.Fatalf("%d of %d queued floods served once room came back", served, cap(flood))
	}
	if b.used != 0 || len(b.held) != 0 || len(b.turn) != 0 || len(b.queue) != 0 {
		t.Errorf("budget after all released: used %d, held %v, turn %v, queue %d", b.used, b.held, b.turn, len(b.queue))
	}
}

// TestFairBudgetShare: a token holding room may take more only within its
// share (capacity over the active tokens); one holding nothing may take a
// whole body when there is room.
func TestFairBudgetShare(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		hold      map[string]int64
		token     string
		n         int64
		wantFirst bool
	}{
		{"alone, within capacity", map[string]int64{"a": 50}, "a", 50, true},
		{"two tokens, over half", map[string]int64{"a": 40, "b": 10}, "a", 20, false},
		{"two tokens, within half", map[string]int64{"a": 30, "b": 10}, "a", 20, true},
		{"holds nothing: a whole body", map[string]int64{"a": 10}, "b", 90, true},
		{"no room", map[string]int64{"a": 50, "b": 45}, "c", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFairBudget(100)
			for tok, n := range tc.hold {
				if err := b.acquire(ctx, tok, n); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			defer cancel()
			err := b.acquire(wctx, tc.token, tc.n)
			if got := err == nil; got != tc.wantFirst {
				t.Fatalf("acquire %d for %s holding %v: %v; want granted %v", tc.n, tc.token, tc.hold, err, tc.wantFirst)
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("refused with %v, want the context's error", err)
			}
			if err == nil {
				b.release(tc.token, tc.n)
			}
			for tok, n := range tc.hold {
				b.release(tok, n)
			}
			if b.used != 0 || len(b.turn) != 0 || len(b.queue) != 0 {
				t.Errorf("after all released: used %d, turn %v, queue %d", b.used, b.turn, len(b.queue))
			}
		})
	}
}
