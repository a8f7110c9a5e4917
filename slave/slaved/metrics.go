package slaved

import (
	"context"
	"net"

	"github.com/redcrawl/redcrawl/shared/metrics"
)

// serveMetrics starts the Prometheus /metrics server when
// slave.metrics_listen is set and records its bound address for the
// heartbeat. A failure to listen is a warning: the slave runs on without a
// metrics server. stop shuts the server down and waits for it.
func (s *Slave) serveMetrics(ctx context.Context) (stop func()) {
	if s.cfg.Slave.MetricsListen == "" {
		return func() {}
	}
	mctx, cancel := context.WithCancel(ctx)
	addr, wait, err := metrics.Serve(mctx, s.cfg.Slave.MetricsListen, s.met.Handler(), s.log)
	if err != nil {
		cancel()
		s.log.Warn("metrics server not started; running without metrics", "listen", s.cfg.Slave.MetricsListen, "err", err)
		return func() {}
	}
	addr = reachable(addr, s.host)
	s.metricsAddr.Store(addr)
	s.log.Info("serving metrics", "addr", addr)
	return func() {
		cancel()
		wait()
		s.metricsAddr.Store("")
	}
}

// reachable replaces an unspecified host of a bound address (0.0.0.0,
// [::]) with the machine's host name, so the address the heartbeat
// reports can be scraped from elsewhere.
func reachable(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return addr
	}
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(host, port)
	}
	return addr
}

// metricsAddress returns the host:port of the slave's /metrics, "" when
// it serves none.
func (s *Slave) metricsAddress() string {
	addr, _ := s.metricsAddr.Load().(string)
	return addr
}
