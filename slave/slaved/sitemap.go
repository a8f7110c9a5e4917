package slaved

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/slave/sitemap"
)

// Sitemaps (docs/crawling.md "Sitemaps"). A sitemap is fetched as a task like any
// other (politeness, robots.txt, session, body and decompression caps);
// what makes it one is either its task's Sitemap level (it was listed in a
// robots.txt, in a sitemap index, or is a seed host's /sitemap.xml: then a
// feed, RSS or Atom, is read as one too) or its content: an XML document
// whose root element is urlset or sitemapindex.
// The pages it lists become the completion's links (scope, traps, dedup,
// later robots.txt and politeness, as links), one level deeper than the
// sitemap; the sitemaps an index lists become sitemap tasks one nesting
// level down, at the index's own depth.

// maxSitemapLevel is the deepest sitemap nesting followed: 1 is a sitemap
// listed in robots.txt (or a seed's /sitemap.xml), 2 one listed in an
// index of level 1, and so on. An index that lists itself is stopped by
// dedup, a cycle of indexes by this level.
const maxSitemapLevel = 3

// maxRobotsSitemaps bounds the Sitemap: lines of one robots.txt followed.
const maxRobotsSitemaps = 100

// sitemapMode is the crawl.sitemaps mode for a URL: its rule set's when
// it has one.
func (s *Slave) sitemapMode(u *url.URL) string {
	if rs := s.ruleFor(u); rs != nil && rs.Sitemaps != "" {
		return rs.Sitemaps
	}
	return s.cfg.Crawl.Sitemaps
}

// sitemapTask scopes and builds a sitemap task at a nesting level.
func (s *Slave) sitemapTask(c *frontier.Completion, u *url.URL, depth, level int, anyHost bool) (frontier.Task, bool) {
	if ok, _ := s.traps.Check(u); !ok {
		return frontier.Task{}, false
	}
	t, ok := s.linkTask(c, u, depth, 0)
	if !ok {
		return frontier.Task{}, false
	}
	t.Sitemap, t.SitemapAnyHost, t.Render = level, anyHost, false
	if s.cfg.Crawl.Strategy == "priority" {
		t.Score = 1 // a sitemap leads to many pages: fetch it early
	}
	return t, true
}

// robotsSitemaps enqueues the Sitemap: lines of a robots.txt just fetched
// for u's host (once per host per robots_ttl: the record is shared by
// every slave), as level-1 sitemap tasks that may list any host in scope.
func (s *Slave) robotsSitemaps(c *frontier.Completion, u *url.URL, r *robots.Robots) {
	if s.sitemapMode(u) == "off" {
		return
	}
	listed := r.Sitemaps()
	var dropped []string
	for i, raw := range listed {
		if i == maxRobotsSitemaps {
			dropped = append(dropped, fmt.Sprintf("%d beyond the first %d", len(listed)-i, maxRobotsSitemaps))
			break
		}
		su, err := s.canon.Canonicalize(raw)
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("%q: %v", raw, err))
			continue
		}
		if t, ok := s.sitemapTask(c, su, 0, 1, true); ok {
			c.Links = append(c.Links, t)
		} else {
			dropped = append(dropped, su.String()+": out of scope or a trap")
		}
	}
	if len(dropped) > 0 {
		s.exception(c, events.KindSitemap, 0, fmt.Sprintf("robots.txt of %s: %d sitemaps not followed: %s",
			u.Host, len(dropped), strings.Join(dropped[:min(len(dropped), 10)], "; ")))
	}
}

// seedSitemap adds a seed host's /sitemap.xml (crawl.sitemaps: seed) as a
// level-1 sitemap task limited to its host.
func (s *Slave) seedSitemap(c *frontier.Completion, u *url.URL) {
	l := c.Lease
	if l.Depth != 0 || l.Hops != 0 || l.Sitemap != 0 || s.sitemapMode(u) != "seed" {
		return
	}
	su, err := s.canon.Canonicalize(u.Scheme + "://" + u.Host + "/sitemap.xml")
	if err != nil || su.String() == l.URL {
		return
	}
	if t, ok := s.sitemapTask(c, su, 0, 1, false); ok {
		c.Links = append(c.Links, t)
	}
}

// carrySitemap keeps a sitemap task's marks, and a page's lastmod, on the
// target of its redirect.
func carrySitemap(t *frontier.Task, l frontier.Lease) {
	t.LastMod = l.LastMod
	if l.Sitemap > 0 {
		t.Sitemap, t.SitemapAnyHost, t.Render = l.Sitemap, l.SitemapAnyHost, false
	}
}

