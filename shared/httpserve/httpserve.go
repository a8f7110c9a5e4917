// Package httpserve runs an http.Server until a context ends and then
// shuts it down gracefully: what the master's admin server and the
// Prometheus endpoints of master and slaves share.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Run serves srv on ln until ctx is cancelled, then shuts it down, giving
// requests in progress up to grace before their connections are closed
// (logged on log as a warning). It returns nil after a shutdown caused by
// ctx, or the error that stopped the server otherwise, prefixed with name.
func Run(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, log *slog.Logger, name string) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn(name+": shutdown incomplete, closing connections", "err", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
