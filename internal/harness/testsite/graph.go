package testsite

import "strconv"

// kind is what a link points to.
type kind uint8

const (
	kindPage       kind = iota // ordinary page n of host
	kindPrivate                // /private/n of host, disallowed by robots.txt
	kindRedirect               // /redirect/n on host 0, n in 1..3
	kindFlaky                  // /flaky on host 0
	kindMissing                // /missing on host 0
	kindRetryAfter             // /retry-after on host 0
	kindMailto                 // a mailto: link, not crawlable
	kindJavascript             // a javascript: link, not crawlable
	kindHostile                // the hub /hostile/ on host 0, not part of Expected
	kindShop                   // the catalogue /shop/ on host 1, not part of Expected
	kindMeta                   // the hub /meta/ on host 0, not part of Expected
	kindFailing                // /status/503 on a failing host, not part of Expected
	kindLeaf                   // /leaf/n: linked from one page only (Options.Leaves)
)

// redirectHops is the length of the redirect chain.
const redirectHops = 3

// target is a node of the site's graph.
type target struct {
	kind kind
	host int
	n    int
}

func pageT(host, n int) target { return target{kind: kindPage, host: host, n: n} }

// path is the target's canonical path, or "" for non-HTTP targets.
func (t target) path() string {
	switch t.kind {
	case kindPage:
		return pagePath(t.n)
	case kindPrivate:
		return "/private/" + strconv.Itoa(t.n)
	case kindRedirect:
		return "/redirect/" + strconv.Itoa(t.n)
	case kindFlaky:
		return "/flaky"
	case kindMissing:
		return "/missing"
	case kindRetryAfter:
		return "/retry-after"
	case kindHostile:
		return hostilePrefix
	case kindShop:
		return shopPrefix
	case kindMeta:
		return metaPrefix
	case kindFailing:
		return FailingPath
	case kindLeaf:
		return "/leaf/" + strconv.Itoa(t.n)
	}
	return ""
}

// leafOf is the leaf page n of host links to (Options.Leaves), and
// whether it has one.
func (s *Site) leafOf(host, n int) (target, bool) {
	o := &s.opts
	if !o.Leaves || n == 0 || n%3 != 0 {
		return target{}, false
	}
	to := (host + 1) % o.Hosts
	if n%6 == 0 {
		to = host
	}
	return target{kind: kindLeaf, host: to, n: host*o.PagesPerHost + n}, true
}

// leafRoute reports whether /leaf/<n> of host is a leaf.
func (s *Site) leafRoute(host, n int) bool {
	o := &s.opts
	if n < 0 || n >= o.Hosts*o.PagesPerHost {
		return false
	}
	t, ok := s.leafOf(n/o.PagesPerHost, n%o.PagesPerHost)
	return ok && t.host == host
}

// pagePath is the canonical path of page n.
func pagePath(n int) string {
	if n == 0 {
		return "/"
	}
	return "/page/" + strconv.Itoa(n)
}

// form is how a link's href is written.
type form uint8

const (
	formPlain         form = iota // "/page/3", or absolute for another host, or relative under a <base>
	formFragment                  // plain + "#top"
	formAmpFragment               // plain + "#x=1&amp;y=2"
	formDotSegment                // "/page/../page/3", in single quotes
	formDotSlash                  // "./3" from /page/, "./page/3" from /
	formUpperScheme               // "HTTP://127.0.0.2:port/page/3", in an upper-case <A HREF>
	formProtoRelative             // "//127.0.0.2:port/page/3"
	formSelfFragment              // "#top", the document itself
)

// link is one <a href> on a page.
type link struct {
	to   target
	form form
}

// pageInfo is a page's content apart from its padding.
type pageInfo struct {
	host, n  int
	baseHost int  // host of the <base href> (always its root), -1 for none
	baseAbs  bool // the <base href> is an absolute URL, not "/"
	links    []link
	rev      int // the page's revision (revisions.go), set after build
}

// rng is a splitmix64 generator: tiny, allocation-free and good enough
// for a synthetic graph.
type rng struct{ s uint64 }

const golden = 0x9e3779b97f4a7c15

// mix is splitmix64's finalizer.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) next() uint64 {
	r.s += golden
	return mix(r.s)
}

// intn returns a number in [0, n); n must be positive.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// float returns a number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// Streams of pseudo-random numbers per page.
const (
	streamLinks   = 1
	streamPadding = 2
)

// newRNG returns the generator of one stream of page n of host.
func newRNG(seed int64, stream, host, n int) rng {
	s := mix(uint64(seed) + golden)
	s = mix(s ^ (uint64(stream) + golden))
	s = mix(s ^ (uint64(host) + golden))
	s = mix(s ^ (uint64(n) + golden))
	return rng{s: s}
}

// redirectTarget is where the last redirect hop points: a page of host 0.
func (s *Site) redirectTarget() target { return pageT(0, s.opts.PagesPerHost/2) }

