package testsite

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Sitemaps (Options.Sitemaps), all on host 0. Pages /orphan/<n> are linked
// from no page: only sitemaps list them.
//
// Listed in robots.txt (Sitemap: lines; robots.txt is served even without
// Options.Robots), so cross-directory entries are allowed:
//
//	/sitemaps/index.xml      index: pages.xml, orphans.xml.gz, nested.xml, itself
//	/sitemaps/pages.xml      urlset: /orphan/0 (lastmod, priority 0.9), /orphan/1, /page/1, one invalid entry
//	/sitemaps/orphans.xml.gz urlset, gzip file (application/x-gzip): /orphan/2, /orphan/3
//	/sitemaps/nested.xml     index (level 2): deep.xml, nested2.xml
//	/sitemaps/deep.xml       urlset (level 3): /orphan/6
//	/sitemaps/nested2.xml    index (level 3): too-deep.xml, never fetched (level 4)
//	/sitemaps/orphans.txt    text sitemap: /orphan/4, /orphan/5
//	/sitemaps/feed.rss       RSS 2.0 feed: /orphan/11 (pubDate), /orphan/12 (guid, no link)
//	/sitemaps/damaged.xml    damaged index: feed.atom as bare text without <loc>, one
//	                         <sitemap> with two <loc>: split1.xml, split2.txt
//	/sitemaps/feed.atom      Atom feed: /orphan/13 (updated)
//	/sitemaps/split1.xml     urlset: /orphan/14
//	/sitemaps/split2.txt     text sitemap: /orphan/15
//
// Fetched only by crawl.sitemaps: seed, as the seed host's /sitemap.xml (a
// sitemap not listed in robots.txt: its entries must be under its
// directory and on its host):
//
//	/sitemap.xml             index: sitemap-seed.xml, sitemaps/strict.xml and the hostile ones
//	/sitemap-seed.xml        urlset: /orphan/8, /page/2; host 1's /orphan/9 is dropped (another host)
//	/sitemaps/strict.xml     urlset: /orphan/10, dropped (not under /sitemaps/)
//	/sitemap-laughs.xml      a billion-laughs XML bomb: fails on its unknown entity
//	/sitemap-bomb.xml.gz     a gzip file that inflates beyond 50 MB
//	/sitemap-million.xml.gz  1,000,000 URLs (of host 1): parsing stops at 50,000
//	/sitemap-loop.xml        an index listing itself and /sitemap.xml
const (
	orphanPrefix  = "/orphan/"
	sitemapOrphan = 16 // /orphan/0 .. /orphan/15 are served
)

// SitemapInfo says what a crawl that follows the site's sitemaps fetches.
type SitemapInfo struct {
	// Orphans are the /orphan/ pages it reaches (linked from no page).
	Orphans []string
	// Files are the sitemap files it fetches.
	Files []string
	// Hostile are the hostile sitemap files it fetches (mode seed).
	Hostile []string
	// Never are URLs it must not fetch: orphans listed where they may not
	// be (another host, outside the sitemap's directory, too deep) and
	// sitemaps nested too deep.
	Never []string
}

// Sitemaps describes the sitemaps for a crawl.sitemaps mode ("robots" or
// "seed"; crawl.max_depth unlimited). It panics without Options.Sitemaps.
func (s *Site) Sitemaps(mode string) SitemapInfo {
	if !s.opts.Sitemaps {
		panic("testsite: Sitemaps without Options.Sitemaps")
	}
	r := s.hosts[0].root
	var in SitemapInfo
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15} {
		in.Orphans = append(in.Orphans, r+orphanPrefix+strconv.Itoa(n))
	}
	for _, p := range []string{"/robots.txt", "/sitemaps/index.xml", "/sitemaps/pages.xml", "/sitemaps/orphans.xml.gz",
		"/sitemaps/nested.xml", "/sitemaps/deep.xml", "/sitemaps/nested2.xml", "/sitemaps/orphans.txt",
		"/sitemaps/feed.rss", "/sitemaps/damaged.xml", "/sitemaps/feed.atom", "/sitemaps/split1.xml", "/sitemaps/split2.txt"} {
		in.Files = append(in.Files, r+p)
	}
	in.Never = []string{r + orphanPrefix + "7", r + "/sitemaps/too-deep.xml"}
	if mode == "seed" {
		in.Orphans = append(in.Orphans, r+orphanPrefix+"8")
		in.Files = append(in.Files, r+"/sitemap.xml", r+"/sitemap-seed.xml", r+"/sitemaps/strict.xml")
		in.Hostile = []string{r + "/sitemap-laughs.xml", r + "/sitemap-bomb.xml.gz", r + "/sitemap-million.xml.gz", r + "/sitemap-loop.xml"}
		in.Never = append(in.Never, s.hosts[min(1, len(s.hosts)-1)].root+orphanPrefix+"9", r+orphanPrefix+"10")
	}
	return in
}

