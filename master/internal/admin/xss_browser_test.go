package admin

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/events"
)

// xssPayloads are values a crawled page, a slave or a rule file might
// carry to run script in the admin's browser.
var xssPayloads = []string{
	`<script>window.__xss=1</script>`,
	`"><img src=x onerror="window.__xss=1">`,
	`javascript:window.__xss=1`,
	`'><svg onload=window.__xss=1>`,
	`</td></tr></table><iframe src="javascript:window.__xss=1"></iframe>`,
}

// hostileFake is the test fake with every text the dashboard shows
// replaced by payloads: exceptions, lost tasks, slaves, proxies, the
// rejected rule edit and schedules.
func hostileFake() *fakeBackend {
	f := newFake()
	p := func(i int) string { return xssPayloads[i%len(xssPayloads)] }
	f.ov.Rules.LastError = "site.yaml:3: " + p(0)
	f.ov.Rules.Version = p(1)
	f.ov.Rules.Dir = p(2)
	f.ov.Crawls[0].Schedules = []ScheduleView{{Name: p(3), Spec: p(4), NextRun: testNow.Add(time.Hour)}}
	f.ov.Slaves[0].Slave, f.ov.Slaves[0].Host, f.ov.Slaves[0].RulesVersion = p(0), p(1), p(2)
	f.ov.Slaves[1].Slave, f.ov.Slaves[1].Host, f.ov.Slaves[1].State = p(3), p(4), p(0)
	f.exceptions = nil
	for i := range xssPayloads {
		f.exceptions = append(f.exceptions, events.Exception{Crawl: "news", Kind: p(i + 1), URL: "http://h.example/" + p(i),
			Host: p(i + 2), Slave: p(i + 3), Status: 500, Message: p(i + 4), At: testNow.Add(-time.Duration(i) * time.Minute).UnixMilli()})
	}
	f.exceptions = append(f.exceptions, events.Exception{Crawl: "news", Kind: "other", URL: "javascript:window.__xss=1",
		Host: "h.example", Slave: "s1", Message: "link", At: testNow.UnixMilli()})
	f.lost = []events.Lost{
		{Crawl: "news", URL: "javascript:window.__xss=1", Slave: p(1), Attempt: 1, Reason: p(0), LeasedAt: testNow.UnixMilli(), DetectedAt: testNow.UnixMilli()},
		{Crawl: "news", URL: "http://l.example/" + p(3), Slave: p(4), Attempt: 2, Reason: p(1), LeasedAt: testNow.UnixMilli(), DetectedAt: testNow.UnixMilli()},
	}
	f.proxies["news"] = []ProxyHealth{
		{Proxy: p(0), State: p(1), Slave: p(2), Reason: p(3), At: testNow},
		{Proxy: "javascript:window.__xss=1", State: events.ProxyUp, Slave: p(4), Reason: p(0), At: testNow},
	}
	return f
}

// TestDashboardShowsHostileDataAsText loads the dashboard over a backend
// full of HTML and JavaScript in every view and checks that none of it
// runs or becomes markup, that it all appears as text, and that no link
// leads to a javascript: URL.
func TestDashboardShowsHostileDataAsText(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	f := hostileFake()
	srv := httptest.NewServer(New(Options{Backend: f, Token: testToken, Sessions: testSessions(t)}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
	)
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	b := &browser{t: t, ctx: bctx}
	b.listen()

	b.do("log in", 30*time.Second,
		chromedp.Navigate(srv.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("crawls")),
		chromedp.WaitReady(chromedp.CSS("body[data-updated]")),
	)
	// Every view has drawn its rows.
	b.waitJS("the views", `document.querySelectorAll("#exceptions tbody tr").length === 6 &&
		document.querySelectorAll("#lost tbody tr").length === 2 &&
		document.querySelectorAll("#proxies tbody tr").length === 2 &&
		document.querySelectorAll("#slaves tbody tr").length === 2`)

	if got := eval[string](b, `typeof window.__xss`); got != "undefined" {
		t.Errorf("window.__xss is %s: a payload ran", got)
	}
	// Markup that the payloads would make if parsed as HTML: none, beyond
	// the page's own one script.
	type dom struct {
		Scripts, Injected, JSLinks, OtherLinks int
	}
	got := dom{
		Scripts:  eval[int](b, `document.scripts.length`),
		Injected: eval[int](b, `document.querySelectorAll("img, iframe, object, embed, td svg, [onerror], [onload], [onclick]").length`),
		JSLinks:  eval[int](b, `Array.from(document.querySelectorAll("a[href], area[href], [src], form[action]")).filter((e) => /^\s*javascript:/i.test(e.getAttribute("href") || e.getAttribute("src") || e.getAttribute("action") || "")).length`),
		OtherLinks: eval[int](b, `Array.from(document.querySelectorAll("a[href]")).filter((a) =>
			!(a.protocol === "http:" || a.protocol === "https:") || a.origin !== location.origin).length`),
	}
	if d := cmp.Diff(dom{Scripts: 1}, got); d != "" {
		t.Errorf("the page's markup (-want +got):\n%s", d)
	}
	// And all of it shows as text.
	text := eval[string](b, `document.body.innerText`)
	for _, p := range xssPayloads {
		if !strings.Contains(text, p) {
			t.Errorf("the page text lacks %q", p)
		}
	}
	for _, id := range []string{"rules-error-text", "rules-version"} {
		if s := eval[string](b, `document.getElementById("`+id+`").textContent`); !strings.Contains(s, "<") && !strings.Contains(s, ">") {
			t.Errorf("#%s shows %q, not the payload", id, s)
		}
	}
	if p := b.pageProblems(); len(p) > 0 {
		// A CSP violation would mean injected markup tried to run.
		t.Errorf("the page reported problems:\n%v", p)
	}
}
