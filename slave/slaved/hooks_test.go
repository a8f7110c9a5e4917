package slaved_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestHooks runs one page through the hooks in each way a hook can end
// it, and checks the outcome, the exceptions, the items stored and sunk
// and the headers the site received.
func TestHooks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var mu sync.Mutex
	var seen []string // Accept and X-Sig headers the site received
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Accept")+"|"+r.Header.Get("X-Sig"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/next">next</a>`)
	}))
	defer site.Close()

	addItem := func(_ context.Context, p *slaved.Page) error {
		p.AddItem("thing", "", map[string]any{"n": 1})
		return nil
	}
	type hooks struct {
		req   func(context.Context, *slaved.Request) error
		fetch slaved.FetchHook
		res   func(context.Context, *slaved.Page) error
		item  func(context.Context, *slaved.Item) error
	}
	// the site saw one request with the slave's Accept and no X-Sig
	plain := []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8|"}
	type want struct {
		Outcome    string
		Exceptions []string // kind: message up to its first newline
		Items      int      // stored
		Sunk       int
		Links      []string
		Seen       []string
	}
	tests := []struct {
		name      string
		h         hooks
		skipStore bool
		want      want
	}{
		{"no hooks", hooks{}, false,
			want{Outcome: "done", Links: []string{"/next"}, Seen: plain}},
		{"headers replace the slave's", hooks{req: func(_ context.Context, r *slaved.Request) error {
			r.Header.Set("accept", "application/json")
			r.Header.Set("X-Sig", r.URL.Path)
			return nil
		}}, false, want{Outcome: "done", Links: []string{"/next"}, Seen: []string{"application/json|/p"}}},
		{"request error retries", hooks{req: func(context.Context, *slaved.Request) error { return errors.New("login failed") }}, false,
			want{Outcome: "retry", Exceptions: []string{"hook: OnRequest: login failed"}}},
		{"request panic fails", hooks{req: func(context.Context, *slaved.Request) error { panic("oops") }}, false,
			want{Outcome: "fail", Exceptions: []string{"hook: OnRequest: panic: oops"}}},
		{"fail", hooks{res: func(_ context.Context, p *slaved.Page) error { p.Fail("bad page"); return nil }}, false,
			want{Outcome: "fail", Exceptions: []string{"hook: OnResponse: fail: bad page"}, Seen: plain}},
		{"links replaced", hooks{res: func(_ context.Context, p *slaved.Page) error {
			p.SkipLinks()
			p.AddLink("other?x=1")
			p.AddLink("http://elsewhere.test/") // out of scope
			return nil
		}}, false, want{Outcome: "done", Links: []string{"/other?x=1"}, Seen: plain}},
		{"item stored and sunk", hooks{res: addItem, item: func(context.Context, *slaved.Item) error { return nil }}, false,
			want{Outcome: "done", Items: 1, Sunk: 1, Links: []string{"/next"}, Seen: plain}},
		{"item only sunk", hooks{res: addItem, item: func(context.Context, *slaved.Item) error { return nil }}, true,
			want{Outcome: "done", Sunk: 1, Links: []string{"/next"}, Seen: plain}},
		{"item dropped", hooks{res: addItem, item: func(context.Context, *slaved.Item) error { return slaved.ErrDropItem }}, false,
			want{Outcome: "done", Links: []string{"/next"}, Seen: plain}},
		{"item error", hooks{res: addItem, item: func(context.Context, *slaved.Item) error { return errors.New("kafka down") }}, false,
			want{Outcome: "done", Exceptions: []string{"item_pipeline: item thing: kafka down"}, Links: []string{"/next"}, Seen: plain}},
		{"fetch hook's headers", hooks{fetch: func(ctx context.Context, r *slaved.Request, fetch slaved.FetchFunc) (*slaved.Response, error) {
			return fetch(ctx, http.Header{"X-Sig": {"fetch " + r.URL.Path}})
		}}, false, want{Outcome: "done", Links: []string{"/next"}, Seen: []string{plain[0] + "fetch /p"}}},
		{"fetch hook skips", hooks{fetch: func(_ context.Context, r *slaved.Request, _ slaved.FetchFunc) (*slaved.Response, error) {
			r.Skip("not today")
			return nil, nil
		}}, false, want{Outcome: "done", Exceptions: []string{"hook: OnFetch: skipped: not today"}}},
		{"fetch hook skips after the fetch", hooks{fetch: func(ctx context.Context, r *slaved.Request, fetch slaved.FetchFunc) (*slaved.Response, error) {
			res, err := fetch(ctx, nil)
			r.Skip("seen enough")
			return res, err
		}}, false, want{Outcome: "done", Exceptions: []string{"hook: OnFetch: skipped: seen enough"}, Seen: plain}},
		{"fetch hook error retries", hooks{fetch: func(context.Context, *slaved.Request, slaved.FetchFunc) (*slaved.Response, error) {
			return nil, errors.New("no session")
		}}, false, want{Outcome: "retry", Exceptions: []string{"hook: OnFetch: no session"}}},
		{"fetch hook panic fails", hooks{fetch: func(context.Context, *slaved.Request, slaved.FetchFunc) (*slaved.Response, error) {
			panic("oops")
		}}, false, want{Outcome: "fail", Exceptions: []string{"hook: OnFetch: panic: oops"}}},
		{"fetch hook's fetch error", hooks{fetch: func(context.Context, *slaved.Request, slaved.FetchFunc) (*slaved.Response, error) {
			return nil, &slaved.FetchError{Kind: "timeout", Retryable: true, Err: errors.New("too slow")}
		}}, false, want{Outcome: "retry", Exceptions: []string{"timeout: too slow"}}},
		{"fetch twice", hooks{fetch: func(ctx context.Context, _ *slaved.Request, fetch slaved.FetchFunc) (*slaved.Response, error) {
			if res, err := fetch(ctx, nil); err != nil {
				return res, err
			}
			return fetch(ctx, nil)
		}}, false, want{Outcome: "retry", Exceptions: []string{"hook: OnFetch: fetch called twice for one task"}, Seen: plain}},
		{"page exception and request", hooks{
			fetch: func(ctx context.Context, r *slaved.Request, fetch slaved.FetchFunc) (*slaved.Response, error) {
				r.Header.Set("X-Sig", "kept")
				return fetch(ctx, nil)
			},
			res: func(_ context.Context, p *slaved.Page) error {
				p.Exception("a note from " + p.Request.Header.Get("X-Sig"))
				return nil
			}}, false, want{Outcome: "done", Exceptions: []string{"hook: OnResponse: a note from kept"}, Links: []string{"/next"},
			Seen: []string{plain[0] + "kept"}}},
		{"item panic", hooks{res: addItem, item: func(context.Context, *slaved.Item) error { panic("nil sink") }}, false,
			want{Outcome: "done", Exceptions: []string{"item_pipeline: item thing: panic: nil sink"}, Links: []string{"/next"}, Seen: plain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			cfg := config.Default()
			cfg.Crawl.AllowHosts = []string{"127.0.0.1"}
			cfg.Fetch.AllowPrivateNetworks = true
			s, err := slaved.New(&cfg, slaved.Options{ID: "hooks", Logger: slog.New(slog.DiscardHandler), SkipItemStore: tt.skipStore})
			if err != nil {
				t.Fatal(err)
			}
			sunk := 0
			if tt.h.req != nil {
				s.OnRequest(tt.h.req)
			} else {
				// a hook that adds nothing still runs: the request has
				// the slave's Accept
				s.OnRequest(func(context.Context, *slaved.Request) error { return nil })
			}
			if tt.h.fetch != nil {
				s.OnFetch(tt.h.fetch)
			}
			if tt.h.res != nil {
				s.OnResponse(tt.h.res)
			}
			if tt.h.item != nil {
				s.OnItem(tt.h.item)
				s.OnItem(func(context.Context, *slaved.Item) error { sunk++; return nil })
			}
			res, err := s.FetchOne(context.Background(), site.URL+"/p")
			if err != nil {
				t.Fatal(err)
			}
			got := want{Outcome: res.Outcome, Items: len(res.Items), Sunk: sunk}
			for _, e := range res.Exceptions {
				msg, _, _ := strings.Cut(e.Message, "\n")
				got.Exceptions = append(got.Exceptions, e.Kind+": "+msg)
			}
			for _, l := range res.Links {
				got.Links = append(got.Links, strings.TrimPrefix(l, site.URL))
			}
			mu.Lock()
			got.Seen = seen
			mu.Unlock()
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestHookAfterRunPanics: hooks are registered before the slave starts.
func TestHookAfterRunPanics(t *testing.T) {
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"127.0.0.1"}
	s, err := slaved.New(&cfg, slaved.Options{ID: "late", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FetchOne(context.Background(), "not a url"); err == nil {
		t.Fatal("FetchOne accepted a relative URL")
	}
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "OnItem called after Run") {
			t.Errorf("recovered %v", v)
		}
	}()
	s.OnItem(func(context.Context, *slaved.Item) error { return nil })
}

// TestSkipLinksKeepsRedirect: SkipLinks drops the handler's links, not a
// redirect's target (the page's next hop); a nofollow page's links are
// not followed, the hooks' included.
func TestSkipLinksKeepsRedirect(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
			return
		}
		if r.URL.Path == "/private" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<meta name="robots" content="nofollow"><a href="/found">found</a>`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<link rel="canonical" href="/canonical"><a href="/found">found</a>`)
	}))
	defer site.Close()
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"127.0.0.1"}
	cfg.Fetch.AllowPrivateNetworks = true
	s, err := slaved.New(&cfg, slaved.Options{ID: "skip", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.OnResponse(func(_ context.Context, p *slaved.Page) error {
		p.SkipLinks()
		p.AddLink("/added")
		return nil
	})
	for path, want := range map[string][]string{"/old": {"/new", "/added"}, "/page": {"/added"}, "/private": nil} {
		res, err := s.FetchOne(context.Background(), site.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range res.Links {
			got = append(got, strings.TrimPrefix(l, site.URL))
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: links (-want +got):\n%s", path, d)
		}
	}
}