// sitemapData is what the sitemap routes serve; the large files are built
// on their first request.
type sitemapData struct {
	once    sync.Once
	bomb    []byte
	million []byte
}

// sitemapRoute answers a sitemap path on host; ok is false for a path
// that is not one.
func (s *Site) sitemapRoute(host int, path string) (route, bool) {
	if host != 0 {
		return route{}, false
	}
	if rest, ok := strings.CutPrefix(path, orphanPrefix); ok {
		if n, ok := parseIndex(rest); ok && n < sitemapOrphan {
			return route{kind: routeSitemap, sm: path}, true
		}
		return route{}, true
	}
	switch path {
	case "/robots.txt", "/sitemap.xml", "/sitemap-seed.xml", "/sitemap-laughs.xml", "/sitemap-bomb.xml.gz",
		"/sitemap-million.xml.gz", "/sitemap-loop.xml", "/sitemaps/index.xml", "/sitemaps/pages.xml",
		"/sitemaps/orphans.xml.gz", "/sitemaps/nested.xml", "/sitemaps/deep.xml", "/sitemaps/nested2.xml",
		"/sitemaps/too-deep.xml", "/sitemaps/orphans.txt", "/sitemaps/strict.xml", "/sitemaps/feed.rss",
		"/sitemaps/damaged.xml", "/sitemaps/feed.atom", "/sitemaps/split1.xml", "/sitemaps/split2.txt":
		return route{kind: routeSitemap, sm: path}, true
	}
	return route{}, false
}

const smNS = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"

