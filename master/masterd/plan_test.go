package masterd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// TestPlanSeedsCanonicalForm: seeds get the crawl's canonical form,
// crawl.strip_params and crawl.sort_query included, as the slaves give
// links (config.Canonicalizer).
func TestPlanSeedsCanonicalForm(t *testing.T) {
	raw := []string{"http://example.com/p?b=2&utm_source=x&a=1", "http://example.com/q?t=2&t=1"}
	tests := []struct {
		sortQuery bool
		want      []string
	}{
		{false, []string{"http://example.com/p?b=2&a=1", "http://example.com/q?t=2&t=1"}},
		{true, []string{"http://example.com/p?a=1&b=2", "http://example.com/q?t=2&t=1"}},
	}
	for _, tc := range tests {
		cfg := config.Default()
		cfg.Crawl.SortQuery = tc.sortQuery
		p, err := planSeeds(&cfg, nil, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, p.urls); d != "" || len(p.rejected) > 0 {
			t.Errorf("sort_query %v: seeds (-want +got):\n%s\nrejected %q", tc.sortQuery, d, p.rejected)
		}
	}
}

// TestLinkPlannerKnown: the work API leaves a link out unplanned only when
// the frontier's link cache holds it and no rule file sets a host's
// politeness (which a planned link would carry to the frontier).
func TestLinkPlannerKnown(t *testing.T) {
	plain, err := rules.LoadDir(t.TempDir(), rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	polite, err := rules.LoadDir("../../rules/examples", rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.SetsPoliteness() || !polite.SetsPoliteness() {
		t.Fatalf("SetsPoliteness: no files %v, rules/examples %v; want false, true", plain.SetsPoliteness(), polite.SetsPoliteness())
	}
	cached := func(u string) bool { return u == "http://a.test/known" }
	tests := []struct {
		name  string
		known func(string) bool
		rules *rules.Set
		url   string
		want  bool
	}{
		{"cached, no rules", cached, nil, "http://a.test/known", true},
		{"cached, rules without politeness", cached, plain, "http://a.test/known", true},
		{"not cached", cached, plain, "http://a.test/new", false},
		{"cached, rules set politeness", cached, polite, "http://a.test/known", false},
		{"no link cache", nil, plain, "http://a.test/known", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := linkPlanner{known: tc.known, rules: func() *rules.Set { return tc.rules }}
			if got := p.Known(tc.url); got != tc.want {
				t.Errorf("Known(%s) = %v, want %v", tc.url, got, tc.want)
			}
		})
	}
}
