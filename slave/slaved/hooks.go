package slaved

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// The hooks of a slave written in Go: a program imports this package,
// builds a Slave with New, registers hooks and calls Run.
//
//	OnRequest   before each page fetch: add headers, skip the task
//	OnFetch     around each page fetch: drive the request (fetchhook.go)
//	OnResponse  after each response: read the body, add links and items,
//	            retry or fail the task, drop the links found
//	OnItem      on each item (from rule files or AddItem): transform,
//	            drop or send it elsewhere; hooks run in registration order
//	Handlers    a content handler per media type (handlers.go)
//
// Hooks are registered before Run (registering later panics). They run in
// the slave's fetch workers, up to slave.concurrency at once: a hook must
// be safe for concurrent use. Their ctx ends at a hard stop (at most
// slave.shutdown_timeout after Run's ctx). An error a hook returns, or a
// panic, is recorded as an exception (kind hook, or item_pipeline for
// OnItem) and never stops the slave. robots.txt requests do not go through
// the hooks.

// Request is a page request about to be sent (OnRequest).
type Request struct {
	// URL is the task's URL; hooks must not modify it.
	URL     *url.URL
	Depth   int // link depth from a seed
	Attempt int // attempts before this one
	// Header holds extra request headers (Authorization, a signature,
	// Cookie...); they replace the slave's own headers of the same name.
	// They are not sent for a page rendered in a browser (Rendered).
	Header   http.Header
	Rendered bool // the page will be rendered in headless Chromium
	// Sitemap says the task is a sitemap (crawl.sitemaps): the slave reads
	// the URLs it lists.
	Sitemap bool
	skip    string
}

// Skip ends the task without fetching it: it is done, with an exception
// of kind hook giving the reason; later OnRequest hooks do not run.
func (r *Request) Skip(reason string) {
	if reason == "" {
		reason = "skipped"
	}
	r.skip = reason
}

// Page is a response on its way through the OnResponse hooks, whatever
// its status (redirects and errors included). The slave handles it after
// the hooks (status, content handler, rule items, links) unless a hook
// called Retry or Fail.
type Page struct {
	URL      *url.URL // the task's URL; hooks must not modify it
	Depth    int
	Status   int
	Header   http.Header
	Rendered bool // rendered in headless Chromium: Body is the DOM
	// Request is the request this page answers, as the OnRequest and
	// OnFetch hooks saw it; nil when the slave has neither.
	Request *Request

	res       *Response
	canon     resolver
	links     []*url.URL
	linkErrs  []string
	items     []*Item
	notes     []string
	skipLinks bool
	nofollow  bool // the page says nofollow (handle): its links are not followed
	retry     string
	fail      string
}

// resolver makes a link absolute and canonical (urlx.Canonicalizer).
type resolver interface {
	Resolve(base *url.URL, ref string) (*url.URL, error)
}

// Body returns the response body, decompressed and capped at
// fetch.max_body_bytes (BodyTruncated says it was cut). The slice must not
// be modified or kept after the hook returns.
func (p *Page) Body() ([]byte, error) { return p.res.Body.Bytes() }

// BodyTruncated reports that the body was longer than fetch.max_body_bytes.
func (p *Page) BodyTruncated() bool { return p.res.Truncated() }

// AddLink adds a link to follow, resolved against the page's URL. It goes
// through the crawl's scope, its rule sets' scopes and the trap filters
// like any link found on the page, at the next depth, and is not followed
// when the page says nofollow (a robots meta tag, X-Robots-Tag).
func (p *Page) AddLink(ref string) {
	u, err := p.canon.Resolve(p.URL, ref)
	if err != nil {
		p.linkErrs = append(p.linkErrs, fmt.Sprintf("link %q: %v", ref, err))
		return
	}
	p.links = append(p.links, u)
}

// AddItem adds an item: it goes through the OnItem hooks, then to MySQL's
// items table (unless Options.SkipItemStore), where one row is kept per
// (item name, URL) and a newer fetch replaces it. itemURL names the item,
// e.g. the URL of a product listed on the page; "" is the page's URL.
func (p *Page) AddItem(name, itemURL string, fields map[string]any) {
	if itemURL == "" {
		itemURL = p.URL.String()
	}
	p.items = append(p.items, &Item{Name: name, URL: itemURL, PageURL: p.URL.String(), Fields: fields})
}

// Exception records an exception of kind hook about the page (a problem
// of the hook's own, e.g. something it could not do); the page is kept.
func (p *Page) Exception(msg string) { p.notes = append(p.notes, nonEmpty(msg, "exception")) }

