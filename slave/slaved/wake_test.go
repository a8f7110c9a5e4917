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

// TestSeedWakesIdleSlaves starts slaves on an empty crawl with an idle
// poll of ten minutes, then seeds it: the seed's announcement
// (frontier.WorkMessage) wakes them, and so do the links of each other's
// pages, host slots freed, a host's politeness time and retries coming due
// (a claim's wait hint), so the site is crawled without a single idle
// poll, with 1 and 3 shards, and with a politeness delay and pages that
// fail once (500, 429 with Retry-After).
func TestSeedWakesIdleSlaves(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name     string
		shards   int
		delay    time.Duration
		specials bool
	}{
		{"one shard", 1, 0, false},
		{"three shards", 3, 0, false},
		{"delay and retries", 1, 50 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 5, Seed: 5, Specials: tc.specials}, 0)
			defer stop()
			cfg := testConfig(t, site)
			cfg.Crawl.Shards = tc.shards
			cfg.Politeness.Delay = tc.delay
			cfg.Lease.RetryBase = 200 * time.Millisecond
			cfg.Slave.IdlePoll = 10 * time.Minute
			cfg.Politeness.ObeyRobots = false
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ropt, _ := cfg.RedisOptions()
			rdb := redis.NewClient(ropt)
			defer rdb.Close()
			ctx := context.Background()
			f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			errs := make(chan error, 2)
			for _, id := range []string{"wake-a", "wake-b"} {
				s, err := slaved.New(cfg, slaved.Options{ID: id})
				if err != nil {
					t.Fatal(err)
				}
				go func() { errs <- s.Run(runCtx) }()
			}
			defer func() {
				cancel()
				for range 2 {
					if err := <-errs; err != nil {
						t.Errorf("slave: %v", err)
					}
				}
			}()
			// both slaves listen, and have found the crawl empty
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				subs, _ := rdb.PubSubNumSub(ctx, f.RulesChannel()).Result()
				st, _ := f.Stats(ctx)
				if subs[f.RulesChannel()] >= 2 && st.SlavesAlive >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("slaves not listening after 20 s: %v subscribers, %d alive", subs, st.SlavesAlive)
				}
			}
			time.Sleep(100 * time.Millisecond) // their first claims found nothing
			if _, err := f.Seed(ctx, siteSeeds(site)); err != nil {
				t.Fatal(err)
			}
			// well inside the idle poll: only the announcement can have woken them
			want := int64(len(site.Expected()))
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
				st, _ := f.Stats(ctx)
				if st.Done >= want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d pages done 2 min after seeding (idle poll 10 min): %+v", st.Done, want, st)
				}
			}
		})
	}
}
