package slaved

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/slave/banker"
	"github.com/redcrawl/redcrawl/slave/content"
	"github.com/redcrawl/redcrawl/slave/render"
)

// Resource kinds of the slave's governor.
const (
	resConns = "conns" // connection slots: slave.concurrency
	resTabs  = "tabs"  // browser tabs: render.tabs
	resMem   = "mem"   // bytes of bodies and rendered pages in memory: render.memory_bytes
)

// newGovernor builds the banker's-algorithm governor that grants each
// fetch and render worker its connection slot, browser tab and memory
// (after CN104462195A): a worker declares its maximum claim, acquires step
// by step, and a request is granted only when a safe sequence exists, so
// render workers holding tabs and fetch workers holding connections can
// never deadlock each other.
func newGovernor(cfgConc, tabs int, mem int64) (*banker.Governor, error) {
	return banker.New(banker.Vector{resConns: int64(cfgConc), resTabs: int64(tabs), resMem: mem}, banker.Options{})
}

// memFetch and memRender are the memory a fetch and a render worker may
// hold: a body in memory (larger ones spill to disk), a rendered DOM.
func (s *Slave) memFetch() int64 { return max(s.cfg.Fetch.MemoryBodyBytes, 4096) }
func (s *Slave) memRender() int64 {
	return min(s.cfg.Fetch.MaxBodyBytes, s.cfg.Render.MemoryBytes/int64(s.cfg.Render.Tabs))
}

// acquire registers a worker with the governor and takes its resources in
// the order the work needs them (a render worker: its tab, then a
// connection, then memory for the DOM). release gives everything back.
func (s *Slave) acquire(ctx context.Context, renderTask bool) (release func(), err error) {
	claim := banker.Vector{resConns: 1, resMem: s.memFetch()}
	steps := []banker.Vector{{resConns: 1}, {resMem: s.memFetch()}}
	if renderTask {
		claim = banker.Vector{resConns: 1, resTabs: 1, resMem: s.memRender()}
		steps = []banker.Vector{{resTabs: 1}, {resConns: 1}, {resMem: s.memRender()}}
	}
	w, err := s.governor.Register(claim)
	if err != nil {
		return nil, fmt.Errorf("resource governor: %w", err)
	}
	for _, step := range steps {
		if err := w.Acquire(ctx, step); err != nil {
			w.Unregister()
			return nil, err
		}
	}
	return func() { w.Unregister() }, nil
}

// checkRenderer decides whether this slave can render: rendering is on
// and Chromium is there. Without it (a Raspberry Pi) the slave claims no
// render task. The browser itself starts with the first render task, so a
// crawl without dynamic pages never pays for it.
func (s *Slave) checkRenderer() {
	if !s.cfg.Render.Enabled {
		return
	}
	if _, err := os.Stat(s.cfg.Render.ChromePath); err != nil {
		s.log.Warn("rendering off: no Chromium", "chrome_path", s.cfg.Render.ChromePath, "err", err)
		return
	}
	s.canRender.Store(true)
}

