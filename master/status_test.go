package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestStatusSummary: master status shows the crawl's stats from MySQL
// under its counters, as a table and in --json.
func TestStatusSummary(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t)
	crawl := testutil.CrawlName("sum")
	redisURL := "redis://127.0.0.1:6379/0"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		redisURL = u
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "redis:\n  url: " + redisURL + "\nmysql:\n  dsn: " + dsn + "\ncrawl:\n  name: " + crawl +
		"\nrules:\n  dir: \"\"\nadmin:\n  listen: \"\"\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	if err := db.Insert(ctx, []events.Envelope{
		{ID: "1-1", Page: &events.Page{Crawl: crawl, URL: "http://a.test/", Status: 200, Bytes: 2048, FetchedAt: now - 4000}},
		{ID: "1-2", Page: &events.Page{Crawl: crawl, URL: "http://a.test/r", Status: 301, FetchedAt: now - 3000}},
		{ID: "1-3", Page: &events.Page{Crawl: crawl, URL: "http://a.test/m", Status: 404, Bytes: 100, FetchedAt: now - 2000}},
		{ID: "1-4", Exception: &events.Exception{Crawl: crawl, Kind: events.KindTimeout, Host: "b.test", URL: "http://b.test/1", Message: "deadline", At: now - 1000}},
		{ID: "1-5", Exception: &events.Exception{Crawl: crawl, Kind: events.KindDNS, Host: "c.test", URL: "http://c.test/", Message: "no such host", At: now - 500}},
		{ID: "1-6", Exception: &events.Exception{Crawl: crawl, Kind: events.KindTimeout, Host: "b.test", URL: "http://b.test/2", Message: "deadline", At: now - 400}},
		{ID: "1-7", Item: &events.Item{Crawl: crawl, Rule: "r", Item: "i", URL: "http://a.test/", Data: json.RawMessage(`{"t":1}`), FetchedAt: now - 4000}},
	}); err != nil {
		t.Fatal(err)
	}
	ropt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	if _, err := f.Seed(ctx, []frontier.Task{{URL: "http://a.test/x", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"status", "--config", cfgPath}, nil, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d, stderr %s", code, errOut.String())
	}
	for _, want := range []string{
		"crawl " + crawl, "running",
		"pages                  3 (2xx 1, 3xx 1, 4xx 1, 5xx 0); failed 0",
		"bytes                  2.1 KiB",
		"items                  1",
		"exceptions             timeout 2, dns 1",
		"top hosts by failures  b.test 2, c.test 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if code := run([]string{"status", "--config", cfgPath, "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("status --json: exit %d, stderr %s", code, errOut.String())
	}
	var rep masterd.StatusReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Summary == nil {
		t.Fatalf("status --json: %v, summary %v:\n%s", err, rep.Summary, out.String())
	}
	got := *rep.Summary
	got.Elapsed, got.PagesPerSec = 0, 0
	want := masterd.CrawlStats{Crawl: crawl, Pages: map[string]int64{"2xx": 1, "3xx": 1, "4xx": 1}, Bytes: 2148, Items: 1,
		Exceptions:   map[string]int64{events.KindTimeout: 2, events.KindDNS: 1},
		FailingHosts: []store.HostCount{{Host: "b.test", Count: 2}, {Host: "c.test", Count: 1}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("status --json summary (-want +got):\n%s", d)
	}
	if rep.Summary.Elapsed <= 0 {
		t.Errorf("elapsed %v, want > 0 (a running crawl: first fetch to now)", rep.Summary.Elapsed)
	}
}
