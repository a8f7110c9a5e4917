package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/redcrawl/redcrawl/slave/netguard"
)

// Tunables of the waits.
const (
	networkIdle   = 500 * time.Millisecond // quiet time of WaitNetworkIdle
	growWait      = 2 * time.Second        // how long a scroll or click waits for new content
	pollInterval  = 50 * time.Millisecond
	snapshotLimit = 3 * time.Second // extra time to save a snapshot after a failure
)

// errTimeout is the cancellation cause of a render whose Timeout passed.
var errTimeout = errors.New("render timeout")

// errTabCrashed is the cancellation cause of a render whose renderer
// process crashed.
var errTabCrashed = errors.New("tab renderer crashed")

// page is the state of one render: its tab, its interception and its
// network activity. The listener (on chromedp's reader goroutine) updates
// it and starts a goroutine for each paused request.
type page struct {
	r    *Renderer
	j    *job
	tab  *chromedp.Target
	main cdp.FrameID             // the tab's main frame (its target id)
	ctx  context.Context         // the tab's, for the handlers and snapshots; ended by close
	kill context.CancelCauseFunc // cancels the render with a cause

	stopHandlers context.CancelFunc // ends ctx

	intercept bool // Fetch is enabled for every request (guard or proxy auth)
	guard     bool

	mu          sync.Mutex
	closed      bool // no more handler goroutines may start
	handlers    sync.WaitGroup
	hosts       map[string]error // guard verdicts by host: nil = allowed
	authTries   map[fetch.RequestID]int
	mainBlocked error
	inflight    map[network.RequestID]bool
	lastNet     time.Time
}

// render runs one job in a new tab of b.
func (r *Renderer) render(ctx context.Context, b *browserProc, j *job) (res *Result, err error) {
	// The tab lives in its own incognito browser context, with the job's
	// proxy; its lifetime is tabCtx (a child of the browser's).
	tabCtx, tabCancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext(
		func(p *target.CreateBrowserContextParams) {
			if j.proxy != "" {
				p.ProxyServer = j.proxy
				p.ProxyBypassList = "<-loopback>"
			}
		}))
	defer tabCancel()

	// runCtx ends at the timeout, with the caller's ctx, or when the tab
	// crashes; the tab itself outlives it so a snapshot can be taken.
	runCtx, kill := context.WithCancelCause(tabCtx)
	defer kill(nil)
	stopCaller := context.AfterFunc(ctx, func() { kill(context.Cause(ctx)) })
	defer stopCaller()
	timer := time.AfterFunc(j.req.Timeout, func() { kill(errTimeout) })
	defer timer.Stop()

	// The interception handlers use hctx, which close ends before it
	// waits for them.
	hctx, hcancel := context.WithCancel(tabCtx)
	p := &page{r: r, j: j, ctx: hctx, stopHandlers: hcancel, kill: kill,
		guard:    !r.opt.AllowPrivateNetworks,
		hosts:    map[string]error{},
		inflight: map[network.RequestID]bool{}, lastNet: time.Now(),
		authTries: map[fetch.RequestID]int{}}
	p.intercept = p.guard || j.hasAuth || len(j.req.Header) > 0
	defer p.close()

	fail := func(err error) (*Result, error) {
		return nil, p.failure(ctx, runCtx, b, err)
	}

	// Create the tab, bound by runCtx (its first Run must get tabCtx).
	stopCreate := context.AfterFunc(runCtx, tabCancel)
	err = chromedp.Do(tabCtx)
	if !stopCreate() && err == nil {
		err = context.Cause(runCtx)
	}
	if err != nil {
		return fail(fmt.Errorf("open tab: %w", err))
	}
	p.tab = chromedp.FromContext(tabCtx).Target
	p.main = cdp.FrameID(p.tab.TargetID)
	if err := chromedp.Listen(tabCtx, p.onEvent); err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}

	ua := j.req.UserAgent
	if ua == "" {
		ua = b.userAgent
	}
	if _, err := cdp.Call(runCtx, p.tab, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua}); err != nil {
		return fail(fmt.Errorf("set user agent: %w", err))
	}
	if err := p.enableFetch(runCtx); err != nil {
		return fail(err)
	}

	resp, err := chromedp.Run(runCtx, chromedp.NavigateResponse(j.req.URL))
	if err != nil {
		return fail(fmt.Errorf("navigate: %w", err))
	}
	if err := p.waits(runCtx); err != nil {
		return fail(err)
	}
	doc, err := p.document(runCtx)
	if err != nil {
		return fail(fmt.Errorf("read document: %w", err))
	}
	res = &Result{FinalURL: doc.Href, Header: http.Header{}}
	res.HTML, res.Truncated = capHTML(doc.HTML, r.opt.MaxHTMLBytes)
	if resp != nil {
		res.Status = int(resp.Status)
		res.Header = headers(resp.Headers)
	}
	return res, nil
}

