package slaved_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// writeRules writes one rule file into a new directory and returns it.
func writeRules(t *testing.T, name, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostOf is the host name of a URL.
func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname()
}

// TestRuleFetchSettings crawls two hosts of the test site, the first with
// a rule file that sets its user agents, a header and the statuses it
// retries: every request to the first host (its robots.txt too) carries
// them and its 404 is fetched up to lease.max_attempts times; the second
// host's requests carry the crawl's user agent and no header, and its 404
// is fetched once.
func TestRuleFetchSettings(t *testing.T) {
	site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 3, Seed: 3, CrossHostRatio: -1}, 0)
	defer stop()
	roots := site.HostURLs()
	cfg := testConfig(t, site)
	cfg.Lease.RetryBase = 20 * time.Millisecond
	cfg.Lease.RetryMax = 100 * time.Millisecond
	uas := []string{"RuleBot/1 (one)", "RuleBot/1 (two)"}
	dir := writeRules(t, "zero.yaml", "hosts: ["+hostOf(t, roots[0])+"]\nfetch:\n"+
		"  user_agents: [\""+uas[0]+"\", \""+uas[1]+"\"]\n"+
		"  headers: {X-Site-Key: k0, Accept-Language: fr-FR}\n"+
		"  retry_statuses: [404]\n")
	publishRules(t, cfg, dir)

	h := newHarness(t, cfg, site)
	var seeds []frontier.Task
	for _, r := range roots {
		u, _ := url.Parse(r + "nope")
		seeds = append(seeds, frontier.NewTask(u, 0, 0))
	}
	if _, err := h.f.Seed(context.Background(), seeds); err != nil {
		t.Fatal(err)
	}
	h.run(cfg, 1, nil, time.Minute)

	type seen struct {
		UA, Key, Lang string
		Status        int
	}
	byHost := map[int][]seen{}
	counts := map[string]int{}
	for _, hit := range site.Hits() {
		i := slices.IndexFunc(roots, func(r string) bool { return strings.HasPrefix(hit.URL()+"/", r) })
		if i < 0 {
			t.Fatalf("hit %s of no host", hit.URL())
		}
		byHost[i] = append(byHost[i], seen{hit.UserAgent, hit.Header.Get("X-Site-Key"), hit.Header.Get("Accept-Language"), hit.Status})
		counts[hit.Path+"@"+roots[i]]++
	}
	for i, hs := range byHost {
		for _, s := range hs {
			ok := s.UA == cfg.Fetch.UserAgent && s.Key == "" && s.Lang == ""
			if i == 0 {
				ok = slices.Contains(uas, s.UA) && s.Key == "k0" && s.Lang == "fr-FR"
			}
			if !ok {
				t.Errorf("host %d: a request with user agent %q, X-Site-Key %q, Accept-Language %q", i, s.UA, s.Key, s.Lang)
			}
		}
	}
	want := map[string]int{"robots.txt": 1, "nope": cfg.Lease.MaxAttempts}
	for i, r := range roots {
		if i > 0 {
			want["nope"] = 1
		}
		got := map[string]int{"robots.txt": counts["/robots.txt@"+r], "nope": counts["/nope@"+r]}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("host %d: requests (-want +got):\n%s", i, d)
		}
		if counts["/@"+r] != 1 {
			t.Errorf("host %d: root fetched %d times", i, counts["/@"+r])
		}
	}
}

// TestRuleFetchTimeout crawls two hosts of a slow test site (every answer
// after 400ms) with fetch.timeout 150ms: the first host's rule file sets
// a timeout of 5s, and its pages are fetched; the second host's time out.
func TestRuleFetchTimeout(t *testing.T) {
	site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 2, Seed: 3, CrossHostRatio: -1,
		Latency: 400 * time.Millisecond}, 0)
	defer stop()
	roots := site.HostURLs()
	cfg := testConfig(t, site)
	cfg.Politeness.ObeyRobots = false
	cfg.Fetch.Timeout = 150 * time.Millisecond
	cfg.Lease.RetryBase = 20 * time.Millisecond
	cfg.Lease.RetryMax = 100 * time.Millisecond
	publishRules(t, cfg, writeRules(t, "zero.yaml", "hosts: ["+hostOf(t, roots[0])+"]\nfetch: {timeout: 5s}\n"))
	h := newHarness(t, cfg, site)
	u, _ := url.Parse(roots[1])
	if _, err := h.f.Seed(context.Background(), []frontier.Task{frontier.NewTask(u, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	res := h.run(cfg, 1, nil, time.Minute)
	type outcome struct {
		Status   int
		Timeouts int
	}
	got := map[string]outcome{}
	for _, e := range res.events {
		switch {
		case e.Page != nil:
			o := got[e.Page.URL]
			o.Status = e.Page.Status
			got[e.Page.URL] = o
		case e.Exception != nil && e.Exception.Kind == events.KindTimeout:
			o := got[e.Exception.URL]
			o.Timeouts++
			got[e.Exception.URL] = o
		}
	}
	want := map[string]outcome{
		roots[0]:                                {Status: 200},
		site.PageURL(0, 1):                      {Status: 200},
		strings.TrimSuffix(roots[1], "/") + "/": {Timeouts: cfg.Lease.MaxAttempts},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pages (-want +got):\n%s", d)
	}
}

// TestRuleFetchSettingsHotReload runs a slave while the rule file of its
// host changes: the user agent of the new version reaches the site without
// a restart, and the old one never again after it.
func TestRuleFetchSettingsHotReload(t *testing.T) {
	site, _, stop := startSite(t, testsite.Options{Hosts: 1, PagesPerHost: 3, Seed: 3}, 0)
	defer stop()
	root := site.HostURLs()[0]
	cfg := testConfig(t, site)
	cfg.Politeness.ObeyRobots = false
	rule := func(ua string) string {
		return writeRules(t, "site.yaml", "hosts: ["+hostOf(t, root)+"]\nfetch: {user_agents: [\""+ua+"\"]}\n")
	}
	publishRules(t, cfg, rule("Before/1"))
	ctx := context.Background()
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := slaved.New(cfg, slaved.Options{ID: "reload"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	// fetch fetches root?v=n and returns the user agent it came with
	fetch := func(n int) string {
		t.Helper()
		u, _ := url.Parse(root + "?v=" + strconv.Itoa(n))
		if _, err := f.Seed(ctx, []frontier.Task{frontier.NewTask(u, 0, 0)}); err != nil {
			t.Fatal(err)
		}
		path := u.RequestURI()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for _, h := range site.Hits() {
				if h.Path == path {
					return h.UserAgent
				}
			}
		}
		t.Fatalf("%s not fetched in 10s", u)
		return ""
	}
	if ua := fetch(0); ua != "Before/1" {
		t.Fatalf("first version: user agent %q, want Before/1", ua)
	}
	publishRules(t, cfg, rule("After/2"))
	var uas []string
	for n := 1; n < 60 && (len(uas) == 0 || uas[len(uas)-1] != "After/2"); n++ {
		uas = append(uas, fetch(n))
	}
	if len(uas) == 0 || uas[len(uas)-1] != "After/2" {
		t.Fatalf("user agents after the edit: %q; After/2 never came", uas)
	}
	for range 3 {
		uas = append(uas, fetch(len(uas)+1))
	}
	if i := slices.Index(uas, "After/2"); slices.Contains(uas[i:], "Before/1") {
		t.Errorf("user agents after the edit: %q: Before/1 again after After/2", uas)
	}
	t.Logf("user agents after the edit: %q", uas)
}