func smIndex(locs ...string) string {
	var b strings.Builder
	b.WriteString(smNS + `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	for _, l := range locs {
		b.WriteString("  <sitemap><loc>" + l + "</loc></sitemap>\n")
	}
	b.WriteString("</sitemapindex>\n")
	return b.String()
}

func smURLSet(entries ...string) string {
	return smNS + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n" + strings.Join(entries, "\n") + "\n</urlset>\n"
}

func smURL(loc string) string { return "  <url><loc>" + loc + "</loc></url>" }

const billionLaughs = `<?xml version="1.0"?>
<!DOCTYPE urlset [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>/&lol9;</loc></url></urlset>
`

// robotsSitemaps are the Sitemap: lines of host 0's robots.txt, whose
// root URL is root (no trailing slash).
func robotsSitemaps(root string) string {
	var b strings.Builder
	for _, p := range []string{"/sitemaps/index.xml", "/sitemaps/orphans.txt", "/sitemaps/feed.rss", "/sitemaps/damaged.xml"} {
		b.WriteString("Sitemap: " + root + p + "\n")
	}
	return b.String()
}

// feedRSS is the RSS 2.0 feed listed as a sitemap (%s: the host's root
// URL): /orphan/11 with a pubDate, /orphan/12 by its guid.
const feedRSS = `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>News</title><link>%s/</link>
<item><title>Eleven</title><link>%s/orphan/11</link><pubDate>Tue, 05 Mar 2024 10:20:30 +0100</pubDate></item>
<item><title>Twelve</title><guid isPermaLink="true">%s/orphan/12</guid></item>
</channel></rss>
`

// feedAtom is the Atom feed the damaged index lists: /orphan/13.
const feedAtom = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>News</title><link href="%s/"/>
<entry><title>Thirteen</title><link rel="alternate" href="%s/orphan/13"/><updated>2024-03-06T07:08:09Z</updated></entry>
</feed>
`

func gzipBytes(body []byte) []byte {
	var b bytes.Buffer
	z, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // the level is valid
	_, _ = z.Write(body)                                  // writes to a bytes.Buffer don't fail
	_ = z.Close()
	return b.Bytes()
}

// bigFiles builds the gzip bomb (60 MiB of comments) and the
// million-URL file, once.
func (s *Site) bigFiles() *sitemapData {
	d := &s.smData
	d.once.Do(func() {
		var b bytes.Buffer
		z, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = z.Write([]byte(smNS + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n"))
		line := []byte("<!-- padding: no entry, only bytes -->\n")
		block := bytes.Repeat(line, (64<<10)/len(line))
		for w := 0; w < 60<<20; w += len(block) {
			_, _ = z.Write(block)
		}
		_, _ = z.Write([]byte("</urlset>\n"))
		_ = z.Close()
		d.bomb = b.Bytes()

		var m bytes.Buffer
		z.Reset(&m)
		_, _ = z.Write([]byte(smNS + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n"))
		other := s.hosts[min(1, len(s.hosts)-1)].root
		var line2 []byte
		for i := range 1_000_000 {
			line2 = fmt.Appendf(line2[:0], "<url><loc>%s/m/%d</loc></url>\n", other, i)
			_, _ = z.Write(line2)
		}
		_, _ = z.Write([]byte("</urlset>\n"))
		_ = z.Close()
		d.million = m.Bytes()
	})
	return d
}

// serveSitemap answers a sitemap route.
func (s *Site) serveSitemap(w http.ResponseWriter, r *http.Request, h *hostServer, rt route) {
	root := h.root
	other := s.hosts[min(1, len(s.hosts)-1)].root
	const xmlType, textType, gzType = "application/xml", "text/plain; charset=utf-8", "application/x-gzip"
	ctype, body := xmlType, ""
	switch p := rt.sm; {
	case strings.HasPrefix(p, orphanPrefix):
		var b bytes.Buffer
		renderLeaf(&b, "Orphan "+strings.TrimPrefix(p, orphanPrefix), "Linked from no page: only a sitemap lists this page.")
		ctype, body = "text/html; charset=utf-8", b.String()
	case p == "/robots.txt":
		ctype = textType
		if s.opts.Robots {
			body = RobotsTxt
		} else {
			body = "User-agent: *\nDisallow:\n"
		}
		body += robotsSitemaps(root)
	case p == "/sitemaps/index.xml":
		body = smIndex(root+"/sitemaps/pages.xml", root+"/sitemaps/orphans.xml.gz", root+"/sitemaps/nested.xml", root+"/sitemaps/index.xml")
	case p == "/sitemaps/pages.xml":
		body = smURLSet(
			"  <url><loc>"+root+"/orphan/0</loc><lastmod>2024-01-02T03:04:05Z</lastmod><changefreq>daily</changefreq><priority>0.9</priority></url>",
			"  <url><loc>"+root+"/orphan/1</loc><priority>0.1</priority></url>",
			smURL(root+"/page/1"), smURL("/relative/is/invalid"))
	case p == "/sitemaps/orphans.xml.gz":
		ctype, body = gzType, string(gzipBytes([]byte(smURLSet(smURL(root+"/orphan/2"), smURL(root+"/orphan/3")))))
	case p == "/sitemaps/nested.xml":
		body = smIndex(root+"/sitemaps/deep.xml", root+"/sitemaps/nested2.xml")
	case p == "/sitemaps/deep.xml":
		body = smURLSet(smURL(root + "/orphan/6"))
	case p == "/sitemaps/nested2.xml":
		body = smIndex(root + "/sitemaps/too-deep.xml")
	case p == "/sitemaps/too-deep.xml":
		body = smURLSet(smURL(root + "/orphan/7"))
	case p == "/sitemaps/orphans.txt":
		ctype, body = textType, root+"/orphan/4\n"+root+"/orphan/5\n"
	case p == "/sitemaps/feed.rss":
		ctype, body = "application/rss+xml", fmt.Sprintf(feedRSS, root, root, root)
	case p == "/sitemaps/damaged.xml":
		body = smNS + "<sitemapindex>\n  <sitemap>\n    " + root + "/sitemaps/feed.atom\n  </sitemap>\n" +
			"  <sitemap><loc>" + root + "/sitemaps/split1.xml</loc><loc>" + root + "/sitemaps/split2.txt</loc></sitemap>\n</sitemapindex>\n"
	case p == "/sitemaps/feed.atom":
		ctype, body = "application/atom+xml", fmt.Sprintf(feedAtom, root, root)
	case p == "/sitemaps/split1.xml":
		body = smURLSet(smURL(root + "/orphan/14"))
	case p == "/sitemaps/split2.txt":
		ctype, body = textType, root+"/orphan/15\n"
	case p == "/sitemap.xml":
		body = smIndex(root+"/sitemap-seed.xml", root+"/sitemaps/strict.xml", root+"/sitemap-laughs.xml",
			root+"/sitemap-bomb.xml.gz", root+"/sitemap-million.xml.gz", root+"/sitemap-loop.xml")
	case p == "/sitemap-seed.xml":
		body = smURLSet(smURL(root+"/orphan/8"), smURL(root+"/page/2"), smURL(other+"/orphan/9"))
	case p == "/sitemaps/strict.xml":
		body = smURLSet(smURL(root + "/orphan/10"))
	case p == "/sitemap-laughs.xml":
		body = billionLaughs
	case p == "/sitemap-bomb.xml.gz":
		ctype, body = gzType, string(s.bigFiles().bomb)
	case p == "/sitemap-million.xml.gz":
		ctype, body = gzType, string(s.bigFiles().million)
	case p == "/sitemap-loop.xml":
		body = smIndex(root+"/sitemap-loop.xml", root+"/sitemap.xml")
	}
	s.write(w, r, http.StatusOK, ctype, []byte(body))
}