// SkipLinks drops the links the content handler finds on the page and its
// canonical URL (links added with AddLink, a redirect's target and the
// sitemaps of robots.txt are kept).
func (p *Page) SkipLinks() { p.skipLinks = true }

// Retry gives the task back to be fetched again later (with the slave's
// backoff; it counts as an attempt): nothing of this response is kept.
func (p *Page) Retry(reason string) { p.retry = nonEmpty(reason, "retry asked by a hook") }

// Fail ends the task as failed: nothing of this response is kept.
func (p *Page) Fail(reason string) { p.fail = nonEmpty(reason, "failed by a hook") }

// Item is one item on its way through the OnItem hooks: from a rule
// file's item rule (Rule is the rule set) or from Page.AddItem (Rule is
// empty). Hooks may change Fields and URL.
type Item struct {
	Name    string // item rule name, or AddItem's name
	Rule    string // rule set name; "" for items added by code
	URL     string // the item's key with Name and Rule in MySQL; by default the page's URL
	PageURL string // the page it came from
	Fields  map[string]any
}

// ErrDropItem, returned by an OnItem hook, drops the item quietly: later
// hooks do not see it and it is not stored. Any other error drops it too,
// with an exception of kind item_pipeline.
var ErrDropItem = errors.New("drop item")

// Hook exception kinds.
const (
	// KindHook: an OnRequest or OnResponse hook returned an error,
	// panicked, skipped, retried or failed a task.
	KindHook = events.KindHook
	// KindItemPipeline: an OnItem hook returned an error or panicked; the
	// item was dropped.
	KindItemPipeline = events.KindItemPipeline
)

type hooks struct {
	request  []func(context.Context, *Request) error
	fetch    []FetchHook
	response []func(context.Context, *Page) error
	item     []func(context.Context, *Item) error
}

// OnRequest registers a hook run before each page fetch (not robots.txt).
// An error (or panic) retries the task later, with an exception.
func (s *Slave) OnRequest(fn func(ctx context.Context, r *Request) error) {
	s.mustNotRun("OnRequest")
	s.hooks.request = append(s.hooks.request, fn)
}

// OnResponse registers a hook run after each response, before the slave
// handles it. An error (or panic) retries the task later, with an
// exception.
func (s *Slave) OnResponse(fn func(ctx context.Context, p *Page) error) {
	s.mustNotRun("OnResponse")
	s.hooks.response = append(s.hooks.response, fn)
}

// OnItem registers a step of the item pipeline: a transform (changes
// it.Fields), a filter (returns ErrDropItem) or a sink (sends the item to
// Kafka, S3, a file). Items go through the steps in registration order
// before the page's completion is sent, so a sink has seen every item of
// a page before it counts as done; a page fetched again (a lost lease, a
// recrawl) sends its items again: sinks should key them by Name and URL.
func (s *Slave) OnItem(fn func(ctx context.Context, it *Item) error) {
	s.mustNotRun("OnItem")
	s.hooks.item = append(s.hooks.item, fn)
}

func (s *Slave) mustNotRun(what string) {
	if s.running.Load() {
		panic("slaved: " + what + " called after Run, FetchOne or Parse started")
	}
}

// protect runs a hook, turning a panic into an error.
func protect(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := string(debug.Stack())
			if len(stack) > 2000 {
				stack = stack[:2000]
			}
			err = &hookPanic{v: v, stack: stack}
		}
	}()
	return fn()
}

type hookPanic struct {
	v     any
	stack string
}

func (p *hookPanic) Error() string { return fmt.Sprintf("panic: %v\n%s", p.v, p.stack) }

// requestHooks runs the OnRequest hooks of a task. It returns the
// request the hooks made (nil when the slave has no OnRequest or OnFetch
// hook), or a completion when a hook ended the task.
func (s *Slave) requestHooks(ctx context.Context, c *frontier.Completion, u *url.URL, render bool) (*Request, bool) {
	if len(s.hooks.request) == 0 && len(s.hooks.fetch) == 0 {
		return nil, false
	}
	cu := *u
	r := &Request{URL: &cu, Depth: c.Lease.Depth, Attempt: c.Lease.Attempt, Header: http.Header{}, Rendered: render,
		Sitemap: c.Lease.Sitemap > 0}
	for _, fn := range s.hooks.request {
		if err := protect(func() error { return fn(ctx, r) }); err != nil {
			s.hookFailed(c, "OnRequest", err)
			return nil, true
		}
		if r.skip != "" {
			s.skipped(c, "OnRequest", r.skip)
			return nil, true
		}
	}
	return r, false
}

