package testutil

import (
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/tcpproxy"
)

// Proxy is a TCP proxy on loopback that a test can take down and bring
// back (SetDown), to simulate a server outage without touching the server.
type Proxy = tcpproxy.Proxy

// NewProxy starts a proxy to target (host:port); it stops with the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := tcpproxy.Start(target, 0)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
