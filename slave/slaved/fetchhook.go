package slaved

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// FetchFunc sends a task's page request: through a session of the
// slave's pool (its proxy, user agent and cookie jar, the DNS cache, the
// dial guard, the body caps), or headless Chromium for a page a rule
// renders. header's fields are sent over the slave's own headers and the
// OnRequest hooks' of the same name (not for a rendered page). A hook
// calls it at most once per task: one request per politeness slot.
type FetchFunc func(ctx context.Context, header http.Header) (*Response, error)

// FetchHook is a hook around a page fetch (OnFetch).
type FetchHook func(ctx context.Context, r *Request, fetch FetchFunc) (*Response, error)

// errFetchTwice is a hook's second call of its FetchFunc.
var errFetchTwice = errors.New("fetch called twice for one task")

// OnFetch registers a hook around each page fetch, after robots.txt and
// the OnRequest hooks: it runs instead of the fetch and calls fetch itself,
// at most once, e.g. to let another library drive the request
// (slave/collyslave runs a colly collector this way). It returns the
// response for the slave to handle (OnResponse hooks, status, content
// handler, items, links): the one fetch returned, or one of its own.
//
// An error fetch returned (or a *FetchError of the hook's) goes to the
// slave as a fetch error: a retry or a failure by its kind. Any other
// error, or a panic, is the hook's: an exception of kind hook and a retry
// (a failure after a panic). r.Skip ends the task without a page, as in
// an OnRequest hook. A response fetch returned that the hook does not
// return is closed by the slave. A hook registered later runs inside the
// earlier ones.
func (s *Slave) OnFetch(fn FetchHook) {
	s.mustNotRun("OnFetch")
	s.hooks.fetch = append(s.hooks.fetch, fn)
}

// fetchHooked fetches a task's page through the OnFetch hooks (fetch
// itself without them), with the OnRequest hooks' request r (nil without
// hooks). ended is true when a hook decided the task (skip, hook error).
func (s *Slave) fetchHooked(ctx context.Context, c *frontier.Completion, r *Request, fetch FetchFunc) (res *Response, ended bool, err error) {
	var hdr http.Header
	if r != nil {
		hdr = r.Header
	}
	if len(s.hooks.fetch) == 0 {
		res, err := fetch(ctx, hdr)
		return res, false, err
	}
	var fetched []*Response // what fetch returned, to close what no hook kept
	var fetchErr error
	next := func(ctx context.Context, h http.Header) (*Response, error) {
		res, err := fetch(ctx, mergeHeader(hdr, h))
		if res != nil {
			fetched = append(fetched, res)
		}
		fetchErr = err
		return res, err
	}
	for _, fn := range slices.Backward(s.hooks.fetch) {
		inner, called := next, false
		next = func(ctx context.Context, h http.Header) (*Response, error) {
			return fn(ctx, r, func(ctx context.Context, h2 http.Header) (*Response, error) {
				if called {
					return nil, errFetchTwice
				}
				called = true
				return inner(ctx, mergeHeader(h, h2))
			})
		}
	}
	err = protect(func() error {
		var err error
		res, err = next(ctx, nil)
		return err
	})
	for _, f := range fetched {
		if f != res || err != nil || r.skip != "" {
			f.Close()
		}
	}
	if err != nil || r.skip != "" {
		if res != nil && !slices.Contains(fetched, res) {
			res.Close()
		}
		res = nil
	}
	var fe *FetchError
	var hp *hookPanic
	switch {
	case r.skip != "":
		s.skipped(c, "OnFetch", r.skip)
		return nil, true, nil
	case err != nil && ctx.Err() != nil:
		return nil, false, err // the slave gives the lease back
	case errors.As(err, &hp):
		s.hookFailed(c, "OnFetch", err)
		return nil, true, nil
	case err != nil && (fetchErr != nil && errors.Is(err, fetchErr) || errors.As(err, &fe)):
		return nil, false, err
	case err != nil:
		s.hookFailed(c, "OnFetch", err)
		return nil, true, nil
	case res == nil:
		s.hookFailed(c, "OnFetch", errors.New("no response and no error"))
		return nil, true, nil
	}
	return res, false, nil
}

// mergeHeader returns base with over's fields replacing base's of the
// same name; base itself when over is empty.
func mergeHeader(base, over http.Header) http.Header {
	if len(over) == 0 {
		return base
	}
	h := make(http.Header, len(base)+len(over))
	for k, v := range base {
		h[k] = v
	}
	for k, v := range over {
		h[http.CanonicalHeaderKey(k)] = v
	}
	return h
}
