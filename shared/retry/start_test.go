package retry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

func TestStart(t *testing.T) {
	rl := ratelog.New(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Minute)
	errDown, errAuth, errNoLib := errors.New("connection refused"), errors.New("WRONGPASS"), errors.New("no library")
	srv := Server{What: "redis", Addr: "127.0.0.1:1", Check: "redis.url's password", Reach: "redis.url",
		TimeoutKey: "redis.startup_timeout", Timeout: 300 * time.Millisecond,
		Refused:  func(err error) bool { return errors.Is(err, errAuth) },
		Answered: func(err error) bool { return errors.Is(err, errNoLib) }}
	tests := []struct {
		name    string
		errs    []error // fn's results in turn; past the end: errDown
		wantErr string  // "" = nil
		calls   int     // 0 = any number
	}{
		{name: "up at once", errs: []error{nil}, calls: 1},
		{name: "up after two failures", errs: []error{errDown, errDown, nil}, calls: 3},
		{name: "refused: no wait", errs: []error{errAuth}, calls: 1,
			wantErr: "redis at 127.0.0.1:1 refused this process (WRONGPASS): check redis.url's password"},
		{name: "refused after an outage", errs: []error{errDown, errAuth}, calls: 2, wantErr: "refused this process"},
		{name: "never up", errs: nil,
			wantErr: "redis at 127.0.0.1:1 not reachable within 300ms (connection refused): check redis.url (redis.startup_timeout sets the wait)"},
		// the server answers but lacks what another process brings: the
		// deadline is lifted (the 3 waits of Backoff pass 300ms)
		{name: "answered lifts the deadline", errs: []error{errNoLib, errNoLib, errNoLib, nil}, calls: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := Start(context.Background(), rl, srv, func(ctx context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return errDown
			})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Start: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Start: %v, want %q", err, tc.wantErr)
			}
			var se *StartError
			if tc.wantErr != "" && !errors.As(err, &se) {
				t.Fatalf("Start: %T, want a *StartError", err)
			}
			if tc.calls != 0 && calls != tc.calls {
				t.Errorf("fn called %d times, want %d", calls, tc.calls)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Start(ctx, rl, srv, func(context.Context) error { return errDown }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start on a cancelled context: %v", err)
	}
}
