package slaved

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// TestPlanLinks: the verdict of every URL a page leads to, without the
// frontier: traps first, then the crawl's scope, then the rule set's
// scope; a followed link a render rule covers is marked; upward paths are
// planned after their link.
func TestPlanLinks(t *testing.T) {
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"a.test"}
	cfg.Crawl.MaxPathRepeat = 2
	cfg.Crawl.UpwardPaths = true
	s, err := New(&cfg, Options{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rule := "hosts: [a.test]\nscope: {deny: ['/private/']}\nrender:\n  - match: ['/app/']\n"
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := rules.LoadDir(dir, rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.ruleSet.Store(set)
	var links []*url.URL
	for _, raw := range []string{"http://a.test/x/y", "http://b.test/", "http://a.test/r/r/r/", "http://a.test/private/1", "http://a.test/app/"} {
		u, err := s.canon.Canonicalize(raw)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, u)
	}
	follow, verdicts := s.planLinks(links, 1)
	want := []LinkVerdict{
		{URL: "http://a.test/x/y", Verdict: LinkFollow},
		{URL: "http://a.test/x/", Verdict: LinkFollow, Reason: "upward path"},
		{URL: "http://a.test/", Verdict: LinkFollow, Reason: "upward path"},
		{URL: "http://b.test/", Verdict: LinkOutOfScope, Reason: "out of scope (host)"},
		{URL: "http://a.test/r/r/r/", Verdict: LinkTrap, Reason: "path_repeat"},
		{URL: "http://a.test/r/r/", Verdict: LinkFollow, Reason: "upward path"},
		{URL: "http://a.test/r/", Verdict: LinkFollow, Reason: "upward path"},
		{URL: "http://a.test/private/1", Verdict: LinkOutOfScope, Reason: "out of the scope of rule set a (deny)"},
		{URL: "http://a.test/private/", Verdict: LinkOutOfScope, Reason: "out of the scope of rule set a (deny)"},
		{URL: "http://a.test/app/", Verdict: LinkFollow, Render: true},
	}
	if d := cmp.Diff(want, verdicts); d != "" {
		t.Errorf("verdicts (-want +got):\n%s", d)
	}
	var tasks []string
	for _, pl := range follow {
		tasks = append(tasks, pl.task.URL)
	}
	var wantTasks []string
	for _, v := range want {
		if v.Verdict == LinkFollow {
			wantTasks = append(wantTasks, v.URL)
		}
	}
	if d := cmp.Diff(wantTasks, tasks); d != "" {
		t.Errorf("tasks (-want +got):\n%s", d)
	}
}