// skipped ends a task a hook skipped: done, with an exception.
func (s *Slave) skipped(c *frontier.Completion, which, reason string) {
	s.exception(c, KindHook, 0, which+": skipped: "+reason)
	c.Outcome, c.Reason = frontier.Done, "skipped by a hook"
}

// hookFailed records a hook's error and retries the task, or fails it
// after a panic (a bug is not fixed by fetching again).
func (s *Slave) hookFailed(c *frontier.Completion, which string, err error) {
	s.exception(c, KindHook, 0, which+": "+err.Error())
	var hp *hookPanic
	if errors.As(err, &hp) {
		c.Outcome, c.Reason = frontier.Fail, "hook panicked"
		return
	}
	c.Outcome, c.Reason, c.RetryIn = frontier.Retry, "hook error", s.backoff(c.Lease.Attempt, 0)
}

// responseHooks runs the OnResponse hooks on a response. done is true
// when the task is decided (retry, fail, hook error) and the slave must
// not handle the response; otherwise p (nil without hooks) carries the
// hooks' links and items for finishResponse.
func (s *Slave) responseHooks(ctx context.Context, c *frontier.Completion, u *url.URL, r *Request, res *Response) (p *Page, done bool) {
	if len(s.hooks.response) == 0 {
		return nil, false
	}
	p = &Page{URL: u, Depth: c.Lease.Depth, Status: res.Status, Header: res.Header, Rendered: res.Rendered,
		Request: r, res: res, canon: s.canon}
	for _, fn := range s.hooks.response {
		if err := protect(func() error { return fn(ctx, p) }); err != nil {
			s.hookFailed(c, "OnResponse", err)
			return nil, true
		}
		switch {
		case p.retry != "":
			s.exception(c, KindHook, res.Status, "OnResponse: retry: "+p.retry)
			c.Outcome, c.Reason, c.RetryIn = frontier.Retry, "retried by a hook", s.backoff(c.Lease.Attempt, 0)
			return nil, true
		case p.fail != "":
			s.exception(c, KindHook, res.Status, "OnResponse: fail: "+p.fail)
			c.Outcome, c.Reason = frontier.Fail, "failed by a hook"
			return nil, true
		}
	}
	return p, false
}

// finishResponse adds what the OnResponse hooks asked for to a
// completion the slave built (handle, which left out the handler's links
// after SkipLinks): their exceptions, links and items, the items through
// the item pipeline.
func (s *Slave) finishResponse(ctx context.Context, c *frontier.Completion, p *Page) {
	if p == nil {
		return
	}
	for _, msg := range p.notes {
		s.exception(c, KindHook, p.Status, "OnResponse: "+msg)
	}
	if c.Outcome != frontier.Done {
		return
	}
	for _, msg := range p.linkErrs {
		s.exception(c, KindHook, p.Status, "OnResponse: "+msg)
	}
	if len(p.links) > 0 && !p.nofollow {
		s.addLinks(c, p.links, c.Lease.Depth+1, "added by a hook")
	}
	if len(p.items) > 0 {
		now := s.now().UnixMilli()
		for _, it := range p.items {
			s.emitItem(ctx, c, it, now)
		}
	}
}

// emitItem runs an item through the OnItem hooks and adds its record to
// the completion, unless a hook dropped it or Options.SkipItemStore.
func (s *Slave) emitItem(ctx context.Context, c *frontier.Completion, it *Item, fetchedAt int64) {
	for _, fn := range s.hooks.item {
		err := protect(func() error { return fn(ctx, it) })
		if errors.Is(err, ErrDropItem) {
			return
		}
		if err != nil {
			where := "item " + it.Name
			if it.Rule != "" {
				where = "rule " + it.Rule + " " + where
			}
			s.exception(c, KindItemPipeline, 0, where+": "+err.Error())
			return
		}
	}
	if s.opt.SkipItemStore {
		return
	}
	data, err := json.Marshal(it.Fields)
	if err != nil {
		s.exception(c, KindItemPipeline, 0, fmt.Sprintf("item %s: encode: %v", it.Name, err))
		return
	}
	s.addEvent(c, &events.Item{Crawl: s.cfg.Crawl.Name, Rule: it.Rule, Item: it.Name, URL: it.URL,
		Data: data, Slave: s.id, FetchedAt: fetchedAt})
}

func nonEmpty(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
