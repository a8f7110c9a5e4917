package collyslave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/slave/slaved"
)

var (
	// ErrOutside is the transport's error for a request that is none of
	// the crawl's pages: a Visit outside the callbacks, or a request of
	// another collector.
	ErrOutside = errors.New("not a page of the crawl: a collyslave collector fetches the frontier's tasks only (seed start URLs with master seed; a slave runs one collector)")

	// errRedirect is a redirect response as colly sees it: the slave
	// queues its target, and the OnError callbacks do not see it.
	errRedirect = errors.New("redirect: the slave queues the target as a task")

	// errStopping ends a page's colly request when the slave stops hard
	// while the page waits for the collector: the page is given back, and
	// the OnError callbacks do not see it.
	errStopping = errors.New("slave stopping: the page is given back")

	// errTooLarge is a body the slave cut at fetch.max_body_bytes: the
	// page fails as too_large, and the callbacks see an error.
	errTooLarge = errors.New("body larger than fetch.max_body_bytes: the page fails as too_large")
)

// fetch is the slave's OnFetch hook: it runs the task's page as the
// collector's request, which the transport fetches with the slave's fetch.
func (cs *runner) fetch(ctx context.Context, r *slaved.Request, fetch slaved.FetchFunc) (res *slaved.Response, err error) {
	if r.Sitemap {
		return fetch(ctx, nil) // the slave reads it
	}
	cs.adopt.Do(cs.takeOver)
	t := &task{req: r, fetch: fetch, depth: r.Depth + 1, ctx: ctx}
	creq, err := cs.request(r.URL.String(), t)
	if err != nil {
		return nil, err
	}
	cs.mu.Lock()
	cs.byReq[r] = t
	cs.mu.Unlock()
	defer func() {
		cs.unlockSerial(t)
		cs.mu.Lock()
		delete(cs.active, t)
		if q := cs.pending[t.collyURL]; len(q) > 0 { // the request never reached the transport
			for i, x := range q {
				if x == t {
					q = append(q[:i], q[i+1:]...)
					break
				}
			}
			if len(q) == 0 {
				delete(cs.pending, t.collyURL)
			} else {
				cs.pending[t.collyURL] = q
			}
		}
		if res == nil { // no page: the OnResponse hook will not run
			delete(cs.byReq, r)
		}
		cs.mu.Unlock()
	}()
	if !cs.lockSerial(t) {
		return nil, ctx.Err() // a hard stop: the lease is given back
	}
	cerr := creq.Do()
	cs.unlockSerial(t)
	switch {
	case !t.started:
		r.Skip("colly refused the request: " + errText(cerr))
		return nil, nil
	case !t.sent:
		r.Skip("aborted by a callback before the request was sent")
		return nil, nil
	case t.fetchErr != nil:
		var fe *slaved.FetchError
		if t.retry != "" && errors.As(t.fetchErr, &fe) && !fe.Retryable {
			return nil, &slaved.FetchError{Kind: fe.Kind, Retryable: true, Err: fe.Err, Snapshot: fe.Snapshot}
		}
		return nil, t.fetchErr
	}
	return t.res, nil
}

// request makes the colly request of a task's page: GET, at colly's depth
// of the task, with its context holding the task. Its headers are left
// unset, so that colly adds the collector's Headers and User-Agent as to
// any Visit.
func (cs *runner) request(u string, t *task) (*colly.Request, error) {
	b, err := json.Marshal(struct {
		URL    string
		Method string
		Depth  int
	}{u, http.MethodGet, t.depth})
	if err != nil {
		return nil, fmt.Errorf("collyslave: request %s: %w", u, err)
	}
	creq, err := cs.c.UnmarshalRequest(b)
	if err != nil {
		return nil, fmt.Errorf("collyslave: request %s: %w", u, err)
	}
	creq.Ctx.Put(ctxKey, t)
	return creq, nil
}

func errText(err error) string {
	if err == nil {
		return "no reason given"
	}
	return err.Error()
}

// lockSerial takes the collector for t's callbacks (a collector that was
// not Async), or gives up when the slave stops hard (false); unlockSerial
// gives it back, during the fetch and at the end.
func (cs *runner) lockSerial(t *task) bool {
	if cs.serial == nil || t.serial {
		return true
	}
	select {
	case cs.serial <- struct{}{}:
	case <-t.ctx.Done():
		return false
	}
	t.serial = true
	cs.mu.Lock()
	cs.current = t
	cs.mu.Unlock()
	return true
}

