package plan_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/plan"
	"github.com/redcrawl/redcrawl/shared/rules"
)

const shopRules = `name: shop
hosts: [shop.test]
scope:
  deny: [/cart]
strategy: dfs
politeness:
  delay: 1500ms
render:
  - match: [/app/]
`

func planner(t *testing.T, mod func(*config.Config)) (*plan.Planner, *rules.Set) {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = "plan"
	cfg.Crawl.AllowHosts = []string{"shop.test", "*.blog.test"}
	cfg.Crawl.MaxDepth = 5
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(shopRules), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := rules.LoadDir(dir, rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, set
}

// TestTask: a URL's task as the crawl's scope, its rule set and the
// strategy make it, or why it is refused.
func TestTask(t *testing.T) {
	p, set := planner(t, nil)
	pri, _ := planner(t, func(c *config.Config) { c.Crawl.Strategy = frontier.StrategyPriority })
	type want struct {
		Task   frontier.Task
		Policy *frontier.HostPolicy
		Why    string
		OK     bool
	}
	for _, tc := range []struct {
		name  string
		p     *plan.Planner
		url   string
		depth int
		want  want
	}{
		{"a page", p, "http://x.blog.test/a?q=1", 2, want{Task: frontier.Task{URL: "http://x.blog.test/a?q=1",
			Host: "x.blog.test", ScopeHost: "x.blog.test", Depth: 2, Priority: 2, PathKey: "http://x.blog.test/a"}, OK: true}},
		{"another host", p, "http://elsewhere.test/", 1, want{Why: "out of scope (host)"}},
		{"too deep", p, "http://shop.test/a", 6, want{Why: "out of scope (depth)"}},
		{"the rule set's deny", p, "http://shop.test/cart", 1, want{Why: "out of the scope of rule set shop (deny)"}},
		{"rendered, dfs within the site, the site's politeness", p, "http://shop.test/app/1", 3, want{Task: frontier.Task{
			URL: "http://shop.test/app/1", Host: "shop.test", ScopeHost: "shop.test", Depth: 3, Priority: -3, Render: true},
			Policy: &frontier.HostPolicy{Delay: 1500 * time.Millisecond, Jitter: -1}, OK: true}},
		{"priority: the URL's importance", pri, "http://x.blog.test/", 1, want{Task: frontier.Task{URL: "http://x.blog.test/",
			Host: "x.blog.test", ScopeHost: "x.blog.test", Depth: 1, Priority: 1, Score: 1}, OK: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			var got want
			got.Task, got.Policy, got.Why, got.OK = tc.p.Task(u, tc.depth, 0, set.Match(u))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestReported: a URL a slave reported is canonicalized, trap-checked and
// planned; what is not a URL, a trap or out of scope is refused with why.
func TestReported(t *testing.T) {
	p, set := planner(t, nil)
	for _, tc := range []struct {
		raw     string
		wantURL string
		wantErr string
	}{
		{"HTTP://Shop.TEST:80/a/../b#frag", "http://shop.test/b", ""},
		{"javascript:alert(1)", "", "plan"},
		{"http://shop.test/" + strings.Repeat("a/", 60), "", "crawler trap"},
		{"http://evil.test/", "", "out of scope"},
	} {
		task, _, err := p.Reported(tc.raw, 1, 0, set.Match)
		if tc.wantErr == "" && (err != nil || task.URL != tc.wantURL) {
			t.Errorf("%q: %q, %v; want %q", tc.raw, task.URL, err, tc.wantURL)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q: %v; want an error with %q", tc.raw, err, tc.wantErr)
		}
	}
}
