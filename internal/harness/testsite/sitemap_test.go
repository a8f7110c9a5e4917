package testsite

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/slave/sitemap"
)

// TestSitemapRoutes: with Options.Sitemaps, host 0 serves each sitemap form
// (as slave/sitemap reads it), robots.txt lists the robots-mode ones, and
// the orphan pages answer; without it they are 404.
func TestSitemapRoutes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, err := Start(Options{Hosts: 2, PagesPerHost: 5, Sitemaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	c := newClient(t)
	root := strings.TrimSuffix(site.HostURLs()[0], "/")
	other := strings.TrimSuffix(site.HostURLs()[1], "/")
	robots := fetch(t, c, root+"/robots.txt")
	if want := "Sitemap: " + root + "/sitemaps/index.xml\nSitemap: " + root + "/sitemaps/orphans.txt\n" +
		"Sitemap: " + root + "/sitemaps/feed.rss\nSitemap: " + root + "/sitemaps/damaged.xml\n"; robots.status != 200 || !strings.HasSuffix(string(robots.body), want) {
		t.Errorf("robots.txt %d %q, want it to end with %q", robots.status, robots.body, want)
	}
	tests := []struct {
		path    string
		format  sitemap.Format
		locs    []string
		errWant error // nil: none
		anyErr  bool
		repairs sitemap.Repairs
	}{
		{path: "/sitemaps/index.xml", format: sitemap.Index, locs: []string{root + "/sitemaps/pages.xml",
			root + "/sitemaps/orphans.xml.gz", root + "/sitemaps/nested.xml", root + "/sitemaps/index.xml"}},
		{path: "/sitemaps/pages.xml", format: sitemap.URLSet, locs: []string{root + "/orphan/0", root + "/orphan/1", root + "/page/1"}},
		{path: "/sitemaps/orphans.xml.gz", format: sitemap.URLSet, locs: []string{root + "/orphan/2", root + "/orphan/3"}},
		{path: "/sitemaps/orphans.txt", format: sitemap.Text, locs: []string{root + "/orphan/4", root + "/orphan/5"}},
		{path: "/sitemaps/feed.rss", format: sitemap.RSS, locs: []string{root + "/orphan/11", root + "/orphan/12"}},
		{path: "/sitemaps/damaged.xml", format: sitemap.Index, repairs: sitemap.Repairs{BareLocs: 1, ExtraLocs: 1},
			locs: []string{root + "/sitemaps/feed.atom", root + "/sitemaps/split1.xml", root + "/sitemaps/split2.txt"}},
		{path: "/sitemaps/feed.atom", format: sitemap.Atom, locs: []string{root + "/orphan/13"}},
		{path: "/sitemaps/split1.xml", format: sitemap.URLSet, locs: []string{root + "/orphan/14"}},
		{path: "/sitemaps/split2.txt", format: sitemap.Text, locs: []string{root + "/orphan/15"}},
		{path: "/sitemaps/nested.xml", format: sitemap.Index, locs: []string{root + "/sitemaps/deep.xml", root + "/sitemaps/nested2.xml"}},
		{path: "/sitemaps/deep.xml", format: sitemap.URLSet, locs: []string{root + "/orphan/6"}},
		{path: "/sitemaps/nested2.xml", format: sitemap.Index, locs: []string{root + "/sitemaps/too-deep.xml"}},
		{path: "/sitemaps/too-deep.xml", format: sitemap.URLSet, locs: []string{root + "/orphan/7"}},
		{path: "/sitemap-seed.xml", format: sitemap.URLSet, locs: []string{root + "/orphan/8", root + "/page/2", other + "/orphan/9"}},
		{path: "/sitemaps/strict.xml", format: sitemap.URLSet, locs: []string{root + "/orphan/10"}},
		{path: "/sitemap-laughs.xml", format: sitemap.URLSet, anyErr: true},
		{path: "/sitemap-bomb.xml.gz", format: sitemap.URLSet, errWant: sitemap.ErrTooLarge},
		{path: "/sitemap-loop.xml", format: sitemap.Index, locs: []string{root + "/sitemap-loop.xml", root + "/sitemap.xml"}},
	}
	for _, tc := range tests {
		r := fetch(t, c, root+tc.path)
		res, err := sitemap.Parse(bytes.NewReader(r.body), sitemap.Limits{})
		var locs []string
		for _, e := range res.Entries {
			locs = append(locs, e.Loc)
		}
		switch {
		case r.status != 200:
			t.Errorf("%s: status %d", tc.path, r.status)
		case tc.errWant != nil && !errors.Is(err, tc.errWant), tc.anyErr && err == nil, tc.errWant == nil && !tc.anyErr && err != nil:
			t.Errorf("%s: parse error %v", tc.path, err)
		case res.Format != tc.format:
			t.Errorf("%s: format %v, want %v", tc.path, res.Format, tc.format)
		case res.Repairs != tc.repairs:
			t.Errorf("%s: repairs %+v, want %+v", tc.path, res.Repairs, tc.repairs)
		}
		if d := cmp.Diff(tc.locs, locs); d != "" {
			t.Errorf("%s: locs (-want +got):\n%s", tc.path, d)
		}
	}
	if r := fetch(t, c, root+"/orphan/3"); r.status != 200 || !bytes.Contains(r.body, []byte("Orphan 3")) {
		t.Errorf("/orphan/3: %d %q", r.status, r.body)
	}
	for _, p := range []string{"/orphan/16", "/sitemaps/other.xml"} {
		if r := fetch(t, c, root+p); r.status != 404 {
			t.Errorf("%s: status %d, want 404", p, r.status)
		}
	}

	plain, err := Start(Options{Hosts: 1, PagesPerHost: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, p := range []string{"/robots.txt", "/sitemaps/index.xml", "/orphan/0", "/sitemap.xml"} {
		if r := fetch(t, c, strings.TrimSuffix(plain.HostURLs()[0], "/")+p); r.status != 404 {
			t.Errorf("without Sitemaps %s: status %d, want 404", p, r.status)
		}
	}
}
