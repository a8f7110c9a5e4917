package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server timeouts of Serve.
const (
	readHeaderTimeout = 5 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// Serve listens on addr (port 0: a free port) and serves h at /metrics
// until ctx is cancelled, then shuts down gracefully (scrapes in progress
// get up to 5s). It returns the bound host:port; wait blocks until the
// server has stopped and its goroutines have exited. A nil log is
// slog.Default().
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (boundAddr string, wait func(), err error) {
	if log == nil {
		log = slog.Default()
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	boundAddr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case err := <-served:
			// the listener failed on its own
			log.Error("metrics server stopped", "addr", boundAddr, "err", err)
			return
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("metrics server shutdown", "addr", boundAddr, "err", err)
			_ = srv.Close()
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", "addr", boundAddr, "err", err)
		}
	}()
	return boundAddr, func() { <-done }, nil
}
