// Package testsite serves a deterministic synthetic website on several
// loopback addresses, for the crawler's end-to-end tests, the demo and
// benchmarks.
//
// Host i listens on 127.0.0.(2+i). Every host has PagesPerHost pages: "/"
// (page 0) and "/page/<n>" for n in 1..PagesPerHost-1. The link graph is a
// pure function of the Options (mostly of Seed), so it is computed on the
// fly for every request and for Expected; nothing is stored per page.
//
// Reachability is guaranteed by construction: page n links to page n+1 of
// its host, and every host's root links to the root of every other host, so
// from the root of host 0 (the only seed) every page of every host can be
// reached. Further links are drawn at random, a fraction of them to other
// hosts. Some links are written in tricky but valid forms (fragments, dot
// segments, "./" paths, an upper-case scheme, protocol-relative URLs, a
// <base href> that may point to another host, single-quoted and upper-case
// attributes, "&amp;" in a fragment); they are always duplicates of a link
// written plainly on the same page, so they never add pages, and a crawler
// that resolves them wrongly requests a URL that does not exist (404),
// which shows in HitCounts. Every page URL is query-free.
//
// The site records every request it receives (Hits, HitCounts) with its
// arrival time, so tests can check coverage, exactly-once fetching and
// politeness as the server saw them.
//
// With Options.Hostile, host 0 also serves hostile pages under /hostile/
// (legacy charsets, a gzip bomb, huge, slow and stalling pages, redirect
// loops, crawler traps, duplicate and non-HTML content), described by
// Site.Hostile and left out of Expected. With Options.Dynamic, host 1 also
// serves a shop under /shop/ whose product links and prices only
// JavaScript writes, described by Site.Shop and left out of Expected.
// With Options.JSONAPI, host 0 also serves a JSON API with a login step
// under /api/, described by Site.API and left out of Expected.
// StartProxies starts HTTP forward proxies whose requests the site
// records in Hit.Via.
package testsite

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Defaults for zero Options fields.
const (
	DefaultHosts          = 5
	DefaultPagesPerHost   = 200
	DefaultLinksPerPage   = 8
	DefaultCrossHostRatio = 0.25
	DefaultPageBytes      = 4096

	// maxHosts is how many addresses 127.0.0.2..127.0.0.255 offer.
	maxHosts = 254
)

// RobotsTxt is the body of /robots.txt when Options.Robots is set.
const RobotsTxt = "User-agent: *\nDisallow: /private/\n"

// FailingPath is the page that always answers 503 on the failing hosts
// (Options.FailingHosts), with a Retry-After of FailingRetryAfter.
const (
	FailingPath       = "/status/503"
	FailingRetryAfter = 2 * time.Second
)

