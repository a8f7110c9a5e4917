package masterd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
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