func (cs *runner) unlockSerial(t *task) {
	if !t.serial {
		return
	}
	cs.mu.Lock()
	cs.current = nil
	cs.mu.Unlock()
	t.serial = false
	<-cs.serial
}

// page is the slave's OnResponse hook: the links, items, retry and
// exceptions of the page's callbacks go to the page. The links the
// callbacks Visit replace those the slave's HTML handler found; a
// redirect keeps the target the slave found.
func (cs *runner) page(_ context.Context, p *slaved.Page) error {
	if p.Request == nil {
		return nil
	}
	cs.mu.Lock()
	t := cs.byReq[p.Request]
	delete(cs.byReq, p.Request)
	cs.mu.Unlock()
	if t == nil {
		return nil // a sitemap
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.notes {
		p.Exception(n)
	}
	if t.dropped > 0 {
		p.Exception(fmt.Sprintf("%d links or items past the caps of a page (%d links, %d items) dropped", t.dropped, maxLinks, maxItems))
	}
	if t.retry != "" {
		p.Retry(t.retry)
		return nil
	}
	if t.redirect {
		return nil
	}
	p.SkipLinks()
	for _, l := range t.links {
		p.AddLink(l)
	}
	for _, it := range t.items {
		p.AddItem(it.name, it.url, it.fields)
	}
	return nil
}

// transport is the collector's transport: a page's request goes out
// through the slave's fetch (its sessions, proxies, user agents, robots,
// DNS cache and body caps); any other request fails with ErrOutside.
type transport struct{ cs *runner }

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	cs := tr.cs
	u := req.URL.String()
	cs.mu.Lock()
	var t *task
	if q := cs.pending[u]; len(q) > 0 {
		t = q[0]
		if len(q) == 1 {
			delete(cs.pending, u)
		} else {
			cs.pending[u] = q[1:]
		}
	}
	cs.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("collyslave: %s: %w", u, ErrOutside)
	}
	t.sent = true
	cs.unlockSerial(t) // other pages' callbacks run during the fetch
	ctx, cancel := fetchContext(t.ctx, req.Context())
	res, err := t.fetch(ctx, forwardHeader(req.Header, cs.c.UserAgent))
	cancel()
	if !cs.lockSerial(t) {
		t.res, t.fetchErr = res, t.ctx.Err() // fetchHooked closes res
		return nil, errStopping
	}
	if cs.serial == nil {
		cs.mu.Lock()
		cs.active[t] = true
		cs.mu.Unlock()
	}
	t.res, t.fetchErr = res, err
	switch {
	case err != nil:
		return nil, err
	case res.Status >= 300 && res.Status < 400 && !res.Rendered:
		t.redirect = true
		return nil, errRedirect
	case res.Truncated():
		return nil, errTooLarge
	}
	major, minor, ok := http.ParseHTTPVersion(res.Proto)
	if !ok {
		major, minor = 1, 1
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", res.Status, http.StatusText(res.Status)), StatusCode: res.Status,
		Proto: fmt.Sprintf("HTTP/%d.%d", major, minor), ProtoMajor: major, ProtoMinor: minor, Header: res.Header.Clone(),
		Body: io.NopCloser(res.Body.NewReader()), ContentLength: res.Body.Size(), Request: req}, nil
}

// fetchContext is the context of a page's fetch: the task's, ended also
// by the colly request's (the collector's Context, its request timeout),
// with the request's HTTP trace (TraceHTTP).
func fetchContext(task, req context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(task)
	stop := context.AfterFunc(req, func() { cancel(context.Cause(req)) })
	end := func() { stop(); cancel(nil) }
	if d, ok := req.Deadline(); ok {
		var cancelD context.CancelFunc
		ctx, cancelD = context.WithDeadline(ctx, d)
		end = func() { stop(); cancelD(); cancel(nil) }
	}
	if tr := httptrace.ContextClientTrace(req); tr != nil {
		ctx = httptrace.WithClientTrace(ctx, tr)
	}
	return ctx, end
}

// forwardHeader is the request's header as the slave sends it: colly's
// defaults dropped (its User-Agent and Accept: */*), so that the slave's
// session user agent and Accept apply; Headers, the OnRequest callbacks'
// headers and the cookies of the collector's jar are kept.
func forwardHeader(h http.Header, collectorUA string) http.Header {
	out := h.Clone()
	if ua := out.Get("User-Agent"); ua == collectorUA || ua == collyUserAgent {
		out.Del("User-Agent")
	}
	if out.Get("Accept") == "*/*" {
		out.Del("Accept")
	}
	return out
}