// Options configure a Site. Zero fields take the defaults documented on
// each field.
type Options struct {
	// Hosts is the number of hosts, host i bound on 127.0.0.(2+i);
	// default 5, at most 254.
	Hosts int
	// Port is the port every host listens on; 0 picks a free port per
	// host (each host has its own listener either way).
	Port int
	// PagesPerHost is the number of ordinary pages per host, the root
	// included; default 200.
	PagesPerHost int
	// LinksPerPage is the number of ordinary links per page (the link to
	// the next page included), some to other hosts; default 8. Roots also
	// link to every other root, and some pages carry extra duplicate,
	// non-HTTP and /private/ links.
	LinksPerPage int
	// CrossHostRatio is the fraction of random links that point to
	// another host; 0 means the default 0.25, a negative value means no
	// random cross-host links (roots still link to each other).
	CrossHostRatio float64
	// PageBytes is the approximate size of a page's HTML, reached by
	// padding with pseudo-random words; default 4096. Pages with many
	// links may be larger.
	PageBytes int
	// Seed selects the link graph and the padding text.
	Seed int64
	// Robots makes every host serve /robots.txt with RobotsTxt, and makes
	// some pages link to /private/<n> pages, which a correct crawler never
	// fetches (they are served normally when asked for, so a violation
	// shows in Hits). Without Robots, /robots.txt and /private/ are 404.
	Robots bool
	// Specials adds special pages on host 0, linked from its root:
	// a redirect chain /redirect/1 -301-> /redirect/2 -302-> /redirect/3
	// -301-> an ordinary page (relative Location headers); /flaky,
	// answering 500 to its first request and 200 afterwards; /missing,
	// always 404; /retry-after, answering 429 with "Retry-After: 1" to its
	// first request and 200 afterwards.
	Specials bool
	// Gzip serves gzip-compressed bodies to clients that accept gzip.
	Gzip bool
	// Latency delays every response; the hit is recorded before the delay.
	Latency time.Duration
	// Hostile adds hostile pages under /hostile/ on host 0, linked from
	// its root through the hub /hostile/: pages in legacy charsets, a gzip
	// bomb, a huge page, a slow and a stalling page, redirect loops,
	// crawler traps (calendar, deep paths, session ids), duplicate content
	// and non-HTML files. Site.Hostile describes them. They are not part
	// of Expected: a crawler's outcome on them is checked through Hits.
	Hostile bool
	// Dynamic adds a shop of dynamic pages under /shop/ on host 1
	// (127.0.0.3), linked from its root, and so needs Hosts >= 2: a
	// catalogue whose product links only JavaScript inserts (from a JSON
	// API, with a "load more" button), and product pages whose price
	// only JavaScript writes. Site.Shop describes them and the items a
	// crawl extracts. They are not part of Expected: a crawler's outcome
	// on them is checked through Hits and its extracted items.
	Dynamic bool
	// JSONAPI adds a JSON API with a login step under /api/ on host 0
	// (api.go): POST /api/login gives a token, GET
	// /api/products?page=N with it gives a page of products and the
	// next page's link. Site.API describes it. It is not part of
	// Expected and no page links to it: a crawl starts at API().Start.
	JSONAPI bool
	// Meta adds, on host 0 under /meta/ and linked from its root, pages
	// that say something about themselves: robots meta tags and
	// X-Robots-Tag headers (noindex, nofollow, none, noarchive, for every
	// crawler, for "redcrawl" and for others), rel=nofollow/ugc/sponsored
	// links, a rel=canonical, br- and zstd-encoded pages and br and zstd
	// bombs. Site.Meta describes them. They are not part of Expected.
	Meta bool
	// Sitemaps adds sitemaps on host 0 (sitemap.go): robots.txt (served
	// even without Robots) lists a sitemap index and a text sitemap, which
	// lead through gzip and nested sitemaps to /orphan/<n> pages linked
	// from no page; /sitemap.xml (fetched with crawl.sitemaps: seed) leads
	// to hostile sitemaps. Site.Sitemaps describes them. They are not part
	// of Expected.
	Sitemaps bool
	// FailingHosts makes hosts 0 to FailingHosts-1 serve /status/503,
	// linked from their root, which always answers 503 Service
	// Unavailable with "Retry-After: 2" (FailingRetryAfter): one broken
	// URL on an otherwise healthy host. It is not part of Expected: a
	// crawler's outcome on it is checked through Hits.
	FailingHosts int
	// Leaves adds a page of one in-link to every third ordinary page but
	// the roots: page n of host h links to /leaf/<h*PagesPerHost+n> of
	// host h+1 (of host h itself when n is a multiple of 6), a page
	// linking nowhere that no other page links to. A crawl that loses a
	// link it was told about (a write lost in a failover) misses its
	// leaf for good. They are part of Expected.
	Leaves bool
	// Validators makes ordinary pages carry an ETag and a Last-Modified
	// and answer a conditional request that matches them with 304 Not
	// Modified (revisions.go). Without it the site ignores conditional
	// requests.
	Validators bool
}

// withDefaults returns o with defaults applied, or an error for values
// that can't be served.
func (o Options) withDefaults() (Options, error) {
	if o.Hosts == 0 {
		o.Hosts = DefaultHosts
	}
	if o.PagesPerHost == 0 {
		o.PagesPerHost = DefaultPagesPerHost
	}
	if o.LinksPerPage == 0 {
		o.LinksPerPage = DefaultLinksPerPage
	}
	if o.CrossHostRatio == 0 {
		o.CrossHostRatio = DefaultCrossHostRatio
	}
	if o.PageBytes == 0 {
		o.PageBytes = DefaultPageBytes
	}
	switch {
	case o.Hosts < 0 || o.Hosts > maxHosts:
		return o, fmt.Errorf("hosts %d out of range 1..%d", o.Hosts, maxHosts)
	case o.Port < 0 || o.Port > 65535:
		return o, fmt.Errorf("port %d out of range 0..65535", o.Port)
	case o.PagesPerHost < 0:
		return o, fmt.Errorf("negative pages per host %d", o.PagesPerHost)
	case o.LinksPerPage < 0:
		return o, fmt.Errorf("negative links per page %d", o.LinksPerPage)
	case o.CrossHostRatio > 1:
		return o, fmt.Errorf("cross-host ratio %v above 1", o.CrossHostRatio)
	case o.PageBytes < 0:
		return o, fmt.Errorf("negative page bytes %d", o.PageBytes)
	case o.Latency < 0:
		return o, fmt.Errorf("negative latency %v", o.Latency)
	case o.Dynamic && o.Hosts < 2:
		return o, fmt.Errorf("dynamic pages need at least 2 hosts, have %d", o.Hosts)
	case o.FailingHosts < 0 || o.FailingHosts > o.Hosts:
		return o, fmt.Errorf("failing hosts %d out of range 0..%d (the hosts)", o.FailingHosts, o.Hosts)
	}
	if o.CrossHostRatio < 0 {
		o.CrossHostRatio = 0
	}
	return o, nil
}

// Hit is one request the site received.
type Hit struct {
	Host      string    // host:port of the listener that received it, e.g. "127.0.0.2:40123"
	Path      string    // escaped path, plus "?query" when there is one
	At        time.Time // arrival, before any Latency delay
	UserAgent string
	Status    int    // status code answered; 0 when no response was started (/hostile/stall)
	Via       string // the X-Testsite-Proxy header: the Proxy that forwarded it, "" when direct
	// Header holds the request's headers as received (User-Agent too)
	Header http.Header
}

