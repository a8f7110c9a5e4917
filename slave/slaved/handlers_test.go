package slaved

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

type namedHandler struct {
	name string
	err  error
}

func (h namedHandler) Name() string { return h.name }
func (h namedHandler) Handle(_ context.Context, d *Doc) error {
	if h.err != nil {
		return h.err
	}
	u, _ := d.URL.Parse("/from-" + h.name)
	d.Links = append(d.Links, u)
	return nil
}

func TestHandlersLookup(t *testing.T) {
	h := NewHandlers()
	for _, mt := range []string{"application/rss+xml", "text/*", "text/html"} {
		if err := h.Register(mt, namedHandler{name: mt}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Register("not a type", namedHandler{name: "x"}); err == nil {
		t.Error("an invalid media type was registered")
	}
	got := map[string]string{}
	for _, mt := range []string{"application/rss+xml", "text/plain", "text/html", "image/png", "application/pdf"} {
		got[mt] = h.Lookup(mt).Name()
	}
	want := map[string]string{"application/rss+xml": "application/rss+xml", "text/plain": "text/*",
		"text/html": "text/html", "image/png": "store", "application/pdf": "store"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lookup (-want +got):\n%s", d)
	}
	if err := h.Register("*/*", namedHandler{name: "fallback"}); err != nil || h.Lookup("image/png").Name() != "fallback" {
		t.Errorf("fallback not replaced: %v", err)
	}
}

// TestCustomHandlerAndUpwardPaths registers a handler for a media type,
// with upward-path crawling on: the handler's links and their ancestor
// directories are enqueued, and a handler error is a typed exception.
func TestCustomHandlerAndUpwardPaths(t *testing.T) {
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"a.test"}
	cfg.Crawl.UpwardPaths = true
	s, err := New(&cfg, Options{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Handlers().Register("application/rss+xml", namedHandler{name: "rss"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Handlers().Register("application/atom+xml", namedHandler{name: "atom", err: errors.New("bad feed")}); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://a.test/x/y/feed.xml")
	l := frontier.Lease{Task: frontier.Task{URL: u.String(), Host: "a.test", Depth: 0}}
	res := Response{Status: 200, Header: http.Header{"Content-Type": {"application/rss+xml"}}, Body: testBody(t, "<rss/>", 1000)}
	c := s.handle(context.Background(), frontier.Completion{Lease: l, Outcome: frontier.Done}, u, &res, nil)
	var links []string
	for _, lk := range c.Links {
		links = append(links, lk.URL)
	}
	if d := cmp.Diff([]string{"http://a.test/from-rss", "http://a.test/"}, links); d != "" {
		t.Errorf("links (-want +got):\n%s", d)
	}
	res.Header.Set("Content-Type", "application/atom+xml")
	res.Body = testBody(t, "<feed/>", 1000) // another content: not a duplicate
	c = s.handle(context.Background(), frontier.Completion{Lease: l, Outcome: frontier.Done}, u, &res, nil)
	var kinds []string
	handler := ""
	for _, e := range c.Events {
		env, _ := events.Decode("1-1", e.Type, e.Data)
		if env.Exception != nil {
			kinds = append(kinds, env.Exception.Kind)
		}
		if env.Page != nil {
			handler = env.Page.Handler
		}
	}
	if c.Outcome != frontier.Done || handler != "atom" || len(kinds) != 1 || kinds[0] != events.KindParse {
		t.Errorf("failing handler: outcome %v, handler %q, exceptions %v", c.Outcome, handler, kinds)
	}
}
