package slaved

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

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
	addr = reachable(addr, func() (netip.Addr, bool) { return routeIP(mctx, s.rdb) }, s.host)
	s.metricsAddr.Store(addr)
	s.log.Info("serving metrics", "addr", addr)
	return func() {
		cancel()
		wait()
		s.metricsAddr.Store("")
	}
}

// reachable replaces an unspecified host of a bound address (0.0.0.0,
// [::], none) with an address other machines can scrape: the IP local
// returns (the one this machine reaches Redis from), else the host name.
// The master lists only literal IPs for Prometheus (admin.sd_allow), so
// the host name is a last resort that it leaves out, saying why.
func reachable(addr string, local func() (netip.Addr, bool), host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	if ip, ok := local(); ok {
		return net.JoinHostPort(ip.String(), port)
	}
	if host == "" {
		return addr
	}
	return net.JoinHostPort(host, port)
}

// routeIP returns the local IP address this machine reaches the Redis
// server of rdb from, found with a UDP socket "connected" to it (which
// sends nothing); false for a unix socket or a client of another kind.
func routeIP(ctx context.Context, rdb redis.UniversalClient) (netip.Addr, bool) {
	var addr string
	switch c := rdb.(type) {
	case *redis.Client:
		if o := c.Options(); o.Network == "" || o.Network == "tcp" {
			addr = o.Addr
		}
	case *redis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			addr = a[0]
		}
	}
	if addr == "" {
		return netip.Addr{}, false
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return netip.Addr{}, false
	}
	defer conn.Close()
	ua, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ua.IP)
	if !ok || ip.Unmap().IsUnspecified() {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// metricsAddress returns the host:port of the slave's /metrics, "" when
// it serves none.
func (s *Slave) metricsAddress() string {
	addr, _ := s.metricsAddr.Load().(string)
	return addr
}