// build fills pi with page n of host, reusing pi.links.
func (s *Site) build(pi *pageInfo, host, n int) {
	o := &s.opts
	*pi = pageInfo{host: host, n: n, baseHost: -1, links: pi.links[:0]}
	r := newRNG(o.Seed, streamLinks, host, n)
	add := func(t target, f form) { pi.links = append(pi.links, link{to: t, form: f}) }

	// The guarantees: the next page, and from a root every other root.
	if n+1 < o.PagesPerHost {
		add(pageT(host, n+1), formPlain)
	}
	if n == 0 {
		for h := range o.Hosts {
			if h != host {
				add(pageT(h, 0), formPlain)
			}
		}
		if host == 0 && o.Specials {
			add(target{kind: kindRedirect, n: 1}, formPlain)
			add(target{kind: kindFlaky}, formPlain)
			add(target{kind: kindMissing}, formPlain)
			add(target{kind: kindRetryAfter}, formPlain)
		}
	}
	// Random links, some to other hosts.
	for range o.LinksPerPage - 1 {
		h := host
		if o.Hosts > 1 && r.float() < o.CrossHostRatio {
			h = (host + 1 + r.intn(o.Hosts-1)) % o.Hosts
		}
		add(pageT(h, r.intn(o.PagesPerHost)), formPlain)
	}
	pages := len(pi.links) // the plain links written so far, duplicated below
	if t, ok := s.leafOf(host, n); ok {
		add(t, formPlain)
	}

	if o.Robots {
		if n%5 == 2 {
			add(target{kind: kindPrivate, host: host, n: r.intn(o.PagesPerHost)}, formPlain)
		}
		if n%25 == 12 && o.Hosts > 1 {
			h := (host + 1 + r.intn(o.Hosts-1)) % o.Hosts
			add(target{kind: kindPrivate, host: h, n: r.intn(o.PagesPerHost)}, formPlain)
		}
	}

	if n == 0 && host == 0 && o.Hostile {
		add(target{kind: kindHostile}, formPlain)
	}
	if n == 0 && host == 0 && o.Meta {
		add(target{kind: kindMeta}, formPlain)
	}
	if n == 0 && host < o.FailingHosts {
		add(target{kind: kindFailing, host: host}, formPlain)
	}
	if n == 0 && host == shopHost && o.Dynamic {
		add(target{kind: kindShop, host: shopHost}, formPlain)
	}

	switch n % 14 {
	case 5:
		pi.baseHost = host
	case 9:
		pi.baseHost, pi.baseAbs = host, true
	case 12:
		pi.baseHost, pi.baseAbs = (host+1)%o.Hosts, true
	}

	// Tricky duplicates of plain links, never new pages.
	if pages > 0 {
		dup := func(f form) { add(pi.links[r.intn(pages)].to, f) }
		if n%4 == 1 {
			dup(formFragment)
		}
		if n%9 == 7 {
			dup(formAmpFragment)
		}
		if n%6 == 2 {
			dup(formDotSegment)
		}
		if n%6 == 3 {
			dup(formDotSlash)
		}
		if n%10 == 4 {
			dup(formUpperScheme)
		}
		if n%10 == 9 {
			dup(formProtoRelative)
		}
	}
	if n%8 == 0 {
		add(target{kind: kindMailto}, formPlain)
		add(target{kind: kindJavascript}, formPlain)
		if pi.baseHost < 0 { // under a <base>, "#top" would be the base's page
			add(pageT(host, n), formSelfFragment)
		}
	}
}

// crawlable reports whether Expected counts t: whether a correct crawler
// requests t when it finds a link to it, the hostile hub and the shop
// aside (a crawler requests them, but Expected leaves them out).
func (s *Site) crawlable(t target) bool {
	switch t.kind {
	case kindPage, kindRedirect, kindFlaky, kindMissing, kindRetryAfter, kindLeaf:
		return true
	}
	return false // private pages (robots.txt), hostile, dynamic and failing pages, non-HTTP links
}

// requests is how many requests a correct crawler makes to t: one, or two
// for the targets that fail once (and are retried).
func requests(t target) int {
	if t.kind == kindFlaky || t.kind == kindRetryAfter {
		return 2
	}
	return 1
}

// url is t's canonical absolute URL.
func (s *Site) url(t target) string { return s.hosts[t.host].root + t.path() }

// Expected returns, for every URL a correct crawler requests when it
// starts from Seeds and follows every link and redirect (depth
// unlimited, honouring robots.txt), the number of requests it makes: 1
// for every page, redirect hop and /missing, 2 for /flaky and
// /retry-after (a failure, then a success). /robots.txt, /private/
// pages, the hostile pages (Options.Hostile), the dynamic pages
// (Options.Dynamic) and the failing pages (Options.FailingHosts) are not
// included. Keys
// are canonical absolute URLs, as PageURL and the site's plain links
// write them. The map is computed by a breadth-first search of the graph
// and is the caller's to keep.
func (s *Site) Expected() map[string]int {
	out := make(map[string]int)
	seen := make(map[target]bool)
	var queue []target
	push := func(t target) {
		if !seen[t] {
			seen[t] = true
			queue = append(queue, t)
		}
	}
	push(pageT(0, 0)) // Seeds
	var pi pageInfo
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		out[s.url(t)] = requests(t)
		switch t.kind {
		case kindPage:
			s.build(&pi, t.host, t.n)
			for _, l := range pi.links {
				if s.crawlable(l.to) {
					push(l.to)
				}
			}
		case kindRedirect:
			if t.n < redirectHops {
				push(target{kind: kindRedirect, n: t.n + 1})
			} else {
				push(s.redirectTarget())
			}
		}
	}
	return out
}
