package admin

import (
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestLoginLinkInBrowser opens a login link in headless Chromium: it lands
// on the live dashboard, logged in, where (after the script's update) a
// finished crawl shows no Pause and a crawl of another master no actions.
func TestLoginLinkInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFake()
	f.ov.Crawls = append(f.ov.Crawls,
		CrawlView{Stats: frontier.Stats{Crawl: "done", Done: 10, Finished: true, FinishedAt: testNow.UnixMilli()}, Schedules: []ScheduleView{}},
		CrawlView{Stats: frontier.Stats{Crawl: "elsewhere", Done: 5}, Other: true, Schedules: []ScheduleView{}})
	srv := httptest.NewServer(New(Options{Backend: f, Token: testToken, Sessions: testSessions(t)}))
	defer srv.Close()
	link, err := LoginLink(srv.URL+"/", testToken, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(chromiumPath), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true), chromedp.NoFirstRun)
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	if err := chromedp.Do(bctx); err != nil { // the browser lives as long as bctx
		t.Fatalf("start Chromium: %v", err)
	}
	b := &browser{t: t, ctx: bctx}
	b.do("open the link", 30*time.Second,
		chromedp.Navigate(link),
		chromedp.WaitReady(chromedp.CSS("body[data-updated]")),
	)
	if loc := eval[string](b, "location.pathname"); loc != "/" {
		t.Fatalf("the link landed on %s, want /", loc)
	}
	u, _ := url.Parse(link)
	if q := eval[string](b, "location.search"); q != "" || u.RawQuery == "" {
		t.Errorf("the link's token stays in the address: %q", q)
	}
	b.waitJS("no pause for the finished crawl", `document.getElementById("btn-pause-done").hidden === true`)
	b.waitJS("pause for the running crawl", `document.getElementById("btn-pause-news").hidden === false`)
	b.waitJS("no actions for the other crawl", `document.getElementById("btn-pause-elsewhere") === null`)
	b.waitJS("the other crawl listed", `document.getElementById("crawl-elsewhere-done") !== null`)
}