// enableFetch turns on request interception if the guard, proxy
// credentials or resource blocking need it.
func (p *page) enableFetch(ctx context.Context) error {
	var params fetch.EnableParams
	switch {
	case p.intercept:
		params.Patterns = []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}}
		params.HandleAuthRequests = new(true)
	case len(p.j.block) > 0:
		for t := range p.j.block {
			params.Patterns = append(params.Patterns, &fetch.RequestPattern{URLPattern: "*",
				ResourceType: network.ResourceType(t), RequestStage: fetch.RequestStageRequest})
		}
	default:
		return nil
	}
	if _, err := cdp.Call(ctx, p.tab, fetch.Enable, params); err != nil {
		return fmt.Errorf("enable fetch: %w", err)
	}
	return nil
}

// onEvent handles the tab's events. It runs on chromedp's reader
// goroutine: it must not block or call the browser.
func (p *page) onEvent(ev any) {
	switch ev := ev.(type) {
	case *fetch.EventRequestPaused:
		p.spawn(func() { p.paused(ev) })
	case *fetch.EventAuthRequired:
		p.spawn(func() { p.auth(ev) })
	case *network.EventRequestWillBeSent:
		p.mu.Lock()
		p.inflight[ev.RequestID] = true
		p.lastNet = time.Now()
		p.mu.Unlock()
	case *network.EventLoadingFinished:
		p.done(ev.RequestID)
	case *network.EventLoadingFailed:
		p.done(ev.RequestID)
	case *inspector.EventTargetCrashed:
		p.kill(errTabCrashed)
	}
}

// done records the end of a request.
func (p *page) done(id network.RequestID) {
	p.mu.Lock()
	delete(p.inflight, id)
	p.lastNet = time.Now()
	p.mu.Unlock()
}

// spawn runs f on a goroutine that close waits for, unless the page is
// closed.
func (p *page) spawn(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.handlers.Go(f)
}

// close stops new handlers, ends the running ones' context and waits for
// them.
func (p *page) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.stopHandlers()
	p.handlers.Wait()
}

// paused decides on an intercepted request: fail it if its resource type
// is blocked or the guard refuses its host, continue it otherwise.
func (p *page) paused(ev *fetch.EventRequestPaused) {
	reason := network.ErrorReason("")
	if p.j.block[string(ev.ResourceType)] {
		reason = network.ErrorReasonBlockedByClient
	} else if p.guard {
		if err := p.checkURL(ev.Request.URL); err != nil {
			reason = network.ErrorReasonBlockedByClient
			var be *netguard.BlockedError
			if !errors.As(err, &be) {
				reason = network.ErrorReasonNameNotResolved
			}
			if reason == network.ErrorReasonBlockedByClient && ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == p.main {
				p.mu.Lock()
				p.mainBlocked = err
				p.mu.Unlock()
			}
			p.r.log.Debug("render: request refused", "url", ev.Request.URL, "err", err)
		}
	}
	var err error
	if reason != "" {
		_, err = cdp.Call(p.ctx, p.tab, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: reason})
	} else {
		_, err = cdp.Call(p.ctx, p.tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID,
			Headers: p.extraHeaders(ev.Request)})
	}
	if err != nil && p.ctx.Err() == nil {
		p.r.log.Debug("render: answer paused request", "url", ev.Request.URL, "err", err)
	}
}

// extraHeaders returns a request's headers with the job's extra headers
// over them when it goes to the page's own host, nil otherwise (the
// request continues unchanged).
func (p *page) extraHeaders(r *network.Request) []*fetch.HeaderEntry {
	if len(p.j.req.Header) == 0 || r == nil {
		return nil
	}
	u, err := url.Parse(r.URL)
	if err != nil || !strings.EqualFold(u.Host, p.j.host) {
		return nil
	}
	out := make([]*fetch.HeaderEntry, 0, len(r.Headers)+len(p.j.req.Header))
	for name, v := range r.Headers {
		if _, over := p.j.req.Header[http.CanonicalHeaderKey(name)]; over {
			continue
		}
		out = append(out, &fetch.HeaderEntry{Name: name, Value: fmt.Sprint(v)})
	}
	for name, vs := range p.j.req.Header {
		for _, v := range vs {
			out = append(out, &fetch.HeaderEntry{Name: name, Value: v})
		}
	}
	return out
}

