package slaved_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestSlaveClockOff runs a slave whose clock is 10 minutes behind or
// ahead of Redis's on pages slower than its lease: it dates its pages by
// its own clock (Options.Clock), and it still extends its leases in time,
// so that none is taken back and no page is fetched twice (a lease is
// judged by Redis's clock; the slave measures how long it held one).
func TestSlaveClockOff(t *testing.T) {
	for _, off := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
		t.Run(fmt.Sprintf("clock %v", off), func(t *testing.T) {
			site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 2, LinksPerPage: 1,
				Seed: 3, Latency: 1500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer site.Close()
			cfg := testConfig(t, site)
			cfg.Lease.Duration = time.Second // < Latency: only extensions keep it
			cfg.Fetch.Timeout = 5 * time.Second
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			f, st := testFrontier(t, cfg)
			seedURL, _ := url.Parse(site.Seeds()[0])
			if _, err := f.Seed(ctx, []frontier.Task{{URL: seedURL.String(), Host: seedURL.Host, ScopeHost: seedURL.Hostname()}}); err != nil {
				t.Fatal(err)
			}
			s, err := slaved.New(cfg, slaved.Options{ID: "skewed", Logger: slog.New(slog.DiscardHandler),
				Clock: func() time.Time { return time.Now().Add(off) }})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- s.Run(runCtx) }()
			want := int64(len(site.Expected()))
			recovered := 0
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				// the master's recoverer, by Redis's clock
				n, err := f.RecoverExpired(ctx, 100)
				if err != nil {
					t.Fatal(err)
				}
				recovered += n
				if stats, _ := f.Stats(ctx); stats.Done >= want && stats.InFlight == 0 {
					break
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
			if recovered > 0 {
				t.Errorf("%d leases expired while the slave fetched them", recovered)
			}
			for u, n := range site.HitCounts() {
				if n > 1 {
					t.Errorf("%s fetched %d times", u, n)
				}
			}
			pages := 0
			es, err := st.Read(ctx, "c", 1000, -1, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				env, err := events.Decode(e.ID, e.Type, e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if p := env.Page; p != nil {
					pages++
					if at := time.UnixMilli(p.FetchedAt); at.Sub(time.Now().Add(off)).Abs() > time.Minute {
						t.Errorf("page %s dated %v, want about %v off now", p.URL, at, off)
					}
				}
			}
			if int64(pages) != want {
				t.Errorf("%d page events, want %d", pages, want)
			}
		})
	}
}
