package retry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		i    int
		want time.Duration
	}{
		{0, 200 * time.Millisecond}, {1, 200 * time.Millisecond}, {2, 400 * time.Millisecond},
		{5, 3200 * time.Millisecond}, {6, 5 * time.Second}, {100, 5 * time.Second},
	}
	for _, tc := range tests {
		if got := Backoff(tc.i); got != tc.want {
			t.Errorf("Backoff(%d) = %v, want %v", tc.i, got, tc.want)
		}
	}
}

func TestUntil(t *testing.T) {
	rl := ratelog.New(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Minute)
	calls := 0
	err := Until(context.Background(), rl, "x", func() error {
		calls++
		if calls < 2 {
			return errors.New("down")
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Until: %v after %d calls, want nil after 2", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Until(ctx, rl, "x", func() error { return errors.New("down") }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Until on a cancelled context: %v", err)
	}
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on a cancelled context reported a full wait")
	}
}
