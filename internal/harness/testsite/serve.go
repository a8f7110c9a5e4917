package testsite

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// routeKind is what a request path names.
type routeKind uint8

const (
	routeNotFound routeKind = iota
	routePage
	routePrivate
	routeRobots
	routeRedirect
	routeFlaky
	routeRetryAfter
	routeBadMethod
	routeHostile
	routeShop
	routeMeta
	routeSitemap
	routeFailing
	routeLeaf
)

// route is a parsed request.
type route struct {
	kind routeKind
	n    int
	h    hostileRoute // for routeHostile
	sp   shopRoute    // for routeShop
	rest string       // for routeMeta: the path below /meta/
	sm   string       // for routeSitemap: the path
}

// route parses a request for path (and query, only for hostile and
// dynamic pages) on host.
func (s *Site) route(host int, method, path, query string) route {
	if method != http.MethodGet && method != http.MethodHead {
		return route{kind: routeBadMethod}
	}
	o := &s.opts
	if path == "/" {
		return route{kind: routePage}
	}
	if rest, ok := strings.CutPrefix(path, "/page/"); ok {
		if n, ok := parseIndex(rest); ok && n >= 1 && n < o.PagesPerHost {
			return route{kind: routePage, n: n}
		}
		return route{}
	}
	if o.Sitemaps {
		if rt, ok := s.sitemapRoute(host, path); ok {
			return rt
		}
	}
	if o.Robots {
		if path == "/robots.txt" {
			return route{kind: routeRobots}
		}
		if rest, ok := strings.CutPrefix(path, "/private/"); ok {
			if n, ok := parseIndex(rest); ok && n < o.PagesPerHost {
				return route{kind: routePrivate, n: n}
			}
			return route{}
		}
	}
	if host == 0 && o.Hostile {
		if rest, ok := strings.CutPrefix(path, hostilePrefix); ok {
			return route{kind: routeHostile, h: s.hostileRoute(rest, query)}
		}
	}
	if host == 0 && o.Meta {
		if rest, ok := strings.CutPrefix(path, metaPrefix); ok {
			return route{kind: routeMeta, rest: rest}
		}
	}
	if host == shopHost && o.Dynamic {
		if rest, ok := strings.CutPrefix(path, shopPrefix); ok {
			return route{kind: routeShop, sp: s.shopRoute(rest, query)}
		}
	}
	if rest, ok := strings.CutPrefix(path, "/leaf/"); ok && o.Leaves {
		if n, ok := parseIndex(rest); ok && s.leafRoute(host, n) {
			return route{kind: routeLeaf, n: n}
		}
		return route{}
	}
	if host < o.FailingHosts && path == FailingPath {
		return route{kind: routeFailing}
	}
	if host == 0 && o.Specials {
		switch path {
		case "/flaky":
			return route{kind: routeFlaky}
		case "/retry-after":
			return route{kind: routeRetryAfter}
		}
		if rest, ok := strings.CutPrefix(path, "/redirect/"); ok {
			if n, ok := parseIndex(rest); ok && n >= 1 && n <= redirectHops {
				return route{kind: routeRedirect, n: n}
			}
		}
	}
	return route{} // /missing included
}

