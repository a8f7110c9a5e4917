package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
)

// product is an item as the example writes it and stores it.
type product struct {
	URL        string
	ID         int
	Name       string
	PriceCents int64
}

// TestExampleCrawlsJSONAPI builds the example program, runs it as a slave
// process against the test site's JSON API with an in-process master,
// Redis and MariaDB (a crawl of two shards), and checks that it logged in
// once, fetched every page with the token, and delivered every product
// cleaned, both to its JSON-lines file and to MySQL.
func TestExampleCrawlsJSONAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example program")
	}
	bin := buildExample(t)
	site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 3, Robots: true, Seed: 5, JSONAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	api := site.API()
	start, _ := url.Parse(api.Start)

	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("jsonapi")
	cfg.Crawl.Shards = 2
	cfg.Crawl.AllowHosts = []string{start.Hostname()}
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.Timeout = 5 * time.Second
	cfg.Politeness.Delay = 10 * time.Millisecond
	cfg.Lease.RetryBase = 100 * time.Millisecond
	cfg.Slave.Concurrency = 4
	cfg.Slave.HeartbeatInterval = 200 * time.Millisecond
	cfg.Slave.IdlePoll = 50 * time.Millisecond
	cfg.Master.Quiescence = 800 * time.Millisecond
	cfg.Master.RecoverInterval = 200 * time.Millisecond
	cfg.Dedup.ExpectedURLs = 1000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		opt, err := redis.ParseURL(cfg.Redis.URL)
		if err != nil {
			return
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if res, err := masterd.Seed(ctx, &cfg, []string{api.Start}); err != nil || res.Added != 1 {
		t.Fatalf("seed: %+v %v", res, err)
	}

	out := filepath.Join(t.TempDir(), "items.jsonl")
	slave := exec.Command(bin, "run", "--config", "", "--id", "jsonapi-1", "--out", out)
	slave.Env = append(os.Environ(),
		"CRAWLER_REDIS_URL="+cfg.Redis.URL,
		"CRAWLER_MYSQL_DSN="+cfg.MySQL.DSN,
		"CRAWLER_CRAWL_NAME="+cfg.Crawl.Name,
		"CRAWLER_CRAWL_SHARDS=2",
		"CRAWLER_CRAWL_ALLOW_HOSTS="+start.Hostname(),
		"CRAWLER_FETCH_ALLOW_PRIVATE_NETWORKS=true",
		"CRAWLER_FETCH_TIMEOUT=5s",
		"CRAWLER_POLITENESS_DELAY="+cfg.Politeness.Delay.String(),
		"CRAWLER_LEASE_RETRY_BASE="+cfg.Lease.RetryBase.String(),
		"CRAWLER_SLAVE_CONCURRENCY=4",
		"CRAWLER_SLAVE_HEARTBEAT_INTERVAL=200ms",
		"CRAWLER_SLAVE_IDLE_POLL=50ms",
		"CRAWLER_DEDUP_EXPECTED_URLS=1000",
		"CRAWLER_LOG_LEVEL=warn",
		"JSONAPI_USER="+testsite.APIUser,
		"JSONAPI_PASSWORD="+testsite.APIPassword,
	)
	slave.Stdout, slave.Stderr = os.Stderr, os.Stderr
	if err := slave.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- slave.Wait() }()
	t.Cleanup(func() {
		slave.Process.Kill()
		<-exited
	})

	logger := testLogger()
	if err := masterd.New(&cfg, masterd.Options{ExitWhenDone: true, Logger: logger}).Run(ctx); err != nil {
		t.Fatalf("master: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish in 2 minutes")
	}
	// a graceful leave, with exit status 0
	if err := slave.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("slave process: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("slave process did not leave in 30s after SIGTERM")
	}

	var want []product
	for _, p := range api.Products {
		want = append(want, product{URL: p.URL, ID: p.ID, Name: p.Name, PriceCents: p.PriceCents})
	}

	// the JSON-lines sink
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []product
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Item   string
			URL    string
			Page   string
			Fields struct {
				ID         int    `json:"id"`
				Name       string `json:"name"`
				PriceCents int64  `json:"price_cents"`
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("item file line %q: %v", sc.Text(), err)
		}
		if l.Item != "product" || l.Page == "" {
			t.Errorf("item file line %s", sc.Text())
		}
		lines = append(lines, product{URL: l.URL, ID: l.Fields.ID, Name: l.Fields.Name, PriceCents: l.Fields.PriceCents})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sortProducts(lines)
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("items written to the file (-want +got):\n%s", d)
	}

	// MySQL, through the master's sink
	db, err := store.Open(context.Background(), cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows []product
	err = db.ExportItems(context.Background(), store.ItemFilter{Crawl: cfg.Crawl.Name, Item: "product"}, func(r store.ItemRow) error {
		var p product
		if err := json.Unmarshal(r.Data, &struct {
			ID         *int    `json:"id"`
			Name       *string `json:"name"`
			PriceCents *int64  `json:"price_cents"`
		}{&p.ID, &p.Name, &p.PriceCents}); err != nil {
			return fmt.Errorf("item %s: %w", r.URL, err)
		}
		p.URL = r.URL
		if r.Rule != "" || r.Slave != "jsonapi-1" {
			return fmt.Errorf("item %s: rule %q slave %q", r.URL, r.Rule, r.Slave)
		}
		rows = append(rows, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sortProducts(rows)
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("items stored in MySQL (-want +got):\n%s", d)
	}

	// what the site saw: one login, every page once, always with the token
	got := map[string]int{}
	for _, h := range site.Hits() {
		if h.Path == "/robots.txt" {
			continue
		}
		got[fmt.Sprintf("%s %d", h.Path, h.Status)]++
	}
	wantHits := map[string]int{"/api/login 200": 1}
	for _, p := range api.Pages {
		u, _ := url.Parse(p)
		wantHits[u.RequestURI()+" 200"] = 1
	}
	if d := cmp.Diff(wantHits, got); d != "" {
		t.Errorf("requests the site saw (-want +got):\n%s", d)
	}
}

func sortProducts(ps []product) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
}

// buildExample builds this package's program into a temporary directory.
func buildExample(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "jsonapi")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// testLogger logs the master at info with -v, else not at all.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

func TestParseCents(t *testing.T) {
	tests := []struct {
		in    string
		cents int64
		bad   bool
	}{
		{"$1,234.50", 123450, false},
		{" $3.5 ", 350, false},
		{"12", 1200, false},
		{"$0.07", 7, false},
		{"1.234", 0, true},
		{"n/a", 0, true},
		{"$-1.00", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseCents(tt.in)
		if (err != nil) != tt.bad || got != tt.cents {
			t.Errorf("parseCents(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.cents, tt.bad)
		}
	}
}
