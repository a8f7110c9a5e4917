package slaved

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestSitemapDoc: which 2xx documents are read as sitemaps, and what a
// feed, a damaged index or a bogus text file gives. A document is taken
// for a sitemap by its content only when it is a urlset or an index; a
// feed only when it was listed as a sitemap (robots.txt, an index, the
// seed probe).
func TestSitemapDoc(t *testing.T) {
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"a.test"}
	s, err := New(&cfg, Options{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	const rss = `<rss version="2.0"><channel><link>http://a.test/</link>` +
		`<item><link>http://a.test/post/1</link><pubDate>Tue, 05 Mar 2024 10:20:30 +0100</pubDate></item>` +
		`<item><guid>http://a.test/post/2</guid></item></channel></rss>`
	type link struct {
		URL     string
		LastMod int64
	}
	type want struct {
		Handler   string
		Links     []link
		Exception string // a part of the sitemap exception's message; "" = none
	}
	lastmod := time.Date(2024, 3, 5, 9, 20, 30, 0, time.UTC).Unix()
	tests := []struct {
		name    string
		level   int // the lease's Sitemap level
		ctype   string
		body    string
		want    want
		exclude string // the exception must not say this
	}{
		{"urlset by its content", 0, "application/xml", `<urlset><url><loc>http://a.test/p</loc></url></urlset>`,
			want{Handler: "sitemap", Links: []link{{URL: "http://a.test/p"}}}, ""},
		{"a feed found by a link is a document", 0, "application/rss+xml", rss, want{Handler: "store"}, ""},
		{"a feed served as XML and found by a link is a document", 0, "application/xml", rss, want{Handler: "store"}, ""},
		{"a feed listed as a sitemap", 1, "application/rss+xml", rss,
			want{Handler: "sitemap", Links: []link{{"http://a.test/post/1", lastmod}, {"http://a.test/post/2", 0}}}, ""},
		{"an atom feed listed as a sitemap, out-of-scope entry dropped", 1, "application/atom+xml",
			`<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="http://a.test/e"/></entry>` +
				`<entry><link href="http://b.test/e"/></entry></feed>`,
			want{Handler: "sitemap", Links: []link{{URL: "http://a.test/e"}}, Exception: "1 of 2 entries dropped: 1 not under http://a.test/"}, "damaged"},
		{"damaged index", 1, "application/xml",
			`<sitemapindex><sitemap>http://a.test/s1.xml</sitemap><sitemap><loc>http://a.test/s2.xml</loc><loc>http://a.test/s3.xml</loc></sitemap></sitemapindex>`,
			want{Handler: "sitemap", Links: []link{{URL: "http://a.test/s1.xml"}, {URL: "http://a.test/s2.xml"}, {URL: "http://a.test/s3.xml"}},
				Exception: "sitemapindex damaged, recovered as crawler-commons does: 1 entry without <loc> (the text read as the URL), " +
					"1 extra <loc> in one entry (each read as an entry of its own)"}, ""},
		{"bogus text listed as a sitemap", 1, "text/plain", "this is a bogus sitemap\n",
			want{Handler: "sitemap", Exception: "not a sitemap: text without an http(s) URL (1 non-blank line)"}, "dropped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse("http://a.test/feed")
			l := frontier.Lease{Task: frontier.Task{URL: u.String(), Host: "a.test", Sitemap: tc.level}}
			res := Response{Status: 200, Header: http.Header{"Content-Type": {tc.ctype}}, Body: testBody(t, tc.body, 1<<20)}
			c := s.handle(context.Background(), frontier.Completion{Lease: l, Outcome: frontier.Done}, u, &res, nil)
			var got want
			for _, lk := range c.Links {
				got.Links = append(got.Links, link{lk.URL, lk.LastMod})
			}
			var msgs []string
			for _, e := range c.Events {
				env, err := events.Decode("1-1", e.Type, e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if x := env.Exception; x != nil && x.Kind == events.KindSitemap {
					msgs = append(msgs, x.Message)
				}
				if env.Page != nil {
					got.Handler = env.Page.Handler
				}
			}
			if len(msgs) > 1 {
				t.Errorf("%d sitemap exceptions %q, want at most one", len(msgs), msgs)
			}
			if len(msgs) == 1 {
				got.Exception = msgs[0]
				if tc.want.Exception != "" && strings.Contains(msgs[0], tc.want.Exception) {
					got.Exception = tc.want.Exception // the part checked is there
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if tc.exclude != "" && len(msgs) == 1 && strings.Contains(msgs[0], tc.exclude) {
				t.Errorf("exception %q says %q", msgs[0], tc.exclude)
			}
		})
	}
}
