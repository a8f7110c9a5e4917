package slaved_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestAdminDrainAndRetire runs a slave through proxies, retires one proxy
// and then drains the slave as an admin would: the slave stops using the
// proxy, finishes its leases, leaves, and Run returns.
func TestAdminDrainAndRetire(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, proxies, closeAll := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 400, Seed: 3,
		Latency: 5 * time.Millisecond}, 2)
	defer closeAll()
	cfg := testConfig(t, site)
	cfg.Politeness.Delay = 0
	cfg.Politeness.HostConcurrency = 2
	cfg.Fetch.Proxies = []string{proxies[0].URL(), proxies[1].URL()}
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	ctx := context.Background()
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed(ctx, siteSeeds(site)); err != nil {
		t.Fatal(err)
	}
	s, err := slaved.New(cfg, slaved.Options{ID: "drainee"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }() // no cancel: only the drain ends it
	waitDone := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if st, _ := f.Stats(ctx); st.Done >= n {
				return
			}
		}
		t.Fatalf("fewer than %d pages done in 30s", n)
	}
	waitDone(20)
	retired := proxies[0].URL()
	if ok, err := f.RetireProxy(ctx, retired); err != nil || !ok {
		t.Fatalf("retire = %v, %v", ok, err)
	}
	// after the next heartbeats (100ms) the proxy carries nothing new
	time.Sleep(500 * time.Millisecond)
	before := proxies[0].Requests()
	st0, _ := f.Stats(ctx)
	waitDone(st0.Done + 40)
	if after := proxies[0].Requests(); after != before {
		t.Errorf("retired proxy carried %d more requests", after-before)
	}
	if ok, err := f.Drain(ctx, "drainee"); err != nil || !ok {
		t.Fatalf("drain = %v, %v", ok, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("slave did not leave within 30s of a drain")
	}
	st, _ := f.Stats(ctx)
	if st.InFlight != 0 {
		t.Errorf("%d leases left after drain", st.InFlight)
	}
	if ss, _ := f.Slaves(ctx); len(ss) != 0 {
		t.Errorf("drained slave still registered: %+v", ss)
	}
	// the slave's user may not write the control hash: the master's
	// monitor drops the drain flag with the slave that left (no master
	// runs here, so the test takes its step)
	if _, err := f.RetireGone(ctx, "drainee"); err != nil {
		t.Fatal(err)
	}
	if d, _ := f.Draining(ctx); len(d) != 0 {
		t.Errorf("drain flag left: %v", d)
	}
	if st.Queued == 0 {
		t.Errorf("drain finished the whole crawl (%+v): it should have left work behind", st)
	}
}
