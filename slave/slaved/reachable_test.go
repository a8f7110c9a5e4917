package slaved

import (
	"net/netip"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestReachable(t *testing.T) {
	lan := func() (netip.Addr, bool) { return netip.MustParseAddr("10.0.0.11"), true }
	lan6 := func() (netip.Addr, bool) { return netip.MustParseAddr("fd00::11"), true }
	none := func() (netip.Addr, bool) { return netip.Addr{}, false }
	for _, tc := range []struct {
		addr  string
		local func() (netip.Addr, bool)
		host  string
		want  string
	}{
		{"127.0.0.1:43567", lan, "pi1", "127.0.0.1:43567"},
		{"10.0.0.11:9100", lan, "pi1", "10.0.0.11:9100"},
		{"0.0.0.0:9100", lan, "pi1", "10.0.0.11:9100"},
		{"[::]:9100", lan, "pi1", "10.0.0.11:9100"},
		{":9100", lan6, "pi1", "[fd00::11]:9100"},
		{"0.0.0.0:9100", none, "pi1", "pi1:9100"},
		{"0.0.0.0:9100", none, "", "0.0.0.0:9100"},
		{"not an address", lan, "pi1", "not an address"},
	} {
		if got := reachable(tc.addr, tc.local, tc.host); got != tc.want {
			t.Errorf("reachable(%q, host %q) = %q, want %q", tc.addr, tc.host, got, tc.want)
		}
	}
}

// TestRouteIP finds the address this machine reaches a Redis on loopback
// from: loopback; none for a unix socket or no client.
func TestRouteIP(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		want string // "" = none
	}{
		{"tcp", redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}), "127.0.0.1"},
		{"ipv6", redis.NewClient(&redis.Options{Addr: "[::1]:6379"}), "::1"},
		{"cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}}), "127.0.0.1"},
		{"unix socket", redis.NewClient(&redis.Options{Network: "unix", Addr: "/run/redis.sock"}), ""},
		{"no client", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rdb != nil {
				defer tc.rdb.Close()
			}
			ip, ok := routeIP(ctx, tc.rdb)
			got := ""
			if ok {
				got = ip.String()
			}
			if got != tc.want {
				t.Errorf("routeIP = %q (%v), want %q", got, ok, tc.want)
			}
		})
	}
}