// URL returns the hit's absolute URL, "http://" + Host + Path, the key
// HitCounts uses.
func (h Hit) URL() string { return "http://" + h.Host + h.Path }

// Site is a running synthetic website. Its methods are safe for concurrent
// use.
type Site struct {
	opts  Options
	hosts []*hostServer

	mu        sync.Mutex
	hits      []Hit
	flakyN    int // requests to /flaky since the last reset
	retryN    int // requests to /retry-after since the last reset
	closed    bool
	inflight  sync.WaitGroup // handlers running; Add only while !closed
	serving   sync.WaitGroup // Serve loops
	closeOnce sync.Once
	done      chan struct{} // closed by Close; cuts Latency delays short

	pools pools

	revs map[[2]int]int // (host, page) -> revision, when not 0 (revisions.go)

	hostile *hostileData // nil unless Options.Hostile
	shop    *shopData    // nil unless Options.Dynamic
	smData  sitemapData  // Options.Sitemaps' large files, built on first use
}

// hostServer is one host: its address and server.
type hostServer struct {
	site  *Site
	index int
	addr  string // "127.0.0.x:port"
	root  string // "http://127.0.0.x:port"
	srv   *http.Server
}

// Start binds a listener per host and serves the site until Close. It
// fails, leaving nothing bound, if an option is invalid or an address
// can't be bound.
func Start(opts Options) (*Site, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("testsite: %w", err)
	}
	s := &Site{opts: opts, done: make(chan struct{})}
	s.pools.init()
	if opts.Hostile {
		if s.hostile, err = newHostileData(); err != nil {
			return nil, fmt.Errorf("testsite: hostile pages: %w", err)
		}
	}
	if opts.Dynamic {
		if s.shop, err = newShopData(opts.Seed); err != nil {
			return nil, fmt.Errorf("testsite: dynamic pages: %w", err)
		}
	}
	listeners := make([]net.Listener, 0, opts.Hosts)
	for i := range opts.Hosts {
		addr := net.JoinHostPort(hostIP(i), strconv.Itoa(opts.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("testsite: bind host %d: %w", i, err)
		}
		listeners = append(listeners, ln)
		h := &hostServer{site: s, index: i, addr: ln.Addr().String()}
		h.root = "http://" + h.addr
		h.srv = &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       time.Minute,
		}
		s.hosts = append(s.hosts, h)
	}
	for i, h := range s.hosts {
		ln := listeners[i]
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			// Serve returns http.ErrServerClosed after Close. Any other
			// error also means the listener is gone, and there is no one
			// to report it to: the missing hits show in the caller's test.
			_ = h.srv.Serve(ln)
		}()
	}
	return s, nil
}

// hostIP is host i's address.
func hostIP(i int) string { return "127.0.0." + strconv.Itoa(2+i) }

// Close stops every host, closing listeners and connections, cuts Latency
// delays short and waits for running handlers and serve loops to return.
// Calling it again does nothing.
func (s *Site) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		for _, h := range s.hosts {
			h.srv.Close()
		}
		close(s.done)
		s.serving.Wait()
		s.inflight.Wait()
	})
}

// Options returns the options in effect, defaults applied.
func (s *Site) Options() Options { return s.opts }

// Seeds returns the crawl's seeds: the root URL of host 0 only. Every
// other page is reachable from it through links.
func (s *Site) Seeds() []string { return []string{s.hosts[0].root + "/"} }

// HostURLs returns the root URL of every host, e.g. "http://127.0.0.2:40123/".
func (s *Site) HostURLs() []string {
	out := make([]string, len(s.hosts))
	for i, h := range s.hosts {
		out[i] = h.root + "/"
	}
	return out
}

// PageURL returns the canonical URL of a page, as the site's plain links
// write it: "http://127.0.0.x:port/" for page 0, ".../page/<n>" otherwise.
// It panics if host or page is out of range.
func (s *Site) PageURL(host, page int) string {
	if host < 0 || host >= len(s.hosts) || page < 0 || page >= s.opts.PagesPerHost {
		panic(fmt.Sprintf("testsite: page %d of host %d out of range (%d hosts, %d pages)",
			page, host, len(s.hosts), s.opts.PagesPerHost))
	}
	return s.hosts[host].root + pagePath(page)
}

// Hits returns a copy of every request received since Start or the last
// ResetHits, in arrival order.
func (s *Site) Hits() []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Hit, len(s.hits))
	copy(out, s.hits)
	return out
}

// HitCounts returns the number of requests per absolute URL
// ("http://" + Hit.Host + Hit.Path), for every request received,
// /robots.txt and /private/ included; callers filter.
func (s *Site) HitCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int)
	for _, h := range s.hits {
		out[h.URL()]++
	}
	return out
}

// ResetHits forgets the recorded hits and re-arms /flaky and /retry-after,
// so a new crawl of the same site sees the same behaviour and Expected
// holds for it again.
func (s *Site) ResetHits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits = nil
	s.flakyN = 0
	s.retryN = 0
}
