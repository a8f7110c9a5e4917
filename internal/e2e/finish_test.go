package e2e

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestExitWhenDoneWaitsForSeeds starts a master and a slave, both with
// --exit-when-done, before the crawl has any seed: the master says once
// that it waits for seeds and neither leaves; once seeded, the crawl runs,
// both exit by themselves, and the master writes the crawl's stats, which
// agree with the site (redirects, a 404, a retried 500 and 429) and with MySQL.
func TestExitWhenDoneWaitsForSeeds(t *testing.T) {
	cfg := crawltest.Config(t)
	site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 25, LinksPerPage: 4, Robots: true,
		Specials: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg.Crawl.AllowHosts = crawltest.SiteHosts(site)
	cfg.Admin.Listen = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	logs := &crawltest.LockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	summary := &crawltest.LockedBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	masterDone := make(chan error, 1)
	go func() {
		masterDone <- masterd.New(cfg, masterd.Options{ExitWhenDone: true, Logger: log, Summary: summary}).Run(ctx)
	}()
	s, err := slaved.New(cfg, slaved.Options{ID: "one-crawl", Logger: log, ExitWhenDone: true})
	if err != nil {
		t.Fatal(err)
	}
	slaveDone := make(chan error, 1)
	go func() { slaveDone <- s.Run(ctx) }()

	waitFor(t, "the master to say it waits for seeds", time.Minute,
		func() bool { return strings.Contains(logs.String(), "waiting for seeds") })
	// several finish checks (every quiescence/3) and slave heartbeats go
	// by with nothing to do: still nobody leaves
	time.Sleep(3 * cfg.Master.Quiescence)
	select {
	case err := <-masterDone:
		t.Fatalf("master left before any seed: %v", err)
	case err := <-slaveDone:
		t.Fatalf("slave left before any seed: %v", err)
	default:
	}
	if n := strings.Count(logs.String(), "waiting for seeds"); n != 1 {
		t.Errorf("waiting for seeds logged %d times, want once", n)
	}

	if res, err := masterd.Seed(ctx, cfg, site.Seeds()); err != nil || res.Added != len(site.Seeds()) {
		t.Fatalf("seed: %+v %v", res, err)
	}
	for name, ch := range map[string]chan error{"master": masterDone, "slave": slaveDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not leave after the crawl; log:\n%s", name, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "crawl finished: leaving") {
		t.Errorf("the slave did not say it leaves because the crawl finished; log:\n%s", logs.String())
	}

	st, err := masterd.ReadCrawlStats(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	expected := 0
	for range site.Expected() {
		expected++
	}
	if !st.Finished || st.PageCount() < int64(expected) || st.Pages["3xx"] < 1 || st.Pages["4xx"] < 1 ||
		st.Exceptions["http_status"] < 1 || st.Retries < 1 || st.Bytes <= 0 || st.Elapsed <= 0 || st.PagesPerSec <= 0 {
		t.Errorf("stats %+v: want finished, %d+ pages with 3xx, 4xx, http_status exceptions, retries, bytes and a rate", st, expected)
	}
	out := summary.String()
	for _, want := range []string{"crawl " + cfg.Crawl.Name, "finished", "pages", "2xx", "bytes", "items", "duplicates",
		"retries", "exceptions", "top hosts by failures", "pages/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	var again bytes.Buffer
	st.Render(&again)
	if !strings.Contains(out, strings.SplitN(again.String(), "\n", 3)[1]) { // the pages line agrees
		t.Errorf("summary written at the end:\n%s\ndiffers from the stats read after:\n%s", out, again.String())
	}
	t.Logf("summary:\n%s", out)
}
