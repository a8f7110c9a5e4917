package admin

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestDashboardPage(t *testing.T) {
	f := newFake()
	f.ov.Crawls = append(f.ov.Crawls, CrawlView{
		Stats: frontier.Stats{Crawl: `shop<b>"x"`, Done: 1234567, Finished: true, FinishedAt: testNow.UnixMilli(),
			Shards: []frontier.ShardStats{{Shard: 0, Queued: 5, Done: 1000000}, {Shard: 1, Queued: 7, InFlight: 2, Done: 234567}}},
		Paused: true,
	})
	s := newTestServer(t, f, nil)
	resp := do(s, request{path: "/", headers: bearer(testToken)})
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	want := []string{
		`<td id="crawl-news-done" class="num" data-value="4321">4,321</td>`,
		`<td id="crawl-news-queued" class="num" data-value="1200">1,200</td>`,
		`<td id="crawl-news-state" class="state state-running">running</td>`,
		`<td id="crawl-news-rate" class="num" data-value="12.5">12.5</td>`,
		`id="btn-pause-news"`,
		`id="btn-resume-news"`,
		`crawl: <span class="mono">@daily</span> · next 2026-03-04 18:00:00Z · last never`,
		`<div id="crawl-news-recrawl" class="recrawl">recrawl 3: 5,400 unchanged · 600 changed · 12 new</div>`,
		// the odd crawl: ids made safe, text escaped, state paused
		`<td id="crawl-shop_b__x_-state" class="state state-paused">paused</td>`,
		`<td id="crawl-shop_b__x_-done" class="num" data-value="1234567">1,234,567</td>`,
		`<td class="name">shop&lt;b&gt;&#34;x&#34;</td>`,
		// a sharded crawl's shards
		`<caption>shop&lt;b&gt;&#34;x&#34;: 2 shards</caption>`,
		`<tr><td class="num">1</td><td class="num">7</td><td class="num">2</td><td class="num">0</td><td class="num">234,567</td>`,
		`<span class="badge badge-paused">paused</span>`,
		// slaves: ages from the overview's clock, dead slave without Drain
		`<td class="num">3 s</td>`,
		`<td class="num">600 s</td>`,
		`<td class="num">150.0</td>`,
		`<td class="state state-dead">dead</td>`,
		`id="btn-drain-s1"`,
		// rules header with the last error
		`<span id="rules-version" class="mono">v7</span>`,
		`<span id="rules-error-text" class="mono">shop.yaml:12: unknown field &#34;selectr&#34;</span>`,
		// the exception filter and the tables the script fills
		`id="f-kind"`, `id="f-host"`, `id="f-slave"`, `id="f-since"`, `id="f-until"`, `id="f-apply"`,
		`<span id="exc-total">0</span>`,
		`<table id="exceptions">`, `<table id="lost">`, `<table id="proxies">`,
		`<option value="render_timeout">`,
		`<script src="/static/dashboard.js" defer></script>`,
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %s", w)
		}
	}
	for _, bad := range []string{`<b>"x"`, "btn-drain-s2", "<script>alert"} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %s", bad)
		}
	}
	if strings.Contains(body, `id="rules-error" class="banner error" role="alert" hidden`) {
		t.Error("the rule error banner is hidden")
	}
}

func TestDashboardPageOverviewFails(t *testing.T) {
	f := newFake()
	f.err = errors.New("redis down")
	s := newTestServer(t, f, nil)
	resp := do(s, request{path: "/", headers: bearer(testToken)})
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Could not read the overview") || strings.Contains(body, "redis down") {
		t.Errorf("status %d; want the page with a generic error:\n%s", resp.StatusCode, body)
	}
}

func TestDashboardReadOnly(t *testing.T) {
	s := newTestServer(t, newFake(), func(o *Options) { o.PublicRead = true })
	body := readBody(t, do(s, request{path: "/"}))
	for _, w := range []string{`data-can-act="false"`, `id="login-link"`, `id="btn-pause-news" data-kind="pause" data-crawl="news"  disabled`} {
		if !strings.Contains(body, w) {
			t.Errorf("read-only page lacks %s", w)
		}
	}
}

func TestStaticFiles(t *testing.T) {
	s := newTestServer(t, newFake(), nil)
	tests := []struct{ path, ctype, contains string }{
		{"/static/dashboard.js", "text/javascript; charset=utf-8", "textContent"},
		{"/static/dashboard.css", "text/css; charset=utf-8", "#chart"},
	}
	for _, tt := range tests {
		resp := do(s, request{path: tt.path})
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tt.ctype || !strings.Contains(body, tt.contains) {
			t.Errorf("%s: %d %q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if strings.Contains(body, "innerHTML") || strings.Contains(body, "http://") && !strings.Contains(body, "www.w3.org/2000/svg") {
			t.Errorf("%s uses innerHTML or an external resource", tt.path)
		}
	}
}

func TestFormatters(t *testing.T) {
	ints := map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 4321: "4,321", 1234567: "1,234,567", -1234: "-1,234"}
	for n, want := range ints {
		if got := formatInt(n); got != want {
			t.Errorf("formatInt(%d) = %q, want %q", n, got, want)
		}
	}
	ids := map[string]string{"news": "news", "my-crawl_2": "my-crawl_2", "a.b c": "a_b_c", "é<x>": "__x_"}
	for in, want := range ids {
		if got := domID(in); got != want {
			t.Errorf("domID(%q) = %q, want %q", in, got, want)
		}
	}
	ages := []struct {
		t    time.Time
		want string
	}{
		{testNow.Add(-2600 * time.Millisecond), "3 s"},
		{testNow.Add(time.Second), "0 s"},
		{time.Time{}, ""},
	}
	for _, a := range ages {
		if got := formatAge(testNow, a.t); got != a.want {
			t.Errorf("formatAge(%v) = %q, want %q", a.t, got, a.want)
		}
	}
	states := []struct {
		v    SlaveView
		want string
	}{
		{SlaveView{Alive: true}, "running"},
		{SlaveView{Alive: true, Draining: true}, "draining"},
		{SlaveView{Alive: false, Draining: true}, "dead"},
	}
	for _, st := range states {
		if got := slaveState(st.v); got != st.want {
			t.Errorf("slaveState(%+v) = %q, want %q", st.v, got, st.want)
		}
	}
}

func TestCrawlState(t *testing.T) {
	for _, tc := range []struct {
		c    CrawlView
		want string
	}{
		{CrawlView{Stats: frontier.Stats{Queued: 1}}, "running"},
		{CrawlView{Stats: frontier.Stats{Retry: 2, InFlight: 1}}, "running"},
		{CrawlView{Stats: frontier.Stats{Retry: 2}}, "retrying"},
		{CrawlView{Stats: frontier.Stats{Retry: 2}, Paused: true}, "paused"},
		{CrawlView{Stats: frontier.Stats{Finished: true}}, "finished"},
	} {
		if got := crawlState(tc.c); got != tc.want {
			t.Errorf("crawlState(%+v) = %s, want %s", tc.c.Stats, got, tc.want)
		}
	}
}
