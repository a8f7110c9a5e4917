// Package render renders dynamic pages in headless Chromium for the
// slaves: a URL that matches a rendering rule is loaded in a real browser,
// its JavaScript runs, optional waits and interactions (a selector, network
// idle, scrolling, "load more" clicks) happen, and the resulting DOM comes
// back as HTML with the main document's status and headers.
//
// # Design
//
// One Renderer owns one browser process, started by New through chromedp's
// exec allocator (headless, no sandbox, no GPU, no background networking,
// component updates, sync or QUIC, a fresh temporary user data directory
// that chromedp removes when the process ends, and the DevTools protocol
// over a pipe, so no debugging port is opened). Each Render opens a tab in
// its own incognito browser context (Target.createBrowserContext), so
// renders share no cookies, cache or storage, and the request's proxy is
// the browser context's proxyServer: the session's proxy applies to every
// request of that page and to nothing else. Proxy credentials are answered
// through the Fetch domain's authRequired event (Chromium takes no
// credentials in a proxy URL). SOCKS proxies cannot carry credentials in
// Chromium and are refused with them. The proxy bypass list is
// "<-loopback>", so loopback targets go through the proxy too.
//
// Concurrent tabs are bounded by a semaphore of Options.Tabs slots; Render
// waits for a slot while its context allows. The request's Timeout covers
// the whole render once a slot is held: tab creation, navigation (up to the
// load event), the waits, and the extraction of the DOM.
//
// # Private-network guard
//
// Unless Options.AllowPrivateNetworks is set, the Fetch domain intercepts
// every request of the tab (documents and subresources, every redirect hop)
// at the request stage. The request's host is an IP literal, or it is
// resolved with Options.Lookup; if it is, or resolves to, an address that
// netguard.IsBlocked reports, the request is failed with BlockedByClient
// before Chromium connects anywhere. A blocked main document makes Render
// fail with an *Error of kind "blocked". The check is on the name as the
// crawler's resolver sees it: without a proxy Chromium resolves the name
// again on its own, so a DNS-rebinding host could answer differently the
// second time (through a proxy, the proxy resolves, as for the plain
// fetcher). WebSocket and WebRTC connections and service workers are not
// seen by the Fetch domain of a page.
//
// # Extra headers
//
// Request.Header goes with the requests to the page's own host only (a
// site's API key must not reach a third-party script's host), so it is
// added by the same interception, on every request to that host, rather
// than with Network.setExtraHTTPHeaders.
//
// # Resource blocking
//
// Request.Block (image, font, media, stylesheet) is implemented with the
// same Fetch interception: a request of a blocked resource type is failed
// with BlockedByClient and never leaves the browser. When neither the guard
// nor proxy credentials need every request, Fetch is enabled only for the
// blocked types, so other requests are not paused at all.
//
// # Failures and crashes
//
// Failures are *Error values with a Kind: "render_timeout" (the request's
// Timeout or the caller's deadline passed; an HTML snapshot of what was
// rendered so far is saved in Options.SnapshotDir when it is set),
// "render_navigation" (the browser could not load the page: DNS, refused
// connection, proxy failure, an aborted download, ...), "blocked" (the
// guard refused the main document) and "render_crash" (the browser process
// or the tab's renderer died, or the protocol connection broke). After a
// browser crash the dead process is cleaned up and the next Render starts a
// new one transparently; the failing Render reports render_crash and the
// caller retries it under its attempts.
package render

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Error kinds.
const (
	KindTimeout    = "render_timeout"
	KindCrash      = "render_crash"
	KindNavigation = "render_navigation"
	KindBlocked    = "blocked"
)

// Defaults of Options and Request.
const (
	DefaultChromePath   = "/usr/bin/chromium"
	DefaultTabs         = 4
	DefaultMaxHTMLBytes = 10 << 20
	DefaultTimeout      = 20 * time.Second
)

// ErrClosed is returned by Render after Close.
var ErrClosed = errors.New("render: renderer closed")

// Options configure a Renderer.
type Options struct {
	// ChromePath is the browser executable (default /usr/bin/chromium).
	ChromePath string
	// Tabs is the most pages rendered at once (default 4).
	Tabs int
	// AllowPrivateNetworks turns the private-network guard off.
	AllowPrivateNetworks bool
	// Lookup resolves host names for the guard (default
	// net.DefaultResolver); dnscache.Resolver.LookupIP fits.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Logger receives the renderer's logs (default: discarded).
	Logger *slog.Logger
	// MaxHTMLBytes caps the returned DOM (default 10 MiB).
	MaxHTMLBytes int64
	// SnapshotDir is where HTML snapshots of failed renders are written
	// ("" = none).
	SnapshotDir string
}

