package collyslave_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/storage"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/collyslave"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// site serves the pages of the callback tests and records what it was
// asked.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string // method path, and the headers /echo shows
}

func newSite(t *testing.T) *site {
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit := r.Method + " " + r.URL.Path
		if r.URL.Path == "/echo" {
			hit += fmt.Sprintf(" ua=%q accept=%q lang=%q custom=%q cookie=%q", r.UserAgent(), r.Header.Get("Accept"),
				r.Header.Get("Accept-Language"), r.Header.Get("X-Custom"), r.Header.Get("Cookie"))
		}
		// recorded before the body is written: a client that stops
		// reading a big body would otherwise leave the hit to the next case
		s.mu.Lock()
		s.hits = append(s.hits, hit)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<h1>Hello</h1><a href="/a">a</a> <a href="b?x=1">b</a> <a href="#top">top</a>`)
		case "/redirect":
			http.Redirect(w, r, "/target", http.StatusFound)
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<h1>Nothing here</h1><a href="/">home</a>`)
		case "/big":
			fmt.Fprint(w, "<h1>Big</h1>"+strings.Repeat("<p>words</p>", 1000))
		case "/cookie":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
			fmt.Fprint(w, `<h1>Cookie</h1>`)
		case "/echo":
			fmt.Fprint(w, `<h1>Echo</h1>`)
		case "/api":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"items":["/p/1","/p/2"]}`)
		default:
			fmt.Fprintf(w, `<h1>%s</h1>`, r.URL.Path)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) takeHits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hits
	s.hits = nil
	return h
}

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"127.0.0.1"}
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.MaxBodyBytes = 8192
	cfg.Fetch.MemoryBodyBytes = 4096
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// events records the callbacks a collector ran, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, a ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf(format, a...))
}

// collector is a collector with a callback of each kind that records
// itself; setup adds the case's own callbacks and settings.
func collector(ev *events, base string, opts ...colly.CollectorOption) *colly.Collector {
	c := colly.NewCollector(opts...)
	short := func(u fmt.Stringer) string { return strings.TrimPrefix(u.String(), base) }
	c.OnRequest(func(r *colly.Request) { ev.add("request %s", short(r.URL)) })
	c.OnResponse(func(r *colly.Response) { ev.add("response %d", r.StatusCode) })
	c.OnHTML("h1", func(e *colly.HTMLElement) {
		ev.add("html %s", e.Text)
		if err := collyslave.AddItem(e.Request, "title", "", map[string]any{"title": e.Text}); err != nil {
			ev.add("add item: %v", err)
		}
	})
	c.OnError(func(r *colly.Response, err error) { ev.add("error %s: %v", short(r.Request.URL), err) })
	c.OnScraped(func(r *colly.Response) { ev.add("scraped %s", short(r.Request.URL)) })
	return c
}

// TestCallbacks runs one page through a collector's callbacks as a slave
// runs it (FetchOne: the slave's pipeline without Redis) and checks the
// callbacks that ran, in order, what became of the page (outcome, links,
// items, exceptions) and what the site was asked.
func TestCallbacks(t *testing.T) {
	running := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, running) }) // after the site closes
	s := newSite(t)
	visitLinks := func(c *colly.Collector) {
		c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	}
	type want struct {
		Outcome    string
		Events     []string
		Links      []string
		Items      []string // item data
		Exceptions []string // kind: message up to its first newline
		Hits       []string
	}
	tests := []struct {
		name  string
		path  string
		opts  []colly.CollectorOption
		setup func(c *colly.Collector, ev *events)
		want  want
	}{
		{"links are Visits, OnRequest once", "/", nil, func(c *colly.Collector, _ *events) { visitLinks(c) }, want{
			Outcome: "done", Events: []string{"request /", "response 200", "html Hello", "scraped /"},
			Links: []string{"/a", "/b?x=1"}, Items: []string{`{"title":"Hello"}`}, Hits: []string{"GET /"}}},
		{"no Visit, no link", "/", nil, nil, want{
			Outcome: "done", Events: []string{"request /", "response 200", "html Hello", "scraped /"},
			Items: []string{`{"title":"Hello"}`}, Hits: []string{"GET /"}}},
		{"c.Visit in a callback", "/", nil, func(c *colly.Collector, _ *events) {
			c.OnHTML("a[href]", func(e *colly.HTMLElement) { c.Visit(e.Request.AbsoluteURL(e.Attr("href"))) })
		}, want{Outcome: "done", Events: []string{"request /", "response 200", "html Hello", "scraped /"},
			Links: []string{"/a", "/b?x=1"}, Items: []string{`{"title":"Hello"}`}, Hits: []string{"GET /"}}},
		{"a JSON page's Visits", "/api", nil, func(c *colly.Collector, _ *events) {
			c.OnResponse(func(r *colly.Response) {
				for _, p := range regexp.MustCompile(`/p/\d`).FindAllString(string(r.Body), -1) {
					r.Request.Visit(p)
				}
			})
		}, want{Outcome: "done", Events: []string{"request /api", "response 200", "scraped /api"},
			Links: []string{"/p/1", "/p/2"}, Hits: []string{"GET /api"}}},
		{"headers: the collector's and OnRequest's, not colly's defaults", "/echo",
			[]colly.CollectorOption{colly.Headers(map[string]string{"X-Custom": "yes"})}, func(c *colly.Collector, _ *events) {
				c.OnRequest(func(r *colly.Request) { r.Headers.Set("Accept-Language", "en") })
			}, want{Outcome: "done", Events: []string{"request /echo", "response 200", "html Echo", "scraped /echo"},
				Items: []string{`{"title":"Echo"}`},
				Hits:  []string{`GET /echo ua="redcrawl/0.1 (+https://github.com/redcrawl/redcrawl)" accept="text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" lang="en" custom="yes" cookie=""`}}},
		{"OnRequest aborts", "/", nil, func(c *colly.Collector, _ *events) {
			c.OnRequest(func(r *colly.Request) { r.Abort() })
		}, want{Outcome: "done", Events: []string{"request /"},
			Exceptions: []string{"hook: OnFetch: skipped: aborted by a callback before the request was sent"}}},
		{"AllowedDomains refuses the page", "/", []colly.CollectorOption{colly.AllowedDomains("shop.example")}, nil, want{
			Outcome: "done", Exceptions: []string{"hook: OnFetch: skipped: colly refused the request: Forbidden domain"}}},
		{"MaxDepth refuses the Visits", "/", []colly.CollectorOption{colly.MaxDepth(1)}, func(c *colly.Collector, _ *events) { visitLinks(c) },
			want{Outcome: "done", Events: []string{"request /", "response 200", "html Hello", "scraped /"},
				Items: []string{`{"title":"Hello"}`}, Hits: []string{"GET /"}}},
		{"a redirect runs no callback", "/redirect", nil, func(c *colly.Collector, _ *events) { visitLinks(c) },
			want{Outcome: "done", Events: []string{"request /redirect"}, Links: []string{"/target"}, Hits: []string{"GET /redirect"}}},
		{"404: OnError", "/missing", nil, func(c *colly.Collector, _ *events) { visitLinks(c) }, want{
			Outcome: "done", Events: []string{"request /missing", "error /missing: Not Found"},
			Exceptions: []string{"http_status: HTTP 404"}, Hits: []string{"GET /missing"}}},
		{"404 with ParseHTTPErrorResponse", "/missing", []colly.CollectorOption{colly.ParseHTTPErrorResponse()},
			func(c *colly.Collector, _ *events) { visitLinks(c) }, want{
				Outcome: "done", Events: []string{"request /missing", "response 404", "html Nothing here", "scraped /missing"},
				Links: []string{"/"}, Items: []string{`{"title":"Nothing here"}`}, Exceptions: []string{"http_status: HTTP 404"}, Hits: []string{"GET /missing"}}},
		{"Retry from a callback", "/", nil, func(c *colly.Collector, _ *events) {
			c.OnResponse(func(r *colly.Response) { r.Request.Retry() })
		}, want{Outcome: "retry", Events: []string{"request /", "response 200", "html Hello", "scraped /"},
			Exceptions: []string{"hook: OnResponse: retry: retry asked by a callback (Request.Retry)"}, Hits: []string{"GET /"}}},
		{"Post from a callback", "/", nil, func(c *colly.Collector, _ *events) {
			c.OnScraped(func(r *colly.Response) { r.Request.Post("/form", map[string]string{"q": "1"}) })
		}, want{Outcome: "done", Events: []string{"request /", "response 200", "html Hello", "scraped /"},
			Items:      []string{`{"title":"Hello"}`},
			Exceptions: []string{"hook: OnResponse: POST " + s.URL + "/form from a callback: a task is a GET of a URL; the request was not made"},
			Hits:       []string{"GET /"}}},
		{"a body past fetch.max_body_bytes", "/big", nil, nil, want{Outcome: "fail",
			Events: []string{"request /big",
				`error /big: Get "` + s.URL + `/big": body larger than fetch.max_body_bytes: the page fails as too_large`},
			Exceptions: []string{"too_large: body larger than 8192 bytes"}, Hits: []string{"GET /big"}}},
		{"AddItem of a struct, and of no object", "/", nil, func(c *colly.Collector, ev *events) {
			c.OnScraped(func(r *colly.Response) {
				if err := collyslave.AddItem(r.Request, "page", r.Request.URL.String()+"#it", struct {
					Status int `json:"status"`
				}{r.StatusCode}); err != nil {
					ev.add("add item: %v", err)
				}
				ev.add("add item: %v", collyslave.AddItem(r.Request, "page", "", "a string"))
			})
		}, want{Outcome: "done", Events: []string{"request /", "response 200", "html Hello", "scraped /",
			`add item: collyslave: add item page: fields must encode as a JSON object, not "a string"`},
			Items: []string{`{"title":"Hello"}`, `{"status":200}`}, Hits: []string{"GET /"}}},
		{"a callback's panic fails the page", "/", nil, func(c *colly.Collector, _ *events) {
			c.OnHTML("h1", func(*colly.HTMLElement) { panic("bad selector logic") })
		}, want{Outcome: "fail", Events: []string{"request /", "response 200", "html Hello"},
			Exceptions: []string{"hook: OnFetch: panic: bad selector logic"}, Hits: []string{"GET /"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.takeHits()
			ev := &events{}
			c := collector(ev, s.URL, tt.opts...)
			if tt.setup != nil {
				tt.setup(c, ev)
			}
			sl, err := collyslave.New(testConfig(t), c, slaved.Options{ID: "colly", Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := sl.FetchOne(context.Background(), s.URL+tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got := want{Outcome: res.Outcome, Events: ev.log, Hits: s.takeHits()}
			for _, l := range res.Links {
				got.Links = append(got.Links, strings.TrimPrefix(l, s.URL))
			}
			for _, it := range res.Items {
				got.Items = append(got.Items, string(it.Data))
			}
			for _, e := range res.Exceptions {
				msg, _, _ := strings.Cut(e.Message, "\n")
				got.Exceptions = append(got.Exceptions, e.Kind+": "+msg)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestCookiesPerSlave: the collector's cookie jar keeps what a site set
// for the slave's later requests.
func TestCookiesPerSlave(t *testing.T) {
	s := newSite(t)
	c := colly.NewCollector()
	sl, err := collyslave.New(testConfig(t), c, slaved.Options{ID: "cookies", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/cookie", "/echo"} {
		if _, err := sl.FetchOne(context.Background(), s.URL+p); err != nil {
			t.Fatal(err)
		}
	}
	hits := s.takeHits()
	if len(hits) != 2 || !strings.Contains(hits[1], `cookie="session=s1"`) {
		t.Errorf("hits %q: the second request has no cookie", hits)
	}
}

// TestOutside: a request that is none of the crawl's pages fails, and
// AddItem outside a slave's page says so.
func TestOutside(t *testing.T) {
	s := newSite(t)
	ev := &events{}
	c := collector(ev, s.URL)
	if _, err := collyslave.New(testConfig(t), c, slaved.Options{ID: "outside", Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(s.URL + "/"); !errors.Is(err, collyslave.ErrOutside) {
		t.Errorf("c.Visit outside the crawl: %v, want ErrOutside", err)
	}
	if hits := s.takeHits(); len(hits) > 0 {
		t.Errorf("the site was asked %q", hits)
	}
	plain := colly.NewCollector()
	var addErr error
	plain.OnHTML("h1", func(e *colly.HTMLElement) { addErr = collyslave.AddItem(e.Request, "title", "", map[string]any{}) })
	if err := plain.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(addErr, collyslave.ErrNotAPage) {
		t.Errorf("AddItem on a plain collector's page: %v, want ErrNotAPage", addErr)
	}
}

// TestRefused: each setting a distributed crawl cannot hold is refused
// with its fix, all of them in one error.
func TestRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *colly.Collector, cfg *config.Config) error
		want  string
	}{
		{"cache", func(c *colly.Collector, _ *config.Config) error { c.CacheDir = "/tmp/cache"; return nil }, `CacheDir "/tmp/cache"`},
		{"revisit", func(c *colly.Collector, _ *config.Config) error { c.AllowURLRevisit = true; return nil }, "AllowURLRevisit: the frontier"},
		{"max requests", func(c *colly.Collector, _ *config.Config) error { c.MaxRequests = 10; return nil }, "MaxRequests 10"},
		{"check head", func(c *colly.Collector, _ *config.Config) error { c.CheckHead = true; return nil }, "CheckHead"},
		{"limit rule", func(c *colly.Collector, _ *config.Config) error {
			return c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 2})
		}, "1 LimitRule(s): the frontier's politeness"},
		{"storage", func(c *colly.Collector, _ *config.Config) error { return c.SetStorage(&customStorage{}) }, "SetStorage"},
		{"redirect handler", func(c *colly.Collector, _ *config.Config) error {
			c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })
			return nil
		}, "SetRedirectHandler"},
		{"proxy", func(c *colly.Collector, _ *config.Config) error { return c.SetProxy("http://127.0.0.1:3128") },
			"a transport of the collector's own"},
		{"transport", func(c *colly.Collector, _ *config.Config) error { c.WithTransport(http.DefaultTransport); return nil },
			"a transport of the collector's own"},
		{"user agent", func(c *colly.Collector, _ *config.Config) error { c.UserAgent = "shopbot/1.0"; return nil },
			`UserAgent "shopbot/1.0": the slave's sessions send fetch.user_agent`},
		{"robots", func(c *colly.Collector, cfg *config.Config) error {
			c.IgnoreRobotsTxt = false
			cfg.Politeness.ObeyRobots = false
			return nil
		}, "politeness.obey_robots is false"},
		{"two jars", func(_ *colly.Collector, cfg *config.Config) error { cfg.Fetch.Cookies = true; return nil }, "two cookie jars"},
	}
	var all []func(c *colly.Collector, cfg *config.Config) error
	for _, tt := range tests {
		all = append(all, tt.setup)
		t.Run(tt.name, func(t *testing.T) {
			c, cfg := colly.NewCollector(), testConfig(t)
			if err := tt.setup(c, cfg); err != nil {
				t.Fatal(err)
			}
			_, err := collyslave.New(cfg, c, slaved.Options{ID: "refused", Logger: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
	// all at once: one error, a line each (proxy and transport are one)
	c, cfg := colly.NewCollector(), testConfig(t)
	for _, f := range all {
		if err := f(c, cfg); err != nil {
			t.Fatal(err)
		}
	}
	_, err := collyslave.New(cfg, c, slaved.Options{ID: "refused", Logger: slog.New(slog.DiscardHandler)})
	if err == nil || strings.Count(err.Error(), "\n  - ") != len(tests)-1 {
		t.Errorf("error with all settings: %v", err)
	}
	// what holds is accepted: colly's defaults, the config's user agent,
	// a collector without cookies under fetch.cookies
	c, cfg = colly.NewCollector(colly.UserAgent(testConfig(t).Fetch.UserAgent), colly.Async()), testConfig(t)
	c.DisableCookies()
	cfg.Fetch.Cookies = true
	if _, err := collyslave.New(cfg, c, slaved.Options{ID: "ok", Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Errorf("refused %v", err)
	}
}

// customStorage is a storage of the user's own (a colly Redis storage).
type customStorage struct{ storage.InMemoryStorage }

// TestCallbacksAfterNew: callbacks registered after New (before Run) are
// the collector's too, and an OnRequest one still runs once per page.
func TestCallbacksAfterNew(t *testing.T) {
	s := newSite(t)
	ev := &events{}
	c := colly.NewCollector()
	sl, err := collyslave.New(testConfig(t), c, slaved.Options{ID: "late", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.OnRequest(func(r *colly.Request) { ev.add("request %s", r.URL.Path) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnError(func(_ *colly.Response, err error) { ev.add("error %v", err) })
	for _, p := range []string{"/", "/missing"} {
		if _, err := sl.FetchOne(context.Background(), s.URL+p); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]string{"request /", "request /missing", "error Not Found"}, ev.log); d != "" {
		t.Errorf("callbacks (-want +got):\n%s", d)
	}
}