// parseIndex parses a canonical decimal number: digits only, no leading
// zero.
func parseIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// status is the status code a request to rt gets; it advances the state of
// /flaky and /retry-after. s.mu must be held.
func (s *Site) status(rt route) int {
	switch rt.kind {
	case routeNotFound:
		return http.StatusNotFound
	case routeBadMethod:
		return http.StatusMethodNotAllowed
	case routeRedirect:
		if rt.n == 2 {
			return http.StatusFound
		}
		return http.StatusMovedPermanently
	case routeFlaky:
		s.flakyN++
		if s.flakyN == 1 {
			return http.StatusInternalServerError
		}
	case routeRetryAfter:
		s.retryN++
		if s.retryN == 1 {
			return http.StatusTooManyRequests
		}
	case routeHostile:
		return rt.h.status
	case routeShop:
		return rt.sp.status
	case routeMeta:
		return metaStatus(rt.rest)
	case routeFailing:
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// ServeHTTP serves one host: it records the hit, waits Options.Latency and
// answers.
func (h *hostServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.site
	if s.isAPI(h.index, r.URL.Path) {
		s.serveAPI(w, r, h.addr) // api.go
		return
	}
	rt := s.route(h.index, r.Method, r.URL.Path, r.URL.RawQuery)
	path := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	s.inflight.Add(1)
	defer s.inflight.Done()
	status := s.status(rt)
	rev := 0
	if rt.kind == routePage {
		rev, status = s.pageRevision(h.index, rt.n, r, status)
	}
	// Taking the time under the lock keeps Hits ordered by At.
	s.hits = append(s.hits, Hit{Host: h.addr, Path: path, At: time.Now(),
		UserAgent: r.UserAgent(), Status: status, Via: r.Header.Get(ProxyHeader), Header: r.Header.Clone()})
	s.mu.Unlock()

	if d := s.opts.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.done:
			t.Stop()
			panic(http.ErrAbortHandler) // drop the connection, answer nothing
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}

	if rt.kind == routeHostile {
		s.serveHostile(w, r, rt.h)
		return
	}
	if rt.kind == routeShop {
		s.serveShop(w, r, rt.sp)
		return
	}
	if rt.kind == routeMeta {
		s.serveMeta(w, r, rt.rest)
		return
	}
	if rt.kind == routeSitemap {
		s.serveSitemap(w, r, h, rt)
		return
	}

	b := s.pools.buffer()
	defer s.pools.putBuffer(b)
	hdr := w.Header()
	const html, text = "text/html; charset=utf-8", "text/plain; charset=utf-8"
	ctype := html
	if rt.kind == routePage {
		s.setValidators(hdr, h.index, rt.n, rev)
		if status == http.StatusNotModified {
			w.WriteHeader(status)
			return
		}
	}
	switch {
	case rt.kind == routePage:
		pi := s.pools.page()
		s.build(pi, h.index, rt.n)
		pi.rev = rev
		s.renderPage(b, pi)
		s.pools.putPage(pi)
	case rt.kind == routePrivate:
		renderLeaf(b, "Private "+strconv.Itoa(rt.n),
			"Disallowed by robots.txt: a polite crawler never fetches this page.")
	case rt.kind == routeRobots:
		ctype = text
		b.WriteString(RobotsTxt)
	case rt.kind == routeRedirect:
		// Relative Location headers, resolved against the request URL:
		// "2" and "/redirect/3" and "../page/<n>".
		loc := "../" + strings.TrimPrefix(s.redirectTarget().path(), "/")
		switch rt.n {
		case 1:
			loc = "2"
		case 2:
			loc = "/redirect/3"
		}
		hdr.Set("Location", loc)
		ctype = text
		b.WriteString("moved to " + loc + "\n")
	case status == http.StatusNotFound:
		ctype = text
		b.WriteString("404 page not found\n")
	case status == http.StatusMethodNotAllowed:
		hdr.Set("Allow", "GET, HEAD")
		ctype = text
		b.WriteString("method not allowed\n")
	case status == http.StatusInternalServerError:
		ctype = text
		b.WriteString("temporary failure, try again\n")
	case status == http.StatusTooManyRequests:
		hdr.Set("Retry-After", "1")
		ctype = text
		b.WriteString("too many requests, retry after 1 second\n")
	case status == http.StatusServiceUnavailable:
		hdr.Set("Retry-After", strconv.Itoa(int(FailingRetryAfter/time.Second)))
		ctype = text
		b.WriteString("service unavailable, retry after 2 seconds (always)\n")
	case rt.kind == routeLeaf:
		renderLeaf(b, "Leaf "+strconv.Itoa(rt.n), "One page links here, and this page links nowhere.")
	case rt.kind == routeFlaky:
		renderLeaf(b, "Flaky", "This page failed once and works now.")
	case rt.kind == routeRetryAfter:
		renderLeaf(b, "Retry-After", "This page asked to be retried later and works now.")
	}
	s.write(w, r, status, ctype, b.Bytes())
}

// write answers with body, gzip-compressed if the site serves gzip and
// the client accepts it.
func (s *Site) write(w http.ResponseWriter, r *http.Request, status int, ctype string, body []byte) {
	hdr := w.Header()
	hdr.Set("Content-Type", ctype)
	if s.opts.Gzip {
		hdr.Set("Vary", "Accept-Encoding")
		if accepts(r.Header.Values("Accept-Encoding"), "gzip") {
			z := s.pools.buffer()
			defer s.pools.putBuffer(z)
			s.pools.gzip(z, body)
			body = z.Bytes()
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body) // a client gone away is no concern of the site
	}
}

// pools recycle buffers, page descriptions and gzip writers between
// requests.
type pools struct {
	buffers, pages, gzips sync.Pool
}

func (p *pools) init() {
	p.buffers.New = func() any { return new(bytes.Buffer) }
	p.pages.New = func() any { return new(pageInfo) }
	p.gzips.New = func() any {
		z, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // the level is valid
		return z
	}
}

func (p *pools) buffer() *bytes.Buffer { return p.buffers.Get().(*bytes.Buffer) }

func (p *pools) putBuffer(b *bytes.Buffer) {
	if b.Cap() > 1<<20 {
		return
	}
	b.Reset()
	p.buffers.Put(b)
}

func (p *pools) page() *pageInfo { return p.pages.Get().(*pageInfo) }

func (p *pools) putPage(pi *pageInfo) { p.pages.Put(pi) }

// gzip appends body, compressed, to dst.
func (p *pools) gzip(dst *bytes.Buffer, body []byte) {
	z := p.gzips.Get().(*gzip.Writer)
	z.Reset(dst)
	_, _ = z.Write(body) // writes to a bytes.Buffer don't fail
	_ = z.Close()
	z.Reset(nil)
	p.gzips.Put(z)
}
