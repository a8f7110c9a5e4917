package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// Server is what Start needs to know of the server a process waits for at
// start-up.
type Server struct {
	// What names it in logs and errors: "redis", "mysql".
	What string
	// Addr is where it is, secrets redacted: "127.0.0.1:6379".
	Addr string
	// Check names what the user should check when it refuses the
	// credentials ("redis.url's user and password (or redis.password_file)")
	// and Reach when it cannot be reached ("redis.url, and that Redis runs").
	Check, Reach string
	// TimeoutKey is the config key of Timeout ("redis.startup_timeout").
	TimeoutKey string
	// Timeout bounds the wait; 0 = wait until ctx ends.
	Timeout time.Duration
	// Refused reports an error no wait mends: credentials refused, a user
	// without the rights it needs.
	Refused func(error) bool
	// Answered, when set, reports an error that shows the server is up
	// and answers (what fn waits for is another process's doing, such as
	// a master loading the Redis library a slave needs): from then on the
	// wait has no bound but ctx.
	Answered func(error) bool
}

// StartError is a server that refused the process at start-up or could not
// be reached in time: its message is one line that says what to check.
type StartError struct {
	Server  Server
	Err     error // the last error from the server
	TimeOut bool  // not reached within Server.Timeout, or at once when 0 (else refused)
}

func (e *StartError) Error() string {
	s := e.Server
	if e.TimeOut && s.Timeout <= 0 { // a command that does not wait
		return fmt.Sprintf("%s at %s not reachable (%v): check %s", s.What, s.Addr, e.Err, s.Reach)
	}
	if e.TimeOut {
		return fmt.Sprintf("%s at %s not reachable within %s (%v): check %s (%s sets the wait)",
			s.What, s.Addr, s.Timeout, e.Err, s.Reach, s.TimeoutKey)
	}
	return fmt.Sprintf("%s at %s refused this process (%v): check %s", s.What, s.Addr, e.Err, s.Check)
}

func (e *StartError) Unwrap() error { return e.Err }

// Start is Until for start-up: fn (given a context that ends with the
// wait) is called until it succeeds, ctx ends (the result is then ctx's
// error), an error is one srv.Refused reports, or srv.Timeout passes; the
// last two return a *StartError. The wait is logged through rl as Until
// logs it.
func Start(ctx context.Context, rl *ratelog.Logger, srv Server, fn func(ctx context.Context) error) error {
	var deadline time.Time
	if srv.Timeout > 0 {
		deadline = time.Now().Add(srv.Timeout)
	}
	key := "connect-" + srv.What
	var last error
	for i := 1; ; i++ {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			wctx, cancel = context.WithDeadline(ctx, deadline)
		}
		err := fn(wctx)
		if err == nil {
			cancel()
			if rl.Reset(key) {
				rl.Log(ctx, slog.LevelInfo, "up-"+srv.What, srv.What+" reachable")
			}
			return nil
		}
		if ctx.Err() != nil {
			cancel()
			return ctx.Err()
		}
		if srv.Refused != nil && srv.Refused(err) {
			cancel()
			return &StartError{Server: srv, Err: err}
		}
		if srv.Answered != nil && srv.Answered(err) {
			deadline = time.Time{} // it is up: what is missing is not its to give
		}
		if last == nil || !errors.Is(err, context.DeadlineExceeded) {
			last = err // the server's own error, not the end of the wait
		}
		if wctx.Err() != nil {
			cancel()
			return &StartError{Server: srv, Err: last, TimeOut: true}
		}
		rl.Log(ctx, slog.LevelWarn, key, "waiting for "+srv.What, "addr", srv.Addr, "err", err, "up_to", waitText(srv, deadline))
		Sleep(wctx, Backoff(i))
		cancel()
	}
}

func waitText(srv Server, deadline time.Time) string {
	if deadline.IsZero() {
		return "forever"
	}
	return srv.Timeout.String() + " (" + srv.TimeoutKey + ")"
}
