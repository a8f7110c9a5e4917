package slaved_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/events"
)

// TestSitemapCrawl crawls the test site's sitemaps end to end: pages that
// no page links to are reached through robots.txt's Sitemap: lines, a
// sitemap index, a gzip file, a text sitemap, nested indexes (down to
// the level limit), an RSS and an Atom feed, and a damaged index (a bare
// URL, two <loc> in one entry) recorded as a sitemap exception; with crawl.sitemaps: seed also through the seed host's
// /sitemap.xml, whose hostile sitemaps (a billion-laughs bomb, a gzip bomb,
// a million URLs, an index listing itself) stay bounded and are recorded,
// and whose URLs on another host or outside its directory are dropped.
func TestSitemapCrawl(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// the damaged index's exception says what was repaired
	damagedIndex := []string{"sitemapindex damaged, recovered as crawler-commons does",
		"1 entry without <loc> (the text read as the URL)", "1 extra <loc> in one entry (each read as an entry of its own)"}
	tests := []struct {
		mode     string
		strategy string
		shards   int
		// exceptions: sitemap URL path -> parts of its sitemap exception
		exceptions map[string][]string
	}{
		{mode: "robots", strategy: "bfs", shards: 1, exceptions: map[string][]string{
			"/sitemaps/index.xml":   {"1 the index itself"},
			"/sitemaps/pages.xml":   {"1 invalid"},
			"/sitemaps/nested2.xml": {"1 nested deeper than 3 levels"},
			"/sitemaps/damaged.xml": damagedIndex,
		}},
		{mode: "seed", strategy: "priority", shards: 4, exceptions: map[string][]string{
			"/sitemaps/damaged.xml":   damagedIndex,
			"/sitemaps/index.xml":     {"1 the index itself"},
			"/sitemaps/pages.xml":     {"1 invalid"},
			"/sitemaps/nested2.xml":   {"1 nested deeper than 3 levels"},
			"/sitemap-seed.xml":       {"1 not under http://127.0.0.2:"},
			"/sitemaps/strict.xml":    {"1 not under http://127.0.0.2:", "/sitemaps/"},
			"/sitemap-laughs.xml":     {"urlset stopped after 0 entries", "invalid character entity &lol9;"},
			"/sitemap-bomb.xml.gz":    {"over the protocol's limits", "sitemap too large: more than 52428800 bytes"},
			"/sitemap-million.xml.gz": {"over the protocol's limits", "kept the first 50000", "50000 not under"},
			"/sitemap-loop.xml":       {"1 the index itself"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 10, Robots: true, Sitemaps: true, Seed: 3}, 0)
			defer stop()
			cfg := testConfig(t, site)
			cfg.Crawl.Sitemaps, cfg.Crawl.Strategy, cfg.Crawl.Shards = tc.mode, tc.strategy, tc.shards
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			res := crawl(t, cfg, site, 2, 2*time.Minute)
			info := site.Sitemaps(tc.mode)
			hits := site.HitCounts()
			for u := range site.Expected() {
				if hits[u] == 0 {
					t.Errorf("page %s never fetched", u)
				}
			}
			for _, group := range [][]string{info.Orphans, info.Files, info.Hostile} {
				for _, u := range group {
					if hits[u] != 1 {
						t.Errorf("%s fetched %d times, want 1", u, hits[u])
					}
				}
			}
			for _, u := range info.Never {
				if hits[u] != 0 {
					t.Errorf("%s fetched %d times, want never", u, hits[u])
				}
			}
			root := site.HostURLs()[0]
			root = strings.TrimSuffix(root, "/")
			pages := res.pages()
			for path, lastmod := range map[string]time.Time{
				"/orphan/0":  time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),   // a urlset's <lastmod>
				"/orphan/11": time.Date(2024, 3, 5, 9, 20, 30, 0, time.UTC), // an RSS <pubDate>
				"/orphan/13": time.Date(2024, 3, 6, 7, 8, 9, 0, time.UTC),   // an Atom <updated>
			} {
				if p := pages[root+path]; p == nil || p.LastMod != lastmod.Unix() {
					t.Errorf("page %s = %+v, want lastmod %v", path, p, lastmod)
				}
			}
			for _, u := range append(append([]string{}, info.Files[1:]...), info.Hostile...) {
				if p := pages[u]; p == nil || p.Handler != "sitemap" {
					t.Errorf("sitemap %s: page %+v, want handler sitemap", u, p)
				}
			}
			got := map[string][]string{}
			for _, e := range res.events {
				if x := e.Exception; x != nil && x.Kind == events.KindSitemap {
					got[strings.TrimPrefix(x.URL, root)] = append(got[strings.TrimPrefix(x.URL, root)], x.Message)
				}
			}
			for path, parts := range tc.exceptions {
				if len(got[path]) != 1 {
					t.Errorf("%s: sitemap exceptions %q, want one", path, got[path])
					continue
				}
				for _, part := range parts {
					if !strings.Contains(got[path][0], part) {
						t.Errorf("%s: exception %q does not say %q", path, got[path][0], part)
					}
				}
			}
			for path, msgs := range got {
				if _, ok := tc.exceptions[path]; !ok {
					t.Errorf("unexpected sitemap exception on %s: %q", path, msgs)
				}
			}
		})
	}
}