// auth answers a proxy's challenge with the job's credentials, once per
// request; any other challenge (a site's 401) is cancelled, so the page
// gets the 401 response.
func (p *page) auth(ev *fetch.EventAuthRequired) {
	resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
	if ev.AuthChallenge != nil && ev.AuthChallenge.Source == fetch.AuthChallengeSourceProxy && p.j.hasAuth {
		p.mu.Lock()
		p.authTries[ev.RequestID]++
		first := p.authTries[ev.RequestID] == 1
		p.mu.Unlock()
		if first {
			resp = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials,
				Username: p.j.proxyUser, Password: p.j.proxyPass}
		}
	}
	_, err := cdp.Call(p.ctx, p.tab, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: resp})
	if err != nil && p.ctx.Err() == nil {
		p.r.log.Debug("render: answer auth challenge", "url", ev.Request.URL, "err", err)
	}
}

// checkURL applies the private-network guard to a request URL: nil if its
// host is public, a *netguard.BlockedError if it is or resolves to a
// blocked address, another error if it cannot be resolved. Verdicts are
// kept per host for the render.
func (p *page) checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse request url: %w", err)
	}
	host := u.Hostname()
	if host == "" {
		return nil // about:, data: and the like reach no network
	}
	p.mu.Lock()
	verdict, ok := p.hosts[host]
	p.mu.Unlock()
	if ok {
		return verdict
	}
	verdict = p.checkHost(host)
	p.mu.Lock()
	p.hosts[host] = verdict
	p.mu.Unlock()
	return verdict
}

