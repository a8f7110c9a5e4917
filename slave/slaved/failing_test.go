package slaved_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestFailingURLHoldsOnlyItself crawls a site whose host 0 has one URL
// that always answers 503 with Retry-After: 2 (testsite FailingHosts): the
// URL is retried after its Retry-After and failed after its attempts,
// while the rest of its host is fetched in between, not held for the
// Retry-After; every other page is crawled.
func TestFailingURLHoldsOnlyItself(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 40, Seed: 3, FailingHosts: 1}, 0)
	defer stop()
	cfg := testConfig(t, site)
	cfg.Politeness.ObeyRobots = false
	cfg.Lease.MaxAttempts = 2
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, cfg, site)
	failing := strings.TrimSuffix(site.HostURLs()[0], "/") + testsite.FailingPath
	res := h.run(cfg, 1, func(st frontier.Stats) bool {
		return st.Done >= int64(len(site.Expected())) && st.Failed >= 1
	}, 2*time.Minute)
	if res.stats.Failed != 1 {
		t.Errorf("%d failed, want 1 (%s)", res.stats.Failed, failing)
	}
	// the hits on host 0 between the failing URL's first and second request
	host0 := strings.TrimPrefix(strings.TrimSuffix(site.HostURLs()[0], "/"), "http://")
	var tries, between int
	for _, hit := range site.Hits() {
		if hit.Host != host0 {
			continue
		}
		switch {
		case hit.Path == testsite.FailingPath:
			tries++
		case tries == 1:
			between++
		}
	}
	if tries != 2 {
		t.Errorf("%s requested %d times, want 2 (its attempts)", testsite.FailingPath, tries)
	}
	// held, the host would have had no request until the Retry-After
	if between < 3 {
		t.Errorf("%d other requests to host 0 while %s waited for its Retry-After, want the rest of the host fetched meanwhile", between, testsite.FailingPath)
	}
}
