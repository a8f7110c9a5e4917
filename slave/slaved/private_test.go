package slaved_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestPrivateAddressRefused crawls a loopback site without
// fetch.allow_private_networks: every fetch is refused, as kind blocked
// with a message that names the setting, at once (no retries); with
// robots.txt obeyed the robots.txt fetch is the one refused, and the
// message gives its real cause (the refusal), not a status 0, for the URL
// that fetched it and for the one that found it cached.
func TestPrivateAddressRefused(t *testing.T) {
	for _, obey := range []bool{true, false} {
		t.Run(map[bool]string{true: "robots", false: "no robots"}[obey], func(t *testing.T) {
			site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 5, Robots: true, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer site.Close()
			cfg := testConfig(t, site)
			cfg.Fetch.AllowPrivateNetworks = false
			cfg.Politeness.ObeyRobots = obey
			ctx := context.Background()
			f, st := testFrontier(t, cfg)
			seed, _ := url.Parse(site.Seeds()[0])
			var tasks []frontier.Task
			for _, p := range []string{"", "x1", "x2"} {
				tasks = append(tasks, frontier.Task{URL: seed.Scheme + "://" + seed.Host + "/" + p, Host: seed.Host, ScopeHost: seed.Hostname()})
			}
			if _, err := f.Seed(ctx, tasks); err != nil {
				t.Fatal(err)
			}
			s, err := slaved.New(cfg, slaved.Options{ID: "private"})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- s.Run(runCtx) }()
			var stats frontier.Stats
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if stats, _ = f.Stats(ctx); stats.Failed >= 3 {
					break
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
			if stats.Failed != 3 || stats.Done != 0 || stats.Retried != 0 {
				t.Errorf("stats %+v, want 3 failed, none done or retried", stats)
			}
			var msgs []string
			for range 100 {
				es, err := st.Read(ctx, "c", 1000, -1, false)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) == 0 {
					break
				}
				for _, e := range es {
					env, err := events.Decode(e.ID, e.Type, e.Data)
					if err != nil {
						t.Fatal(err)
					}
					if x := env.Exception; x != nil && x.Kind != events.KindFailed {
						if x.Kind != events.KindBlocked {
							t.Errorf("exception of kind %s, want blocked: %s", x.Kind, x.Message)
						}
						msgs = append(msgs, x.Message)
					}
				}
				ids := make([]string, len(es))
				for i, e := range es {
					ids[i] = e.StreamID
				}
				st.Ack(ctx, ids...)
			}
			if len(msgs) != 3 {
				t.Fatalf("%d blocked exceptions, want 3: %q", len(msgs), msgs)
			}
			for _, m := range msgs {
				for _, w := range []string{"non-public address", "fetch.allow_private_networks: true"} {
					if !strings.Contains(m, w) {
						t.Errorf("message lacks %q: %s", w, m)
					}
				}
				if strings.Contains(m, "status 0") {
					t.Errorf("message gives status 0, not the cause: %s", m)
				}
				if obey && !strings.Contains(m, "robots.txt") {
					t.Errorf("message does not say robots.txt was refused: %s", m)
				}
			}
		})
	}
}
