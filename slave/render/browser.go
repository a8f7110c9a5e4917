package render

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// browserProc is one running browser process.
type browserProc struct {
	ctx       context.Context // chromedp context of the browser's first tab; ends when the browser dies
	session   *chromedp.Browser
	lost      <-chan struct{} // closed when the protocol connection drops
	pid       int
	userAgent string // default user agent: the browser's, without "Headless"

	stopOnce    sync.Once
	cancel      context.CancelFunc // of ctx; waits for the tab
	allocCancel context.CancelFunc // of the allocator; waits for the process and its directory
}

// allocatorOptions are the flags the browser starts with.
func allocatorOptions(path string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("disable-hang-monitor", true),
		chromedp.Flag("disable-popup-blocking", true),
		chromedp.Flag("disable-prompt-on-repost", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		// chromedp creates a fresh temporary --user-data-dir and removes
		// it when the process ends.
	}
}

// startBrowser starts a browser process; ctx bounds the start only.
func startBrowser(ctx context.Context, path string, log *slog.Logger) (*browserProc, error) {
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), allocatorOptions(path)...)
	logf := func(format string, args ...any) { log.Debug("chromedp: " + fmt.Sprintf(format, args...)) }
	bctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	stopWatch := context.AfterFunc(ctx, cancel)
	err := chromedp.Do(bctx)
	if !stopWatch() && err == nil {
		err = context.Cause(ctx)
	}
	fail := func(err error) (*browserProc, error) {
		cancel()
		allocCancel()
		return nil, fmt.Errorf("start browser %s: %w", path, err)
	}
	if err != nil {
		return fail(err)
	}
	c := chromedp.FromContext(bctx)
	b := &browserProc{ctx: bctx, session: c.Browser, lost: c.Browser.LostConnection,
		cancel: cancel, allocCancel: allocCancel}
	if p := c.Browser.Process(); p != nil {
		b.pid = p.Pid
	}
	vctx, vcancel := context.WithTimeout(bctx, 10*time.Second)
	defer vcancel()
	v, err := cdp.Call(vctx, c.Browser, browser.GetVersion, cdp.Empty{})
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("start browser %s: get version: %w", path, err)
	}
	b.userAgent = strings.ReplaceAll(v.UserAgent, "HeadlessChrome", "Chrome")
	log.Debug("render: browser started", "pid", b.pid, "product", v.Product)
	return b, nil
}

// alive reports whether the browser still runs and answers a command
// within 5 s; a browser that does not is treated as crashed.
func (b *browserProc) alive() bool {
	if !b.connected() {
		return false
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	_, err := cdp.Call(ctx, b.session, browser.GetVersion, cdp.Empty{})
	return err == nil
}

// connected reports whether the connection to the browser still stands,
// without asking the browser.
func (b *browserProc) connected() bool {
	select {
	case <-b.lost:
		return false
	default:
		return b.ctx.Err() == nil
	}
}

// stop kills the browser process and waits until it, its leftover
// children and its temporary directory are gone. A crawler's browser has
// nothing to save, so there is no graceful Browser.close.
func (b *browserProc) stop() {
	b.stopOnce.Do(func() {
		b.cancel()
		b.allocCancel()
	})
}
