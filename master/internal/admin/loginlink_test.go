package admin

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestLoginLink: a login link made with the token logs in once (the login
// cookie, a redirect to the dashboard); used again, expired, forged or made
// with another token it is refused.
func TestLoginLink(t *testing.T) {
	s := newTestServer(t, newFake(), nil)
	link := func(token string, ttl time.Duration, now time.Time) string {
		t.Helper()
		l, err := LoginLink("http://127.0.0.1:8080/", token, ttl, now)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(l)
		if u.Path != "/login" || u.Host != "127.0.0.1:8080" {
			t.Fatalf("link %s", l)
		}
		return u.RequestURI()
	}
	good := link(testToken, 10*time.Minute, testNow)
	forged := good[:len(good)-2] + "xx"
	if strings.HasSuffix(good, "xx") {
		forged = good[:len(good)-2] + "yy"
	}
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantCookie bool
		wantBody   string
	}{
		{"first use", good, http.StatusSeeOther, true, ""},
		{"second use", good, http.StatusUnauthorized, false, "used already"},
		{"expired", link(testToken, time.Minute, testNow.Add(-2*time.Minute)), http.StatusUnauthorized, false, "expired"},
		{"another token", link("another-token-0123456789", time.Minute, testNow), http.StatusUnauthorized, false, "not valid"},
		{"forged", forged, http.StatusUnauthorized, false, "not valid"},
		{"garbage", "/login?link=x", http.StatusUnauthorized, false, "not valid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(s, request{path: tc.path})
			body := readBody(t, resp)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			var c *http.Cookie
			for _, x := range resp.Cookies() {
				if x.Name == cookieName {
					c = x
				}
			}
			if (c != nil) != tc.wantCookie {
				t.Fatalf("cookie %v, want %v", c, tc.wantCookie)
			}
			if c != nil {
				if loc := resp.Header.Get("Location"); loc != "/" {
					t.Errorf("Location %q, want /", loc)
				}
				// the cookie reads the dashboard
				if r := do(s, request{path: "/api/v1/overview", cookie: c}); r.StatusCode != http.StatusOK {
					t.Errorf("overview with the link's cookie: %d", r.StatusCode)
				}
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("body lacks %q:\n%s", tc.wantBody, body)
			}
		})
	}
	if _, err := LoginLink("http://127.0.0.1:8080/", "", time.Minute, testNow); err == nil {
		t.Error("a link without a token")
	}
	if _, err := LoginLink("http://127.0.0.1:8080/", testToken, 2*time.Hour, testNow); err == nil {
		t.Error("a link valid past MaxLinkTTL")
	}
}

// TestDashboardCrawlActions: a finished crawl offers no Pause, and a crawl
// this master does not run is listed without actions.
func TestDashboardCrawlActions(t *testing.T) {
	f := newFake()
	f.ov.Crawls = append(f.ov.Crawls,
		CrawlView{Stats: frontier.Stats{Crawl: "done", Done: 10, Finished: true, FinishedAt: testNow.UnixMilli()}},
		CrawlView{Stats: frontier.Stats{Crawl: "elsewhere", Done: 5, Queued: 3}, Other: true})
	body := readBody(t, do(newTestServer(t, f, nil), request{path: "/", headers: bearer(testToken)}))
	for _, w := range []string{
		`id="btn-pause-done" data-kind="pause" data-crawl="done" hidden`,
		`<td class="name">elsewhere</td>`,
		`<td id="crawl-elsewhere-done" class="num" data-value="5">5</td>`,
		`<span class="muted">not this master's</span>`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %s", w)
		}
	}
	if m := regexp.MustCompile(`id="btn-pause-news"[^>]*>`).FindString(body); m == "" || strings.Contains(m, "hidden") {
		t.Errorf("the running crawl's Pause: %q", m)
	}
	if strings.Contains(body, `id="btn-pause-elsewhere"`) {
		t.Error("a crawl of another master has actions")
	}
}