// Request is one page to render.
type Request struct {
	// URL is the http or https page to load.
	URL string
	// Proxy is "" (direct), http://[user:pass@]host:port,
	// https://host:port or socks5://host:port.
	Proxy string
	// UserAgent overrides the browser's (default: the browser's own with
	// "HeadlessChrome" replaced by "Chrome").
	UserAgent string
	// Timeout bounds the whole render once a tab is free (default 20s).
	Timeout time.Duration
	// WaitSelector waits, after the load event, until an element matches
	// this CSS selector.
	WaitSelector string
	// WaitNetworkIdle waits, last, until no request has been in flight
	// for 500 ms.
	WaitNetworkIdle bool
	// Scroll scrolls to the bottom up to Scroll times, each time waiting
	// briefly (up to 2 s) for the page to grow; it stops early when the
	// page stops growing.
	Scroll int
	// ClickSelector is a "load more" element clicked up to ClickTimes
	// times, while it exists and is visible, waiting (up to 2 s) for the
	// DOM to change after each click; it stops early when nothing changes.
	ClickSelector string
	ClickTimes    int
	// Block lists resource types whose requests are failed: image, font,
	// media, stylesheet.
	Block []string
	// Header holds extra request headers (a rule set's fetch.headers),
	// sent with every request the page makes to its own host (URL's
	// host and port), documents and subresources, replacing the
	// browser's of the same name; requests to other hosts do not carry
	// them.
	Header http.Header
}

// Result is a rendered page.
type Result struct {
	// Status is the main document's HTTP status (after redirects), 0 if
	// the browser saw no response.
	Status int
	// Header is the main document's response header.
	Header http.Header
	// FinalURL is document.location.href after the waits.
	FinalURL string
	// HTML is document.documentElement.outerHTML after the waits, capped
	// at Options.MaxHTMLBytes (cut at a UTF-8 boundary).
	HTML []byte
	// Truncated reports that HTML was cut at the cap.
	Truncated bool
	// Duration is the render's time from the moment a tab was free.
	Duration time.Duration
}

// Error is a typed render failure.
type Error struct {
	// Kind is one of KindTimeout, KindCrash, KindNavigation, KindBlocked.
	Kind string
	// Snapshot is the path of an HTML snapshot of what was rendered so
	// far, or "" if none was saved.
	Snapshot string
	Err      error
}