// sitemapTypes are the media types a document must have to be taken for a
// sitemap by its content alone (its root element decides).
func sitemapType(mt string) bool {
	switch mt {
	case "application/xml", "text/xml", "application/gzip", "application/x-gzip":
		return true
	}
	return false
}

// sitemapDoc handles a 2xx document that is a sitemap and reports whether
// it was one: a sitemap task's body whatever its type (a text sitemap has
// no mark of its own) unless it is HTML, or an XML document whose root
// element is urlset or sitemapindex.
func (s *Slave) sitemapDoc(c *frontier.Completion, page *events.Page, doc *Doc) bool {
	l := c.Lease
	if l.Sitemap == 0 && !sitemapType(doc.MediaType) {
		return false // an ordinary page: no rule lookup
	}
	if s.sitemapMode(doc.URL) == "off" {
		return false
	}
	if l.Sitemap == 0 {
		// by its content only a urlset or an index: a feed found by a
		// link is a document (its items are read as a sitemap's only
		// when it was listed as one)
		if f := sitemap.DetectXML(doc.Body.NewReader()); !sitemapType(doc.MediaType) || f != sitemap.URLSet && f != sitemap.Index {
			return false
		}
	} else if doc.MediaType == "text/html" {
		return false // a page where a sitemap was expected: crawled as a page
	}
	page.Handler = "sitemap"
	res, err := sitemap.Parse(doc.Body.NewReader(), sitemap.Limits{})
	level := max(l.Sitemap, 1)
	base := doc.URL
	dir := base.EscapedPath()
	dir = dir[:strings.LastIndexByte(dir, '/')+1]
	drops := map[string]int{}
	drop := func(why string) { drops[why]++ }
	if res.Invalid > 0 {
		drops["invalid"] = res.Invalid
	}
	for _, e := range res.Entries {
		lu, err := s.canon.Canonicalize(e.Loc)
		if err != nil {
			drop("invalid")
			continue
		}
		if !l.SitemapAnyHost && (lu.Scheme != base.Scheme || urlx.HostKey(lu) != urlx.HostKey(base) ||
			!strings.HasPrefix(lu.EscapedPath(), dir)) {
			drop("not under " + base.Scheme + "://" + base.Host + dir)
			continue
		}
		if res.Format == sitemap.Index {
			switch {
			case lu.String() == l.URL || lu.String() == base.String():
				drop("the index itself")
			case level+1 > maxSitemapLevel:
				drop(fmt.Sprintf("nested deeper than %d levels", maxSitemapLevel))
			default:
				if t, ok := s.sitemapTask(c, lu, l.Depth, level+1, l.SitemapAnyHost); ok {
					c.Links = append(c.Links, t)
				} else {
					drop("out of scope or a trap")
				}
			}
			continue
		}
		if ok, why := s.traps.Check(lu); !ok {
			drop("trap: " + why)
			continue
		}
		t, ok := s.linkTask(c, lu, l.Depth+1, 0)
		if !ok {
			drop("out of scope")
			continue
		}
		if !e.LastMod.IsZero() {
			t.LastMod = e.LastMod.Unix()
		}
		if e.HasPriority && s.cfg.Crawl.Strategy == "priority" {
			t.Score = e.Priority
		}
		c.Links = append(c.Links, t)
	}
	if err != nil || len(drops) > 0 || !res.Repairs.IsZero() {
		var msg []string
		switch {
		case errors.Is(err, sitemap.ErrNotSitemap):
			msg = append(msg, err.Error())
		case err != nil:
			what := "stopped"
			if errors.Is(err, sitemap.ErrTooManyURLs) || errors.Is(err, sitemap.ErrTooLarge) {
				what = "over the protocol's limits"
			}
			msg = append(msg, fmt.Sprintf("%s %s after %d entries: %v", res.Format, what, len(res.Entries), err))
		}
		if !res.Repairs.IsZero() {
			msg = append(msg, fmt.Sprintf("%s damaged, recovered as crawler-commons does: %s", res.Format, res.Repairs))
		}
		if len(drops) > 0 {
			n := 0
			var why []string
			for w, k := range drops {
				n += k
				why = append(why, fmt.Sprintf("%d %s", k, w))
			}
			sort.Strings(why)
			msg = append(msg, fmt.Sprintf("%d of %d entries dropped: %s", n, len(res.Entries)+res.Invalid, strings.Join(why, ", ")))
		}
		s.exception(c, events.KindSitemap, page.Status, "sitemap: "+strings.Join(msg, "; "))
	}
	page.Links = len(c.Links)
	return true
}
