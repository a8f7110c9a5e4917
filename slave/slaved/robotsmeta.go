package slaved

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// What a page says about itself: robots meta tags, X-Robots-Tag headers and
// rel="canonical" (docs/crawling.md "Robots meta, X-Robots-Tag and canonical").

// linkOptions are the HTML handler's link extraction options, for the
// crawler's product token (robots.ProductToken of fetch.user_agent, its
// name in robots meta tags, as in robots.txt): built once, in New.
func linkOptions(cfg *config.Config) urlx.LinkOptions {
	opt := urlx.LinkOptions{MaxLinks: maxLinksPerPage, ObeyRelNoFollow: cfg.Crawl.ObeyRelNoFollow,
		IgnoreRobots: !cfg.Crawl.ObeyRobotsMeta}
	if tok := robots.ProductToken(cfg.Fetch.UserAgent); tok != "" && !strings.EqualFold(tok, "robots") {
		opt.MetaNames = []string{tok}
	}
	return opt
}

// headerRobots are the directives of a response's X-Robots-Tag headers for
// this crawler; none when crawl.obey_robots_meta is off.
func (s *Slave) headerRobots(h http.Header) robots.Directives {
	if !s.cfg.Crawl.ObeyRobotsMeta {
		return robots.Directives{}
	}
	return robots.HeaderDirectives(h.Values("X-Robots-Tag"), s.token)
}

// linkHeaderCanonical returns the target of the first rel="canonical" link
// of a response's Link headers (RFC 8288: `<url>; rel="canonical"`), as
// written, or "".
func linkHeaderCanonical(h http.Header) string {
	for _, v := range h.Values("Link") {
		for n := 0; n < 100; n++ { // links per header value, bounded
			start := strings.IndexByte(v, '<')
			if start < 0 {
				break
			}
			end := strings.IndexByte(v[start:], '>')
			if end < 0 {
				break
			}
			target := v[start+1 : start+end]
			rest := v[start+end+1:]
			params := rest // up to the next link
			next := strings.IndexByte(rest, '<')
			if next >= 0 {
				params = rest[:next]
			}
			for p := range strings.SplitSeq(params, ";") {
				k, val, ok := strings.Cut(p, "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, r := range strings.Fields(strings.Trim(strings.TrimSpace(val), `",`)) {
					if strings.EqualFold(r, "canonical") {
						return target
					}
				}
			}
			if next < 0 {
				break
			}
			v = rest[next:]
		}
	}
	return ""
}

// canonicalOf is the canonical URL a 2xx document names: its <link
// rel="canonical">, else its Link header's, resolved against the
// document's URL; "" when none or unusable.
func (s *Slave) canonicalOf(d *Doc) string {
	if d.Canonical != "" {
		return d.Canonical
	}
	ref := linkHeaderCanonical(d.Header)
	if ref == "" {
		return ""
	}
	cu, err := s.canon.Resolve(d.URL, ref)
	if err != nil || len(cu.String()) > urlx.MaxURLLength {
		return ""
	}
	return cu.String()
}

// followCanonical handles a page whose canonical URL is another URL of the
// same host, with crawl.follow_canonical: the canonical URL is enqueued as
// a link of the page (unless the page said nofollow) and the page recorded
// as its duplicate (duplicates.first_url = the canonical URL). The page's
// own links are followed all the same: a canonical is a hint, not a
// statement that the page has nothing else.
func (s *Slave) followCanonical(c *frontier.Completion, page *events.Page, u *url.URL, nofollow bool) {
	if !s.cfg.Crawl.FollowCanonical || page.Canonical == "" {
		return
	}
	cu, err := url.Parse(page.Canonical)
	if err != nil || page.Canonical == u.String() || page.Canonical == c.Lease.URL ||
		!strings.EqualFold(cu.Hostname(), u.Hostname()) {
		return
	}
	if !nofollow {
		s.addLinks(c, []*url.URL{cu}, c.Lease.Depth+1, "canonical")
	}
	s.addEvent(c, &events.Duplicate{Crawl: s.cfg.Crawl.Name, URL: c.Lease.URL, FirstURL: page.Canonical,
		ContentHash: page.Checksum, Slave: s.id, At: s.now().UnixMilli()})
}