// rendererFor returns the running browser, starting it on first use. If
// Chromium cannot start, the slave stops claiming render tasks.
func (s *Slave) rendererFor(ctx context.Context) (*render.Renderer, error) {
	s.renderMu.Lock()
	defer s.renderMu.Unlock()
	if s.renderer != nil {
		return s.renderer, nil
	}
	opt := render.Options{ChromePath: s.cfg.Render.ChromePath, Tabs: s.cfg.Render.Tabs,
		AllowPrivateNetworks: s.cfg.Fetch.AllowPrivateNetworks, Logger: s.log,
		MaxHTMLBytes: s.memRender(), SnapshotDir: s.cfg.Render.SnapshotDir}
	if s.dns != nil {
		opt.Lookup = s.dns.LookupIP
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := render.New(startCtx, opt)
	if err != nil {
		if ctx.Err() == nil {
			s.canRender.Store(false)
			s.log.Error("rendering off: Chromium did not start; no more render tasks are claimed", "err", err)
		}
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	s.renderer = r
	s.log.Info("browser started", "tabs", s.cfg.Render.Tabs)
	return r, nil
}

// closeRenderer stops the browser, if it started.
func (s *Slave) closeRenderer() {
	s.renderMu.Lock()
	defer s.renderMu.Unlock()
	if s.renderer != nil {
		if err := s.renderer.Close(); err != nil {
			s.log.Warn("close browser", "err", err)
		}
		s.renderer = nil
	}
}

// renderFetch renders a dynamic page in headless Chromium through the
// session of its rule set (proxy, user agent; nil: none), with its
// headers, and returns the rendered DOM
// as a Response, so the rest of the pipeline (WARC, handlers, items,
// dedup, links) treats it like a static page.
func (s *Slave) renderFetch(ctx context.Context, l frontier.Lease, rs *rules.RuleSet, rr *rules.Render) (*Response, error) {
	u, err := url.Parse(l.URL)
	if err != nil {
		return nil, &FetchError{Kind: events.KindParse, Err: err}
	}
	req := render.Request{URL: l.URL, Timeout: rr.Timeout, WaitSelector: rr.WaitSelector,
		WaitNetworkIdle: rr.WaitNetworkIdle, Scroll: rr.Scroll, Block: rr.Block}
	fr := fetchRequest(l.URL, rs) // rs may be nil (Parse's DefaultRender)
	req.Header = fr.Header
	if rr.Click != nil {
		req.ClickSelector, req.ClickTimes = rr.Click.Selector, rr.Click.Times
	}
	proxyLabel := events.ProxyDirect
	if hf, ok := s.fetcher.(*httpFetcher); ok {
		_, sess, err := hf.session(ctx, u.Host, fr.Session, fr.UserAgents)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, &FetchError{Kind: events.KindProxy, Err: err}
		}
		if pu := sess.ProxyURL(); pu != nil {
			req.Proxy = pu.String()
		}
		req.UserAgent, proxyLabel = sess.UserAgent(), sess.Proxy()
	}
	r, err := s.rendererFor(ctx)
	if err != nil {
		return nil, &FetchError{Kind: events.KindRender, Retryable: true, Err: err}
	}
	res, err := r.Render(ctx, req)
	if err != nil {
		var re *render.Error
		if errors.As(err, &re) {
			kind := map[string]string{render.KindTimeout: events.KindRenderTimeout, render.KindCrash: events.KindRenderCrash,
				render.KindNavigation: events.KindRenderNavigation, render.KindBlocked: events.KindBlocked}[re.Kind]
			if kind == "" {
				kind = events.KindRender
			}
			return nil, &FetchError{Kind: kind, Retryable: kind != events.KindBlocked, Err: err, Snapshot: re.Snapshot}
		}
		return nil, &FetchError{Kind: events.KindRender, Retryable: true, Err: err}
	}
	body, err := content.ReadBody(bytes.NewReader(res.HTML), content.BodyOptions{MemLimit: int(s.cfg.Fetch.MemoryBodyBytes),
		MaxBytes: s.cfg.Fetch.MaxBodyBytes, TempDir: s.cfg.Fetch.TempDir})
	if err != nil {
		return nil, &FetchError{Kind: events.KindRender, Err: err}
	}
	h := res.Header.Clone()
	if h == nil {
		h = make(map[string][]string)
	}
	// the DOM is serialised as UTF-8 whatever the page was sent in
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Del("Content-Encoding")
	h.Del("Content-Length")
	status := res.Status
	if status == 0 {
		status = 200
	}
	return &Response{Status: status, Proto: "HTTP/1.1", Header: h, Body: body, Duration: res.Duration,
		Proxy: proxyLabel, Request: requestBlock(&http.Request{Method: http.MethodGet, URL: u, Header: mergeHeader(http.Header{}, req.Header)}, req.UserAgent),
		Rendered: true, FinalURL: res.FinalURL}, nil
}