// checkHost resolves host (unless it is an IP literal) and reports the
// first blocked address.
func (p *page) checkHost(host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if netguard.IsBlocked(ip) {
			return &netguard.BlockedError{Addr: netip.AddrPortFrom(ip, 0).String()}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	ips, err := p.r.opt.Lookup(ctx, host)
	if err != nil {
		return fmt.Errorf("look up %s: %w", host, err)
	}
	if len(ips) == 0 {
		return fmt.Errorf("look up %s: no addresses", host)
	}
	for _, ip := range ips {
		if netguard.IsBlocked(ip) {
			return &netguard.BlockedError{Addr: netip.AddrPortFrom(ip, 0).String()}
		}
	}
	return nil
}

// waits runs the request's waits and interactions, in this order:
// WaitSelector, Scroll, ClickSelector, WaitNetworkIdle.
func (p *page) waits(ctx context.Context) error {
	req := p.j.req
	if req.WaitSelector != "" {
		expr := fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(req.WaitSelector))
		if err := p.poll(ctx, 0, expr); err != nil {
			return fmt.Errorf("wait for selector %q: %w", req.WaitSelector, err)
		}
	}
	for i := 0; i < req.Scroll; i++ {
		h, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => {
			const e = document.scrollingElement || document.documentElement;
			const h = e.scrollHeight;
			window.scrollTo(0, h);
			return h;
		})()`))
		if err != nil {
			return fmt.Errorf("scroll: %w", err)
		}
		expr := fmt.Sprintf(`(document.scrollingElement || document.documentElement).scrollHeight > %v`, h)
		if err := p.poll(ctx, growWait, expr); errors.Is(err, errNotYet) {
			break // the page stopped growing
		} else if err != nil {
			return fmt.Errorf("scroll: %w", err)
		}
	}
	for i := 0; i < req.ClickTimes && req.ClickSelector != ""; i++ {
		clicked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`((sel) => {
			const el = document.querySelector(sel);
			if (!el) return false;
			const st = getComputedStyle(el);
			if (st.display === "none" || st.visibility === "hidden" || el.getClientRects().length === 0) return false;
			if (!window.__redcrawlObserver) {
				window.__redcrawlObserver = new MutationObserver(() => { window.__redcrawlChanged = true; });
				window.__redcrawlObserver.observe(document, {childList: true, subtree: true, attributes: true, characterData: true});
			}
			window.__redcrawlChanged = false;
			el.scrollIntoView({block: "center"});
			el.click();
			return true;
		})(%s)`, jsString(req.ClickSelector))))
		if err != nil {
			return fmt.Errorf("click %q: %w", req.ClickSelector, err)
		}
		if !clicked {
			break
		}
		if err := p.poll(ctx, growWait, `window.__redcrawlChanged === true`); errors.Is(err, errNotYet) {
			break // the click changed nothing
		} else if err != nil {
			return fmt.Errorf("click %q: %w", req.ClickSelector, err)
		}
	}
	if req.WaitNetworkIdle {
		if err := p.waitNetworkIdle(ctx); err != nil {
			return fmt.Errorf("wait for network idle: %w", err)
		}
	}
	return nil
}

// errNotYet is returned by poll when its limit passed.
var errNotYet = errors.New("condition not met in time")

// poll evaluates the boolean JavaScript expr until it is true, for at most
// limit (0: until ctx ends). An evaluation that fails (the document is
// being replaced) counts as false.
func (p *page) poll(ctx context.Context, limit time.Duration, expr string) error {
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return errNotYet
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
}

// waitNetworkIdle waits until no request has been in flight for
// networkIdle.
func (p *page) waitNetworkIdle(ctx context.Context) error {
	for {
		p.mu.Lock()
		quiet := len(p.inflight) == 0
		since := time.Since(p.lastNet)
		p.mu.Unlock()
		if quiet && since >= networkIdle {
			return nil
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// docState is what is read from the document.
type docState struct {
	Href string `json:"href"`
	HTML string `json:"html"`
}

// document reads the location and the outerHTML of the document element,
// cut in the page at max UTF-16 code units (at least max bytes of UTF-8),
// so a huge DOM does not cross the protocol whole.
func (p *page) document(ctx context.Context) (docState, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[docState](fmt.Sprintf(`(() => {
		const e = document.documentElement;
		let h = e ? e.outerHTML : "";
		if (h.length > %d) h = h.slice(0, %d);
		return {href: document.location.href, html: h};
	})()`, p.r.opt.MaxHTMLBytes+1, p.r.opt.MaxHTMLBytes+1)))
}

// capHTML returns s as bytes, cut to max bytes at a UTF-8 boundary.
func capHTML(s string, max int64) ([]byte, bool) {
	if int64(len(s)) <= max {
		return []byte(s), false
	}
	n := int(max)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return []byte(s[:n]), true
}

// headers converts the protocol's headers (several values joined by
// newlines) to an http.Header.
func headers(h network.Headers) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		for _, line := range strings.Split(s, "\n") {
			out.Add(k, line)
		}
	}
	return out
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// failure turns err into the render's error: the caller's cancellation
// stays a plain error, everything else is an *Error with its kind, and a
// timeout or navigation failure saves a snapshot when SnapshotDir is set.
func (p *page) failure(ctx, runCtx context.Context, b *browserProc, err error) error {
	p.mu.Lock()
	blocked := p.mainBlocked
	p.mu.Unlock()
	cause := context.Cause(runCtx)
	url := p.j.req.URL
	switch {
	case blocked != nil:
		return &Error{Kind: KindBlocked, Err: fmt.Errorf("render %s: %w", url, blocked)}
	case errors.Is(cause, errTabCrashed):
		return &Error{Kind: KindCrash, Err: fmt.Errorf("render %s: %w", url, errTabCrashed)}
	case !b.alive():
		return &Error{Kind: KindCrash, Err: fmt.Errorf("render %s: browser died: %w", url, err)}
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("render %s: %w", url, err)
	}
	kind := KindNavigation
	if errors.Is(cause, errTimeout) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		kind = KindTimeout
		err = fmt.Errorf("%w after %v: %w", errTimeout, p.j.req.Timeout, err)
	} else if errors.Is(err, chromedp.ErrTargetDetached) {
		kind = KindCrash
	}
	e := &Error{Kind: kind, Err: fmt.Errorf("render %s: %w", url, err)}
	var le *chromedp.LoadError
	if p.r.opt.SnapshotDir != "" && p.tab != nil && !errors.As(err, &le) {
		path, serr := p.snapshot()
		if serr != nil {
			p.r.log.Warn("render: save snapshot", "url", url, "err", serr)
		}
		e.Snapshot = path
	}
	return e
}

// snapshot saves the tab's current DOM in SnapshotDir and returns the
// file's path.
func (p *page) snapshot() (string, error) {
	ctx, cancel := context.WithTimeout(p.ctx, snapshotLimit)
	defer cancel()
	doc, err := p.document(ctx)
	if err != nil {
		return "", fmt.Errorf("read document: %w", err)
	}
	html, _ := capHTML(doc.HTML, p.r.opt.MaxHTMLBytes)
	f, err := os.CreateTemp(p.r.opt.SnapshotDir, "render-*.html")
	if err != nil {
		return "", fmt.Errorf("create snapshot: %w", err)
	}
	if _, err := f.Write(html); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write snapshot: %w", err)
	}
	return f.Name(), nil
}
