package masterd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// dashToken is the admin token of the dashboard tests.
const dashToken = "dashboard-test-token-0123456789"

// TestDashboardLinkAndCrawls runs a master with its admin server against
// the real Redis and MariaDB, beside another crawl of the same Redis: a
// login link (what bin/master dashboard-link prints) logs a plain HTTP
// client in once, and the overview lists both crawls, the other one
// marked as not this master's, its settings left alone.
func TestDashboardLinkAndCrawls(t *testing.T) {
	cfg := crawltest.Config(t)
	cfg.Admin.Token = dashToken
	// a Redis of its own: the shared one holds the crawls of other tests
	cfg.Redis.URL = "redis://" + testutil.StartRedis(t, nil).Addr + "/0"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// the other crawl, opened as its own master would
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	other := testutil.CrawlName("other")
	t.Cleanup(func() { frontier.DeleteCrawl(context.Background(), rdb, other) })
	of, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: other, HostConcurrency: 1, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := of.Seed(ctx, []frontier.Task{{URL: "http://a.test/", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	settingsKey := frontier.NewKeys(other).Settings
	settings, err := rdb.Get(ctx, settingsKey).Result()
	if err != nil {
		t.Fatal(err)
	}

	crawltest.RunAdminMaster(t, ctx, cfg)
	link, err := masterd.DashboardLink(cfg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		cookie = c
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("login link: %s, cookie %v", resp.Status, cookie)
	}
	if resp, err := client.Get(link); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the link used twice: %v %v", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	base, _ := masterd.DashboardURL(cfg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"api/v1/overview", nil)
	req.AddCookie(cookie)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ov admin.Overview
	if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("overview with the link's cookie: %s, %v", resp.Status, err)
	}
	byName := map[string]admin.CrawlView{}
	for _, c := range ov.Crawls {
		byName[c.Crawl] = c
	}
	if c, ok := byName[cfg.Crawl.Name]; !ok || c.Other {
		t.Errorf("this master's crawl: %+v, %v", c, ok)
	}
	if c, ok := byName[other]; !ok || !c.Other || c.Queued != 1 {
		t.Errorf("the other crawl: %+v, %v; want listed, other, 1 queued", c, ok)
	}
	if got, _ := rdb.Get(ctx, settingsKey).Result(); got != settings {
		t.Errorf("the other crawl's settings changed:\n%s\nwas\n%s", got, settings)
	}
}

// TestDashboardSessions runs a master with its admin server against the
// real Redis and MariaDB, its clients on distinct loopback addresses:
// wrong tokens from one address do not keep the admin's right token from
// another out; a login lasts 12 hours by default; a logout revokes the
// session, so a copy of its cookie no longer reads; and
// RevokeDashboardSessions (bin/master dashboard-link --revoke-all, another
// process) ends the other sessions within admin.SessionRefresh.
func TestDashboardSessions(t *testing.T) {
	cfg := crawltest.Config(t)
	cfg.Admin.Token = dashToken
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	crawltest.RunAdminMaster(t, ctx, cfg)
	base, _ := masterd.DashboardURL(cfg)
	// a client whose connections come from the loopback address from
	clientFrom := func(from string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		tr := &http.Transport{DialContext: d.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	attacker, owner := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	login := func(c *http.Client, token string) (int, *http.Cookie) {
		t.Helper()
		resp, err := c.PostForm(base+"login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, ck := range resp.Cookies() {
			return resp.StatusCode, ck
		}
		return resp.StatusCode, nil
	}
	read := func(ck *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"api/v1/overview", nil)
		req.AddCookie(ck)
		resp, err := owner.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	var got []int
	for range 6 {
		code, _ := login(attacker, "wrong-token-0123456789")
		got = append(got, code)
	}
	code, c1 := login(owner, dashToken)
	got = append(got, code)
	code, _ = login(attacker, dashToken)
	got = append(got, code)
	if d := cmp.Diff([]int{401, 401, 401, 401, 401, 429, 303, 429}, got); d != "" {
		t.Fatalf("logins: attacker ×6, admin, attacker with the token (-want +got):\n%s", d)
	}
	if c1 == nil || c1.MaxAge != 12*3600 {
		t.Fatalf("login cookie %v, want Max-Age 12h", c1)
	}
	copied := *c1
	_, c2 := login(owner, dashToken) // another browser
	if got := []int{read(&copied), read(c2)}; !cmp.Equal(got, []int{200, 200}) {
		t.Fatalf("reads with the new cookies: %v", got)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"logout", nil)
	req.AddCookie(c1)
	resp, err := owner.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got = []int{resp.StatusCode, read(&copied), read(c2)}
	if d := cmp.Diff([]int{303, 401, 200}, got); d != "" {
		t.Errorf("logout, the copied cookie, the other session (-want +got):\n%s", d)
	}

	revoked := time.Now()
	if err := masterd.RevokeDashboardSessions(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for read(c2) != http.StatusUnauthorized {
		if time.Since(revoked) > admin.SessionRefresh+time.Second {
			t.Fatalf("the session still reads %v after --revoke-all", time.Since(revoked))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("--revoke-all took effect after %v", time.Since(revoked).Round(time.Millisecond))
	if code, c3 := login(owner, dashToken); code != http.StatusSeeOther || read(c3) != http.StatusOK {
		t.Errorf("a login after --revoke-all: %d", code)
	}

	other := *cfg
	other.Crawl.Name = testutil.CrawlName("nosuch")
	var uc *masterd.UnknownCrawlError
	if err := masterd.RevokeDashboardSessions(ctx, &other); !errors.As(err, &uc) {
		t.Errorf("--revoke-all of a crawl that does not exist: %v, want an UnknownCrawlError", err)
	}
}
