package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

const (
	chromium  = "/usr/bin/chromium"
	dashToken = "dashboard-test-token-0123456789"
)

// TestDashboardLiveCrawl runs a master with its admin server, two slaves
// and a test site with hostile pages, and drives the dashboard in headless
// Chromium while the crawl runs: the numbers move, the exception filter
// narrows the log to one kind, Pause stops the crawl (nothing is claimed
// until Resume), and a screenshot is saved ($REDCRAWL_ARTIFACTS or the
// test's temporary directory).
func TestDashboardLiveCrawl(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no Chromium at %s (apt-get install chromium): %v", chromium, err)
	}
	site, err := testsite.Start(testsite.Options{Hosts: 3, PagesPerHost: 150, LinksPerPage: 6, PageBytes: 2048,
		Robots: true, Specials: true, Hostile: true, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg := crawltest.Config(t)
	cfg.Admin.Token = dashToken
	cfg.Admin.SDAllow = []string{"127.0.0.0/8"} // the slaves' /metrics, on loopback
	cfg.Politeness.Delay = 40 * time.Millisecond
	cfg.Fetch.Timeout = 2 * time.Second
	cfg.Crawl.MaxQueryVariants = 10
	cfg.Crawl.MaxPagesPerHost = 250 // bounds the hostile pages' endless traps, as the demo does
	cfg.Crawl.AllowHosts = nil
	for _, raw := range site.HostURLs() {
		u, _ := url.Parse(raw)
		cfg.Crawl.AllowHosts = append(cfg.Crawl.AllowHosts, u.Hostname())
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := masterd.Seed(ctx, cfg, site.Seeds()); err != nil {
		t.Fatal(err)
	}
	crawltest.RunAdminMaster(t, ctx, cfg)
	base := "http://" + cfg.Admin.Listen
	crawltest.StartSlave(t, cfg, "dash-1")
	crawltest.StartSlave(t, cfg, "dash-2")

	// the API refuses a request without the token
	if resp, err := http.Get(base + "/api/v1/overview"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("overview without token: %s, want 401", resp.Status)
		}
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(chromium), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.NoFirstRun, chromedp.WindowSize(1400, 1200))
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	// start the browser on bctx itself: a first run on a child context with
	// a timeout would tie the browser's life to that child
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitJS := func(what, expr string) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if _, err := chromedp.Run(c, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
			t.Fatalf("waiting for %s (%s): %v", what, expr, err)
		}
	}
	num := func(id string) int64 {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		v, err := chromedp.Run(c, chromedp.Evaluate[string](`document.getElementById(`+strconv.Quote(id)+`)?.dataset.value ?? ""`))
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	c := cfg.Crawl.Name // crawl names of the tests are ids already

	do("log in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), dashToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitReady(chromedp.CSS("body[data-updated]")),
	)

	// 1. live numbers: done grows without a reload, slaves are listed
	waitJS("pages done", fmt.Sprintf(`Number(document.getElementById("crawl-%s-done")?.dataset.value) > 20`, c))
	first := num("crawl-" + c + "-done")
	waitJS("more pages done", fmt.Sprintf(`Number(document.getElementById("crawl-%s-done")?.dataset.value) > %d`, c, first+20))
	waitJS("two slaves", `document.querySelectorAll("#slaves tbody tr").length === 2`)

	// 2. the exception filter narrows the log to one kind
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var kind string
	for deadline := time.Now().Add(60 * time.Second); kind == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		xs, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: c})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, x := range xs {
			kinds[x.Kind]++
		}
		if len(kinds) >= 2 {
			for k := range kinds {
				if kind == "" || k < kind {
					kind = k
				}
			}
		}
	}
	if kind == "" {
		t.Fatal("the crawl recorded fewer than two kinds of exceptions in 60s")
	}
	waitJS("the exception log", `Number(document.getElementById("exc-total").textContent.replace(/,/g, "")) > 1`)
	do("filter by kind", chromedp.SetValue(chromedp.ID("f-kind"), kind), chromedp.Click(chromedp.ID("f-apply")))
	waitJS("the filtered log", fmt.Sprintf(`(() => {
		const kinds = Array.from(document.querySelectorAll("#exceptions tbody tr td:nth-child(3)"), td => td.textContent);
		return kinds.length > 0 && kinds.every(k => k === %q);
	})()`, kind))
	shown, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("exc-total").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	n, err := db.CountExceptions(ctx, store.ExceptionFilter{Crawl: c, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := db.CountExceptions(ctx, store.ExceptionFilter{Crawl: c})
	if got, _ := strconv.Atoi(shown); got < 1 || got > n || got >= all {
		t.Errorf("filtered total %q: want 1..%d (kind %s) and fewer than all %d", shown, n, kind, all)
	}

	// 3. pause: the page says so, and nothing is claimed until resume
	do("pause", chromedp.Click(chromedp.ID("btn-pause-"+c)))
	waitJS("the paused state", fmt.Sprintf(`document.getElementById("crawl-%s-state")?.textContent === "paused"`, c))
	front := openFrontier(t, cfg)
	var paused frontier.Stats
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if paused, err = front.Stats(ctx); err == nil && paused.Paused && paused.InFlight == 0 {
			break
		}
	}
	if !paused.Paused || paused.InFlight != 0 {
		t.Fatalf("after pause: %+v, want paused with nothing in flight", paused)
	}
	if paused.Queued == 0 {
		t.Fatalf("nothing left queued at pause (%+v): the test site is too small to show pause", paused)
	}
	// two claim rounds of both slaves (idle poll 50ms, paused wait 1s)
	time.Sleep(2500 * time.Millisecond)
	if st, _ := front.Stats(ctx); st.Done != paused.Done || st.InFlight != 0 {
		t.Errorf("paused crawl moved: done %d -> %d, in flight %d", paused.Done, st.Done, st.InFlight)
	}

	// the screenshot shows the paused crawl with its exceptions filtered
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("REDCRAWL_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dashboard-live-crawl.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	// 4. resume from the page; the crawl goes on to the end
	do("resume", chromedp.Click(chromedp.ID("btn-resume-"+c)))
	waitJS("the crawl finished", fmt.Sprintf(`document.getElementById("crawl-%s-state")?.textContent === "finished"`, c))

	// the JSON API agrees with the page
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/overview", nil)
	req.Header.Set("Authorization", "Bearer "+dashToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ov struct {
		Crawls []struct {
			Crawl    string `json:"crawl"`
			Done     int64  `json:"done"`
			Finished bool   `json:"finished"`
			Paused   bool   `json:"paused"`
			Other    bool   `json:"other"`
		} `json:"crawls"`
	}
	// this master's crawl first, then the other crawls of the Redis
	if err := json.Unmarshal(body, &ov); err != nil || len(ov.Crawls) < 1 || ov.Crawls[0].Other {
		t.Fatalf("overview %s: %v", body, err)
	}
	if got := ov.Crawls[0]; got.Crawl != c || !got.Finished || got.Paused || got.Done <= paused.Done {
		t.Errorf("overview after resume: %+v (done at pause %d)", got, paused.Done)
	}

	// Prometheus: the master's metrics behind the token, the slaves' as
	// http_sd targets that answer
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+dashToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
		}
		return string(b)
	}
	if m := get("/metrics"); !strings.Contains(m, `redcrawl_queue_depth{crawl="`+c+`",queue="queued"}`) ||
		!strings.Contains(m, "redcrawl_events_stored_total") {
		t.Errorf("master /metrics lacks the queue depths or stored events:\n%.2000s", m)
	}
	var sd []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal([]byte(get("/api/v1/sd")), &sd); err != nil || len(sd) != 2 {
		t.Fatalf("sd targets %+v, %v; want the 2 slaves", sd, err)
	}
	for _, g := range sd {
		resp, err := http.Get("http://" + g.Targets[0] + "/metrics")
		if err != nil {
			t.Fatalf("scrape slave %s: %v", g.Labels["slave"], err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "redcrawl_slave_pages_total") {
			t.Errorf("slave %s /metrics lacks redcrawl_slave_pages_total", g.Labels["slave"])
		}
	}
}

// openFrontier opens the crawl's frontier on its own Redis client.
func openFrontier(t *testing.T, cfg *config.Config) *frontier.Redis {
	t.Helper()
	rdb, err := redisconn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f, err := frontier.NewRedis(context.Background(), rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
