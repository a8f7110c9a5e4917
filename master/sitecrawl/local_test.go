package sitecrawl

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// localConfig is a crawl of its own against the test Redis and MariaDB,
// its keys deleted when the test ends.
func localConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("local")
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	cfg.Admin.Listen, cfg.Rules.Dir = "", ""
	cfg.Slave.ShutdownTimeout = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb, err := redisconn.New(&cfg)
		if err == nil {
			testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name)
			rdb.Close()
		}
	})
	return &cfg
}

// TestStartLocalFailures checks what a local crawl that cannot run says:
// before anything starts (no slaves, no slave binary, the Seeded hook's
// error), and once started, a slave that dies stops the master and Wait
// returns why; Stop then removes the directory it made.
func TestStartLocalFailures(t *testing.T) {
	dir := t.TempDir()
	dies := filepath.Join(dir, "slave")
	if err := os.WriteFile(dies, []byte("#!/bin/sh\necho 'no redis here' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := []string{"http://127.0.0.1:1/"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, tc := range []struct {
		name string
		opt  func(cfg *config.Config) LocalOptions
		want string
	}{
		{"no slaves", func(cfg *config.Config) LocalOptions {
			return LocalOptions{Config: cfg, Seeds: seeds, Slaves: slaveproc.Options{Binary: dies}}
		}, "local crawl: no slaves"},
		{"no slave binary", func(cfg *config.Config) LocalOptions {
			return LocalOptions{Config: cfg, Seeds: seeds, SlaveIDs: []string{"s1"}}
		}, "local crawl: no slave binary"},
		{"seeded hook", func(cfg *config.Config) LocalOptions {
			return LocalOptions{Config: cfg, Seeds: seeds, SlaveIDs: []string{"s1"}, Slaves: slaveproc.Options{Binary: dies},
				Seeded: func(res masterd.SeedResult) error {
					if res.Added != 1 {
						t.Errorf("seeded %+v, want 1 added", res)
					}
					return os.ErrInvalid
				}}
		}, os.ErrInvalid.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := StartLocal(ctx, tc.opt(localConfig(t))); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartLocal: %v, want an error saying %q", err, tc.want)
			}
		})
	}

	t.Run("a slave dies", func(t *testing.T) {
		cfg := localConfig(t)
		run, err := StartLocal(ctx, LocalOptions{Config: cfg, Seeds: seeds, SlaveIDs: []string{"s1"},
			Master: masterd.Options{Logger: slog.New(slog.DiscardHandler)},
			Slaves: slaveproc.Options{Binary: dies, StopTimeout: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-run.Done():
		case <-ctx.Done():
			t.Fatal("the master ran on after its slave died")
		}
		if err := run.Wait(); err == nil || !strings.Contains(err.Error(), "slave s1 exited early") {
			t.Errorf("Wait: %v, want the slave's early exit", err)
		}
		tmp := run.tmp
		run.Stop()
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Errorf("Stop left %s: %v", tmp, err)
		}
	})
}
