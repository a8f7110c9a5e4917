package masterd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestDashboardLinkAndCrawls runs a master with its admin server against
// the real Redis and MariaDB, beside another crawl of the same Redis: a
// login link (what bin/master dashboard-link prints) logs a plain HTTP
// client in once, and the overview lists both crawls, the other one
// marked as not this master's, its settings left alone.
func TestDashboardLinkAndCrawls(t *testing.T) {
	cfg := clusterConfig(t)
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

	addrc := make(chan string, 1)
	mctx, stopMaster := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() {
		mdone <- masterd.New(cfg, masterd.Options{Logger: testLogger(t), AdminReady: func(a string) { addrc <- a }}).Run(mctx)
	}()
	defer func() {
		stopMaster()
		if err := <-mdone; err != nil {
			t.Errorf("master: %v", err)
		}
	}()
	select {
	case a := <-addrc:
		cfg.Admin.Listen = a
	case err := <-mdone:
		t.Fatalf("master stopped before its admin server listened: %v", err)
	}
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
