package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redcrawl/redcrawl/shared/httpserve"
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
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := httpserve.Run(ctx, srv, ln, shutdownTimeout, log, "metrics server"); err != nil {
			log.Error("metrics server stopped", "addr", boundAddr, "err", err)
		}
	}()
	return boundAddr, func() { <-done }, nil
}
