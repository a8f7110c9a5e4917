package slaved

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/slave/content"
)

func TestHandle(t *testing.T) {
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"a.test", "b.test"}
	cfg.Crawl.MaxRedirects = 2
	cfg.Fetch.MaxBodyBytes = 10000
	cfg.Lease.RetryBase = time.Second
	s, err := New(&cfg, Options{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	html := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	type want struct {
		Outcome    frontier.Outcome
		Links      []string
		Hops       []int
		Exceptions []string
		PageStatus int
		Backoff    bool
		RetryIn    time.Duration
	}
	tests := []struct {
		name string
		hops int
		res  Response
		body string
		want want
	}{
		{"ok html with links", 0, Response{Status: 200, Header: html}, `<a href="/x">x</a><a href="http://b.test/y#f">y</a><a href="http://c.test/">out</a><a href="mailto:a@b">m</a>`,
			want{Outcome: frontier.Done, Links: []string{"http://a.test/x", "http://b.test/y"}, Hops: []int{0, 0}, PageStatus: 200}},
		{"nofollow", 0, Response{Status: 200, Header: html}, `<meta name="robots" content="nofollow"><a href="/x">x</a>`,
			want{Outcome: frontier.Done, PageStatus: 200}},
		{"not html", 0, Response{Status: 200, Header: http.Header{"Content-Type": {"application/pdf"}}}, `<a href="/x">`,
			want{Outcome: frontier.Done, PageStatus: 200}},
		{"too large", 0, Response{Status: 200, Header: html}, tooLarge,
			want{Outcome: frontier.Fail, Exceptions: []string{events.KindTooLarge}}},
		{"redirect goes through the frontier", 0, Response{Status: 301, Header: http.Header{"Location": {"../next"}}}, "",
			want{Outcome: frontier.Done, Links: []string{"http://a.test/next"}, Hops: []int{1}, PageStatus: 301}},
		{"redirect chain too long", 2, Response{Status: 302, Header: http.Header{"Location": {"/next"}}}, "",
			want{Outcome: frontier.Done, PageStatus: 302, Exceptions: []string{events.KindRedirect}}},
		{"redirect without location", 0, Response{Status: 302, Header: http.Header{}}, "",
			want{Outcome: frontier.Done, PageStatus: 302, Exceptions: []string{events.KindRedirect}}},
		{"redirect out of scope", 0, Response{Status: 301, Header: http.Header{"Location": {"http://c.test/"}}}, "",
			want{Outcome: frontier.Done, PageStatus: 301}},
		{"404 recorded and dropped", 0, Response{Status: 404, Header: html}, "",
			want{Outcome: frontier.Done, PageStatus: 404, Exceptions: []string{events.KindHTTPStatus}}},
		{"410 recorded and dropped", 0, Response{Status: 410, Header: html}, "",
			want{Outcome: frontier.Done, PageStatus: 410, Exceptions: []string{events.KindHTTPStatus}}},
		{"500 retried", 0, Response{Status: 500, Header: html}, "",
			want{Outcome: frontier.Retry, Exceptions: []string{events.KindHTTPStatus}}},
		{"429 with Retry-After backs the host off", 0, Response{Status: 429, Header: http.Header{"Retry-After": {"7"}}}, "",
			want{Outcome: frontier.Retry, Exceptions: []string{events.KindHTTPStatus}, Backoff: true, RetryIn: 7 * time.Second}},
		{"redirect to itself is a loop", 0, Response{Status: 302, Header: http.Header{"Location": {"/dir/page"}}}, "",
			want{Outcome: frontier.Done, PageStatus: 302, Exceptions: []string{events.KindRedirect}}},
		{"html sniffed without a content type", 0, Response{Status: 200, Header: http.Header{}}, `<html><a href="/x">x</a>`,
			want{Outcome: frontier.Done, Links: []string{"http://a.test/x"}, Hops: []int{0}, PageStatus: 200}},
		{"trap links dropped and reported", 0, Response{Status: 200, Header: html},
			`<a href="/a/a/a/a">t</a><a href="/ok">ok</a><a href="/` + strings.Repeat("l", 3000) + `">long</a>`,
			want{Outcome: frontier.Done, Links: []string{"http://a.test/ok"}, Hops: []int{0}, PageStatus: 200, Exceptions: []string{events.KindTrap}}},
		{"query in the page's legacy encoding, path in UTF-8", 0, Response{Status: 200, Header: http.Header{"Content-Type": {"text/html; charset=iso-8859-15"}}},
			"<a href=\"/\xa4?c=\xa4\">euro</a>",
			want{Outcome: frontier.Done, Links: []string{"http://a.test/%E2%82%AC?c=%A4"}, Hops: []int{0}, PageStatus: 200}},
		{"shift_jis declared in meta", 0, Response{Status: 200, Header: http.Header{"Content-Type": {"text/html"}}},
			"<meta charset=\"shift_jis\"><a href=\"/\x93\xfa?q=\x93\xfa\x96\x7b\">ja</a>",
			want{Outcome: frontier.Done, Links: []string{"http://a.test/%E6%97%A5?q=%93%FA%96%7B"}, Hops: []int{0}, PageStatus: 200}},
		{"a 503 among good answers delays its URL only", 0, Response{Status: 503, Header: http.Header{"Retry-After": {"2"}}}, "",
			want{Outcome: frontier.Retry, Exceptions: []string{events.KindHTTPStatus}, RetryIn: 2 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse("http://a.test/dir/page")
			l := frontier.Lease{Task: frontier.Task{URL: u.String(), Host: "a.test", Depth: 1, Hops: tc.hops}}
			res := tc.res
			res.Body = testBody(t, tc.body, cfg.Fetch.MaxBodyBytes)
			c := s.handle(context.Background(), frontier.Completion{Lease: l, Outcome: frontier.Done}, u, &res, nil)
			got := want{Outcome: c.Outcome, Backoff: c.Backoff > 0}
			if tc.want.RetryIn > 0 {
				got.RetryIn = c.RetryIn
			}
			for _, lk := range c.Links {
				got.Links = append(got.Links, lk.URL)
				got.Hops = append(got.Hops, lk.Hops)
				wantDepth := 2
				if lk.Hops > 0 {
					wantDepth = 1 // a redirect target keeps its source's depth
				}
				if lk.Depth != wantDepth || lk.Priority != int64(wantDepth) {
					t.Errorf("link %s depth %d priority %d, want %d", lk.URL, lk.Depth, lk.Priority, wantDepth)
				}
			}
			for _, e := range c.Events {
				env, err := events.Decode("1-1", e.Type, e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if env.Exception != nil {
					got.Exceptions = append(got.Exceptions, env.Exception.Kind)
				}
				if env.Page != nil {
					got.PageStatus = env.Page.Status
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if c.Outcome == frontier.Retry && c.RetryIn <= 0 {
				t.Errorf("retry without a backoff")
			}
		})
	}
}

// tooLarge is a body over the test's fetch.max_body_bytes.
var tooLarge = strings.Repeat("x", 10001)

// testBody reads s into a document input stream capped at max bytes.
func testBody(t *testing.T, s string, max int64) *content.Body {
	t.Helper()
	b, err := content.ReadBody(strings.NewReader(s), content.BodyOptions{MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"-5", 0}, {"99999", time.Minute}, {"soon", 0},
	}
	for _, tc := range tests {
		if got := retryAfter(http.Header{"Retry-After": {tc.v}}, time.Minute); got != tc.want {
			t.Errorf("Retry-After %q: %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestSortQueryConfig: crawl.sort_query reaches the slave's canonicalizer
// (links, redirects and sitemaps share it).
func TestSortQueryConfig(t *testing.T) {
	for _, sortQuery := range []bool{false, true} {
		cfg := config.Default()
		cfg.Crawl.SortQuery = sortQuery
		s, err := New(&cfg, Options{ID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.canon.Canonicalize("http://a.test/p?b=2&a=1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "http://a.test/p?b=2&a=1", true: "http://a.test/p?a=1&b=2"}[sortQuery]
		if u.String() != want {
			t.Errorf("sort_query %v: %s, want %s", sortQuery, u, want)
		}
	}
}

// TestRetried: without a rule set's retry_statuses 408, 429 and 5xx are
// retried; with them, exactly those; an empty list retries none.
func TestRetried(t *testing.T) {
	statuses := []int{400, 403, 404, 408, 429, 500, 503, 599}
	tests := []struct {
		name string
		rs   *rules.RuleSet
		want []int
	}{
		{"no rule set", nil, []int{408, 429, 500, 503, 599}},
		{"rule set without the key", &rules.RuleSet{}, []int{408, 429, 500, 503, 599}},
		{"rule set's list", &rules.RuleSet{Fetch: rules.Fetch{RetryStatuses: []int{403, 503}}}, []int{403, 503}},
		{"empty list", &rules.RuleSet{Fetch: rules.Fetch{RetryStatuses: []int{}}}, nil},
	}
	for _, tc := range tests {
		var got []int
		for _, st := range statuses {
			if retried(tc.rs, st) {
				got = append(got, st)
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: retried statuses (-want +got):\n%s", tc.name, d)
		}
	}
}
