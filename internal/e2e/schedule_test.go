package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
)

// TestScheduledRecrawl runs a master whose crawl carries a schedule: after
// the crawl is done, the schedule re-seeds it, the seed is fetched again
// and the run is recorded in MySQL with its seed count.
func TestScheduledRecrawl(t *testing.T) {
	site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 5, LinksPerPage: 2, PageBytes: 512, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg := crawltest.Config(t)
	cfg.Crawl.Schedule = "@every 2s"
	cfg.Admin.Listen = ""
	cfg.Politeness.Delay = 10 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := masterd.Seed(ctx, cfg, site.Seeds()); err != nil {
		t.Fatal(err)
	}
	mctx, stopMaster := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() { mdone <- masterd.New(cfg, masterd.Options{Logger: crawltest.Logger(t)}).Run(mctx) }()
	crawltest.StartSlave(t, cfg, "sched-1")
	f := crawltest.OpenFrontier(t, cfg)
	hits := func() int {
		n := 0
		for u, c := range site.HitCounts() {
			if u == site.Seeds()[0] {
				n += c
			}
		}
		return n
	}
	var reseeded int64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, err := f.Stats(ctx)
		// a recrawl re-enqueues every recorded page: once the third run has
		// started, the second one's pages were enqueued, and once idle,
		// fetched
		if err == nil && st.RecrawlRun >= 3 && st.Reseeded >= 2 && st.Queued == 0 && st.InFlight == 0 {
			reseeded = st.Reseeded
			break
		}
	}
	stopMaster()
	if err := <-mdone; err != nil {
		t.Fatalf("master: %v", err)
	}
	if reseeded < 2 {
		t.Fatalf("fewer than 2 scheduled re-seedings in 60s")
	}
	if n := hits(); n < 3 {
		t.Errorf("seed fetched %d times, want the first crawl and at least 2 recrawls", n)
	}
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.LastRuns(ctx, cfg.Crawl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if last, ok := runs[""]; !ok || last.IsZero() {
		t.Errorf("no run of the crawl's schedule recorded: %v", runs)
	}
	var seeds int
	if err := db.DB.QueryRowContext(ctx, "SELECT COALESCE(MIN(seeds), -1) FROM schedule_runs WHERE crawl = ?", cfg.Crawl.Name).Scan(&seeds); err != nil {
		t.Fatal(err)
	}
	if seeds < 0 {
		t.Errorf("a recorded run has no seed count")
	}
}
