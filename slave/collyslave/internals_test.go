package collyslave

import (
	"net/http"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/storage"
	"github.com/google/go-cmp/cmp"
)

// TestInternals checks what this package reads and changes of colly's
// private state against the colly it is built with: a colly that keeps
// it otherwise fails here, not in a crawl.
func TestInternals(t *testing.T) {
	type state struct {
		Storage, Redirect, Transport, Jar bool
		Limits, OnRequest, OnError        int
		Timeout                           time.Duration
	}
	read := func(c *colly.Collector) state {
		in, err := inspect(c)
		if err != nil {
			t.Fatal(err)
		}
		return state{Storage: in.customStorage(), Redirect: in.redirectHandler(), Transport: in.transport(), Jar: in.jar(),
			Limits: in.limitRules(), OnRequest: len(*in.onRequest), OnError: len(*in.onError), Timeout: in.timeout()}
	}
	fresh := state{Jar: true, Timeout: 10 * time.Second}
	tests := []struct {
		name  string
		setup func(c *colly.Collector) error
		want  state
	}{
		{"defaults", func(*colly.Collector) error { return nil }, fresh},
		{"storage", func(c *colly.Collector) error { return c.SetStorage(&storage.InMemoryStorage{}) }, fresh},
		{"custom storage", func(c *colly.Collector) error { return c.SetStorage(&struct{ storage.InMemoryStorage }{}) },
			state{Storage: true, Jar: true, Timeout: 10 * time.Second}},
		{"redirect", func(c *colly.Collector) error {
			c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return nil })
			return nil
		}, state{Redirect: true, Jar: true, Timeout: 10 * time.Second}},
		{"proxy", func(c *colly.Collector) error { return c.SetProxy("http://127.0.0.1:3128") },
			state{Transport: true, Jar: true, Timeout: 10 * time.Second}},
		{"no cookies, a timeout", func(c *colly.Collector) error {
			c.DisableCookies()
			c.SetRequestTimeout(time.Minute)
			return nil
		}, state{Timeout: time.Minute}},
		{"limits and callbacks", func(c *colly.Collector) error {
			c.OnRequest(func(*colly.Request) {})
			c.OnRequest(func(*colly.Request) {})
			c.OnError(func(*colly.Response, error) {})
			return c.Limits([]*colly.LimitRule{{DomainGlob: "*"}, {DomainRegexp: "x"}})
		}, state{Limits: 2, OnRequest: 2, OnError: 1, Jar: true, Timeout: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := colly.NewCollector()
			if err := tt.setup(c); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, read(c)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}

	// the take-over: one callback of the runner's in each list, the
	// user's behind it, those registered later adopted once
	c := colly.NewCollector()
	c.OnRequest(func(*colly.Request) {})
	c.OnError(func(*colly.Response, error) {})
	in, err := inspect(c)
	if err != nil {
		t.Fatal(err)
	}
	cs := newRunner(c, in)
	c.OnRequest(func(*colly.Request) {})
	if got := []int{len(*in.onRequest), len(*in.onError), len(cs.userReq), len(cs.userErr)}; !cmp.Equal(got, []int{2, 1, 1, 1}) {
		t.Errorf("after New and one more OnRequest: lists, user's %v, want [2 1 1 1]", got)
	}
	cs.adopt.Do(cs.takeOver)
	if got := []int{len(*in.onRequest), len(*in.onError), len(cs.userReq), len(cs.userErr)}; !cmp.Equal(got, []int{1, 1, 2, 1}) {
		t.Errorf("after the first page: lists, user's %v, want [1 1 2 1]", got)
	}
}
