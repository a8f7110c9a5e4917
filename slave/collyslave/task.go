package collyslave

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/slave/slaved"
)

// ctxKey is the key of a page's task in its colly context.
const ctxKey = "redcrawl.collyslave.task"

// maxLinks and maxItems bound what one page's callbacks can send (the
// slave's own link cap applies too); maxNotes the exceptions about it.
const (
	maxLinks = 20000
	maxItems = 20000
	maxNotes = 20
)

// item is an item a callback emitted.
type item struct {
	name, url string
	fields    map[string]any
}

// task is one page on its way through the collector: from the slave's
// OnFetch hook (runner.fetch) to its OnResponse hook (runner.page).
type task struct {
	req   *slaved.Request
	ctx   context.Context // the slave's, for the fetch
	fetch slaved.FetchFunc
	depth int // colly's depth of the page's request: the task's depth + 1

	// set in the goroutine that runs the page's colly request
	collyURL string // the request's URL as colly wrote it
	started  bool   // the OnRequest callbacks ran on the page's request
	sent     bool   // the request reached the transport
	serial   bool   // holds runner.serial while colly runs (not while fetching)
	res      *slaved.Response
	fetchErr error

	mu       sync.Mutex // what callbacks send, from any goroutine
	links    []string
	seen     map[string]bool
	items    []item
	notes    []string
	dropped  int // links and items over the caps
	retry    string
	redirect bool // a 3xx: the slave schedules its target
}

// taskOf returns the task a colly context belongs to, or nil.
func taskOf(ctx *colly.Context) *task {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.GetAny(ctxKey).(*task)
	return t
}

func (t *task) addLink(u string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[u] {
		return
	}
	if len(t.links) >= maxLinks {
		t.dropped++
		return
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[u] = true
	t.links = append(t.links, u)
}

func (t *task) addItem(it item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.items) >= maxItems {
		t.dropped++
		return
	}
	t.items = append(t.items, it)
}

func (t *task) note(format string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.notes) < maxNotes {
		t.notes = append(t.notes, fmt.Sprintf(format, a...))
	}
}

func (t *task) askRetry(why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retry = why
}

// runner runs a collector's requests for the slave's tasks.
type runner struct {
	c  *colly.Collector
	in *internals
	// serial is held while a page's callbacks run, for a collector that
	// was not Async: standalone, its callbacks never run at once
	serial  chan struct{} // a lock of one; nil for an Async collector
	current *task         // the task holding serial

	adopt     sync.Once
	installed bool
	userReq   []colly.RequestCallback
	userErr   []colly.ErrorCallback

	mu      sync.Mutex
	byReq   map[*slaved.Request]*task // from OnFetch to OnResponse
	pending map[string][]*task        // by colly URL: from OnRequest to the transport
	active  map[*task]bool            // tasks whose callbacks run (Async)
}

func newRunner(c *colly.Collector, in *internals) *runner {
	cs := &runner{c: c, in: in, byReq: map[*slaved.Request]*task{}, pending: map[string][]*task{},
		active: map[*task]bool{}}
	if !c.Async {
		cs.serial = make(chan struct{}, 1)
	}
	cs.takeOver()
	return cs
}

// takeOver wraps the collector's OnRequest and OnError callbacks in the
// runner's: at New those registered until then, and on the first page
// those registered since (after the runner's own, first in the lists).
// Colly runs every OnRequest callback even after one aborted the request:
// only a single callback of the runner's keeps a callback's Visit from
// running the user's OnRequest callbacks for a request made elsewhere.
func (cs *runner) takeOver() {
	req, errs := *cs.in.onRequest, *cs.in.onError
	if cs.installed {
		req, errs = req[1:], errs[1:]
	}
	cs.userReq = append(cs.userReq, req...)
	cs.userErr = append(cs.userErr, errs...)
	*cs.in.onRequest = []colly.RequestCallback{cs.onRequest}
	*cs.in.onError = []colly.ErrorCallback{cs.onError}
	cs.installed = true
}

// onRequest is the collector's one OnRequest callback. The page's own
// request runs the user's callbacks; a request a callback makes (Visit,
// Retry, Post...) becomes a link, a retry or an exception of its page,
// aborted before the user's callbacks see it; a request outside every
// page runs them and fails in the transport.
func (cs *runner) onRequest(r *colly.Request) {
	t := taskOf(r.Ctx)
	if t != nil && !t.started {
		t.started, t.collyURL = true, r.URL.String()
		cs.runUserRequest(r)
		if !r.IsAbort() {
			cs.mu.Lock()
			cs.pending[t.collyURL] = append(cs.pending[t.collyURL], t)
			cs.mu.Unlock()
		}
		return
	}
	var ts []*task
	switch {
	case t != nil:
		ts = []*task{t}
	default:
		ts = cs.callers() // c.Visit from a callback: a fresh context
	}
	if len(ts) == 0 {
		cs.runUserRequest(r) // outside every page: the transport refuses it
		return
	}
	r.Abort()
	if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
		return // mailto:, javascript:...: nothing to fetch, as for the slave's own links
	}
	for _, t := range ts {
		switch {
		case r.Method != http.MethodGet:
			t.note("%s %s from a callback: a task is a GET of a URL; the request was not made", r.Method, r.URL)
		case t == taskOf(r.Ctx) && r.URL.String() == t.collyURL && r.Depth == t.depth:
			t.askRetry("retry asked by a callback (Request.Retry)")
		default:
			t.addLink(r.URL.String())
		}
	}
}

func (cs *runner) runUserRequest(r *colly.Request) {
	for _, f := range cs.userReq {
		f(r)
	}
}

// callers are the tasks a request with no page context may come from:
// the page whose callbacks run (one at a time), or, for an Async
// collector, every page whose callbacks run now (its links go with each:
// the frontier dedups, and none is lost).
func (cs *runner) callers() []*task {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.serial != nil {
		if cs.current != nil {
			return []*task{cs.current}
		}
		return nil
	}
	ts := make([]*task, 0, len(cs.active))
	for t := range cs.active {
		ts = append(ts, t)
	}
	return ts
}

// onError is the collector's one OnError callback: the user's, but not
// for a redirect the slave follows through the frontier.
func (cs *runner) onError(r *colly.Response, err error) {
	if errors.Is(err, errRedirect) || errors.Is(err, errStopping) {
		return
	}
	for _, f := range cs.userErr {
		f(r, err)
	}
}