// Error implements error.
func (e *Error) Error() string {
	s := e.Kind + ": " + e.Err.Error()
	if e.Snapshot != "" {
		s += " (snapshot " + e.Snapshot + ")"
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Renderer renders pages in one headless Chromium process, restarted after
// a crash. Its methods are safe for concurrent use.
type Renderer struct {
	opt  Options
	log  *slog.Logger
	tabs chan struct{} // semaphore of Tabs slots

	mu     sync.Mutex // guards closed, b; held while a browser starts
	closed bool
	b      *browserProc // nil before the first start after a crash
	active sync.WaitGroup
}

// New checks the options and starts the browser; ctx bounds the start
// only. Close stops the browser.
func New(ctx context.Context, opt Options) (*Renderer, error) {
	if opt.ChromePath == "" {
		opt.ChromePath = DefaultChromePath
	}
	if opt.Tabs < 0 || opt.MaxHTMLBytes < 0 {
		return nil, fmt.Errorf("render: check options: negative Tabs %d or MaxHTMLBytes %d", opt.Tabs, opt.MaxHTMLBytes)
	}
	if opt.Tabs == 0 {
		opt.Tabs = DefaultTabs
	}
	if opt.MaxHTMLBytes == 0 {
		opt.MaxHTMLBytes = DefaultMaxHTMLBytes
	}
	if opt.Lookup == nil {
		opt.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	r := &Renderer{opt: opt, log: opt.Logger, tabs: make(chan struct{}, opt.Tabs)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	b, err := startBrowser(ctx, opt.ChromePath, r.log)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	r.b = b
	return r, nil
}

// Close stops the browser and waits for the renders under way, which fail.
// It is safe to call more than once.
func (r *Renderer) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	b := r.b
	r.b = nil
	r.mu.Unlock()
	if b != nil {
		b.stop()
	}
	r.active.Wait()
	return nil
}

// browser returns the running browser, starting a new one if the last one
// died.
func (r *Renderer) browser(ctx context.Context) (*browserProc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if r.b != nil && r.b.connected() {
		return r.b, nil
	}
	if old := r.b; old != nil {
		r.b = nil
		old.stop()
	}
	b, err := startBrowser(ctx, r.opt.ChromePath, r.log)
	if err != nil {
		return nil, fmt.Errorf("render: restart browser: %w", err)
	}
	r.log.Warn("render: browser restarted", "pid", b.pid)
	r.b = b
	return b, nil
}

// dropBrowser forgets b after it crashed and stops what is left of it.
func (r *Renderer) dropBrowser(b *browserProc) {
	r.mu.Lock()
	if r.b == b {
		r.b = nil
	}
	r.mu.Unlock()
	b.stop()
}

// browserPID returns the process id of the current browser, 0 if none
// runs (a hook for tests and metrics).
func (r *Renderer) browserPID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b == nil {
		return 0
	}
	return r.b.pid
}

// blockType maps a Request.Block name to its protocol resource type.
func blockType(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "image":
		return "Image", true
	case "font":
		return "Font", true
	case "media":
		return "Media", true
	case "stylesheet":
		return "Stylesheet", true
	}
	return "", false
}

// job is a checked Request.
type job struct {
	req       Request
	proxy     string // proxyServer of the browser context, "" = direct
	proxyUser string
	proxyPass string
	hasAuth   bool
	block     map[string]bool // CDP resource types
	host      string          // the URL's host:port, which Header goes to
}

// prepare checks req and fills in its defaults.
func prepare(req Request) (*job, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("parse url: unsupported scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("parse url: no host in %q", req.URL)
	}
	if req.Timeout < 0 || req.Scroll < 0 || req.ClickTimes < 0 {
		return nil, errors.New("check request: negative Timeout, Scroll or ClickTimes")
	}
	if req.Timeout == 0 {
		req.Timeout = DefaultTimeout
	}
	j := &job{req: req, block: map[string]bool{}, host: u.Host}
	for _, b := range req.Block {
		t, ok := blockType(b)
		if !ok {
			return nil, fmt.Errorf("check request: unknown resource type %q to block", b)
		}
		j.block[t] = true
	}
	if req.Proxy != "" {
		p, err := url.Parse(req.Proxy)
		if err != nil {
			return nil, fmt.Errorf("parse proxy: %w", err)
		}
		switch p.Scheme {
		case "http", "https", "socks4", "socks5":
		default:
			return nil, fmt.Errorf("parse proxy: unsupported scheme %q", p.Scheme)
		}
		if p.Host == "" {
			return nil, errors.New("parse proxy: no host")
		}
		if p.User != nil {
			if strings.HasPrefix(p.Scheme, "socks") {
				return nil, errors.New("parse proxy: chromium takes no credentials for a socks proxy")
			}
			j.proxyUser = p.User.Username()
			j.proxyPass, _ = p.User.Password()
			j.hasAuth = true
		}
		j.proxy = p.Scheme + "://" + p.Host
	}
	return j, nil
}

// Render loads req.URL in a new incognito tab, runs the request's waits and
// interactions and returns the DOM. Failures of the page are *Error values;
// a bad request, a closed renderer or the caller's cancellation are plain
// errors.
func (r *Renderer) Render(ctx context.Context, req Request) (*Result, error) {
	j, err := prepare(req)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", req.URL, err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.active.Add(1)
	r.mu.Unlock()
	defer r.active.Done()

	select {
	case r.tabs <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("render %s: wait for a tab: %w", req.URL, context.Cause(ctx))
	}
	defer func() { <-r.tabs }()

	b, err := r.browser(ctx)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", req.URL, err)
	}
	start := time.Now()
	res, err := r.render(ctx, b, j)
	if err != nil {
		var re *Error
		if errors.As(err, &re) && re.Kind == KindCrash && !b.alive() {
			r.dropBrowser(b)
		}
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("render %s: %w (%w)", req.URL, ErrClosed, err)
		}
		r.log.Debug("render: failed", "url", req.URL, "err", err)
		return nil, err
	}
	res.Duration = time.Since(start)
	r.log.Debug("render: done", "url", req.URL, "status", res.Status, "bytes", len(res.HTML), "duration", res.Duration)
	return res, nil
}
