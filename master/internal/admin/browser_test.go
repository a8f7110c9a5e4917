package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

const chromiumPath = "/usr/bin/chromium"

// browser drives one headless Chromium tab for a test, failing the test
// on any step that errs or outlasts its bound.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and console errors of the page
}

// do runs steps, bounded by d.
func (b *browser) do(what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// eval returns the value of a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// listen records the page's uncaught exceptions and logged errors (CSP
// violations among them).
func (b *browser) listen() {
	err := chromedp.Listen(b.ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				msg = "log: " + e.Entry.Text + " " + e.Entry.URL
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.problems = append(b.problems, msg)
			b.mu.Unlock()
		}
	})
	if err != nil {
		b.t.Fatalf("listen to the page: %v", err)
	}
}

func (b *browser) pageProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// artifactDir is where screenshots go: $REDCRAWL_ARTIFACTS, else a
// temporary directory of the test.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("REDCRAWL_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("artifacts directory: %v", err)
		}
		return dir
	}
	return t.TempDir()
}

// TestDashboardInBrowser logs in through the form, watches live numbers,
// filters the exception log, pauses the crawl and takes a screenshot.
func TestDashboardInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no Chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}

	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	f := newFake()
	var logs bytes.Buffer
	var logMu sync.Mutex
	srv := httptest.NewServer(New(Options{
		Backend:  f,
		Token:    testToken,
		Sessions: testSessions(t),
		Logger:   slog.New(slog.NewTextHandler(&lockedWriter{mu: &logMu, w: &logs}, nil)),
	}))
	defer srv.Close()

	// Everything the browser does fits in this bound: it is the parent of
	// the browser, so when it expires the browser stops and any wait fails.
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
		chromedp.WindowSize(1400, 1000),
	)
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	b := &browser{t: t, ctx: bctx}
	b.listen()

	// 1. The dashboard sends a stranger to the login form; log in there.
	b.do("open the dashboard", 20*time.Second,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	if loc := eval[string](b, "location.pathname"); loc != "/login" {
		t.Fatalf("an unauthenticated visit landed on %s, want /login", loc)
	}
	b.do("log in", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("crawls")),
		chromedp.WaitReady(chromedp.CSS("body[data-updated]")),
	)
	if loc := eval[string](b, "location.pathname"); loc != "/" {
		t.Fatalf("after login the page is %s, want /", loc)
	}

	// 2. Live numbers: the page follows the backend without a reload.
	if got := eval[string](b, `document.getElementById("crawl-news-done").textContent`); got != "4,321" {
		t.Errorf("done shows %q, want 4,321", got)
	}
	f.setDone("news", 98765)
	b.waitJS("the new done count", `document.getElementById("crawl-news-done")?.textContent === "98,765"`)
	b.waitJS("the chart", `document.querySelectorAll("#chart polyline").length === 1`)
	if n := eval[int](b, `document.querySelectorAll("#slaves tbody tr").length`); n != 2 {
		t.Errorf("%d slave rows, want 2", n)
	}

	// 3. The exception log narrows to the filtered kind.
	b.waitJS("the exception log", `document.getElementById("exc-total").textContent === "5"`)
	b.do("filter by kind", 10*time.Second,
		chromedp.SetValue(chromedp.ID("f-kind"), "timeout"),
		chromedp.Click(chromedp.ID("f-apply")),
	)
	b.waitJS("the filtered log", `document.getElementById("exc-total").textContent === "3"`)
	type excView struct {
		Rows  int
		Total string
		Kinds []string
		Range string
	}
	got := excView{
		Rows:  eval[int](b, `document.querySelectorAll("#exceptions tbody tr").length`),
		Total: eval[string](b, `document.getElementById("exc-total").textContent`),
		Kinds: eval[[]string](b, `Array.from(document.querySelectorAll("#exceptions tbody tr td:nth-child(3)"), td => td.textContent)`),
		Range: eval[string](b, `document.getElementById("exc-range").textContent`),
	}
	want := excView{Rows: 3, Total: "3", Kinds: []string{"timeout", "timeout", "timeout"}, Range: "1–3"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("filtered exceptions (-want +got):\n%s", d)
	}
	if got.Total != strconv.Itoa(got.Rows) {
		t.Errorf("#exc-total %s does not match the %d rows", got.Total, got.Rows)
	}
	// Data is text, never markup.
	if n := eval[int](b, `document.querySelectorAll("#exceptions script, #exceptions b").length`); n != 0 {
		t.Errorf("exception data became %d elements", n)
	}

	// 4. Pause: the backend gets the action and the page shows it.
	b.do("pause", 10*time.Second, chromedp.Click(chromedp.ID("btn-pause-news")))
	b.waitJS("the paused state", `document.getElementById("crawl-news-state")?.textContent === "paused"`)
	b.waitJS("the resume button", `!document.getElementById("btn-resume-news").hidden && document.getElementById("btn-pause-news").hidden`)
	if d := cmp.Diff([]Action{{Kind: ActPause, Crawl: "news"}}, f.recorded()); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	if msg := eval[string](b, `document.getElementById("action-msg").textContent`); msg != "paused news" {
		t.Errorf("action message %q, want %q", msg, "paused news")
	}

	// 5. A full-page screenshot for people to look at.
	sctx, scancel := context.WithTimeout(bctx, 20*time.Second)
	defer scancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG")
	}
	path := filepath.Join(artifactDir(t), "admin-dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)

	if p := b.pageProblems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%v", p)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if bytes.Contains(logs.Bytes(), []byte(testToken)) {
		t.Error("the token leaked into the log")
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Error(fmt.Errorf("the browser test ran out of time: %w", err))
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
