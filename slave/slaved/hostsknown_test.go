package slaved

import (
	"context"
	"testing"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/dnscache"
)

// TestHostsKnown: the hosts the slave's DNS cache holds, answers and
// errors alike (memlimit.Options.Hosts); 0 without a cache.
func TestHostsKnown(t *testing.T) {
	addr, _ := dnsServer(t)
	cfg := config.Default()
	s, err := New(&cfg, Options{ID: "hosts"})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.HostsKnown(); n != 0 {
		t.Fatalf("HostsKnown before Run = %d, want 0", n)
	}
	r, err := dnscache.New(dnscache.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s.dnsLive.Store(r)
	ctx := context.Background()
	for _, h := range []string{"a.test", "b.test", "a.test", "c.test"} {
		if _, err := r.LookupIP(ctx, h); err != nil {
			t.Fatalf("lookup %s: %v", h, err)
		}
	}
	if _, err := r.LookupIP(ctx, "nowhere.invalid"); err == nil {
		t.Fatal("lookup of nowhere.invalid succeeded")
	}
	if n := s.HostsKnown(); n != 4 {
		t.Errorf("HostsKnown = %d after a.test, b.test, c.test and a failed name, want 4", n)
	}
	s.dnsLive.Store(nil)
	if n := s.HostsKnown(); n != 0 {
		t.Errorf("HostsKnown after Run's fetcher closed = %d, want 0", n)
	}
}
