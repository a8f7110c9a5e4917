package slaved

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/dnscache"
)

// TestLinkLookAhead checks that the hosts of found links are pre-resolved
// only with dns.prefetch_links: with many slaves a slave fetches few of
// them, and the claim-time pre-resolution covers the ones it does.
func TestLinkLookAhead(t *testing.T) {
	const hosts = 5
	tests := []struct {
		name          string
		prefetchLinks bool
		wantQueries   int64 // A and AAAA for each host
	}{
		{"off (default)", false, 0},
		{"on", true, 2 * hosts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, queries := dnsServer(t)
			cfg := config.Default()
			cfg.DNS.Server = addr
			cfg.DNS.PrefetchLinks = tt.prefetchLinks
			s, err := New(&cfg, Options{ID: "lookahead"})
			if err != nil {
				t.Fatal(err)
			}
			if s.dns, err = dnscache.New(dnscache.Options{Server: addr}); err != nil {
				t.Fatal(err)
			}
			var links []*url.URL
			for i := range hosts {
				links = append(links, &url.URL{Scheme: "http", Host: fmt.Sprintf("h%d.test", i), Path: "/p"})
			}
			var c frontier.Completion
			s.addLinks(&c, links, 0, "")
			if len(c.Links) != hosts {
				t.Fatalf("%d links queued, want %d", len(c.Links), hosts)
			}
			if tt.prefetchLinks {
				waitFor(t, "the look-ahead queries", func() bool { return queries.Load() == tt.wantQueries })
			}
			s.dns.Close() // waits for resolutions under way
			if got := queries.Load(); got != tt.wantQueries {
				t.Errorf("%d DNS queries, want %d", got, tt.wantQueries)
			}
			if st := s.dns.Stats(); st.Prefetched != uint64(tt.wantQueries/2) {
				t.Errorf("%d names prefetched, want %d", st.Prefetched, tt.wantQueries/2)
			}
		})
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
