// Package retry holds the waiting that master and slave share: sleeping
// under a context, a capped exponential backoff, and retrying a call until
// a server is reachable, logging the outage once in a while.
package retry

import (
	"context"
	"log/slog"
	"time"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// Sleep waits d or until ctx ends; it reports whether the whole wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Backoff is the wait after the i-th consecutive failure (from 1): 200ms,
// doubling, capped at 5s.
func Backoff(i int) time.Duration {
	return min(100*time.Millisecond<<min(max(i, 1), 6), 5*time.Second)
}

// Until calls fn until it succeeds or ctx ends (then it returns ctx's
// error). Failures are logged through rl under key "connect-"+what, at most
// once per rl's period, and a recovery after a logged failure is logged.
func Until(ctx context.Context, rl *ratelog.Logger, what string, fn func() error) error {
	key := "connect-" + what
	for i := 1; ; i++ {
		err := fn()
		if err == nil {
			if rl.Reset(key) {
				rl.Log(ctx, slog.LevelInfo, "up-"+what, what+" reachable")
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rl.Log(ctx, slog.LevelWarn, key, "waiting for "+what, "err", err)
		Sleep(ctx, Backoff(i))
	}
}
