// Package broadsite serves a synthetic broad-crawl website on loopback:
// many named hosts (h0.bench.test, h1.bench.test, …) with a few pages
// each, all served by one HTTP server that tells the hosts apart by the
// Host header, and a DNS server (UDP and TCP on loopback) that answers
// their A records with loopback addresses, so that a slave whose
// dns.server is DNSAddr fetches them as it would real hosts.
//
// Host i has PagesPerHost pages: "/" (page 0) and "/page/<n>" for n in
// 1..PagesPerHost-1. Page n links to the LocalLinks next pages of its host
// (with 4 pages a host: to every later page) and to
// the roots of CrossLinks other hosts (already seeded: a crawler sees
// them again and drops them), and is padded to about PageBytes. Every
// host's root is a seed (Seeds), so each page is reached from its
// host's root.
//
// Host i's name resolves to one of Addrs loopback addresses,
// 127.0.1.(1 + i mod Addrs), all listening on one port: the fetches spread
// over several destination addresses as a broad crawl's do (and over more
// local ports than one address allows).
//
// The site counts the requests of every page (Hits, exactly-once checks)
// and serves one more page, HeldURL, which answers only after Release:
// a crawl with it seeded ends with one slow page, and a benchmark
// measures what the idle slaves cost meanwhile.
package broadsite

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of zero Options fields.
const (
	DefaultHosts        = 1000
	DefaultPagesPerHost = 4
	DefaultPageBytes    = 15_000
	DefaultCrossLinks   = 2
	DefaultLocalLinks   = 8
	DefaultAddrs        = 16
	DefaultDomain       = "bench.test"
	// maxAddrs is how many addresses 127.0.1.1..127.0.1.254 offer.
	maxAddrs = 254
	// TTL is the TTL of the DNS answers, seconds.
	TTL = 3600
	// heldPath is HeldURL's path, on host 0.
	heldPath = "/held"
)

// Options size the site. Zero fields take the defaults.
type Options struct {
	Hosts        int    // default 1000
	PagesPerHost int    // default 4
	PageBytes    int    // approximate page size, default 15 KB
	CrossLinks   int    // links per page to other hosts' roots, default 2; negative = none
	LocalLinks   int    // links per page to the next pages of its host, default 8
	Addrs        int    // loopback addresses the names resolve to, default 16, at most 254
	Domain       string // the hosts' parent domain, default "bench.test"
	Seed         int64  // selects the cross links and the padding
}

func (o Options) withDefaults() (Options, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Hosts, DefaultHosts)
	def(&o.PagesPerHost, DefaultPagesPerHost)
	def(&o.PageBytes, DefaultPageBytes)
	def(&o.CrossLinks, DefaultCrossLinks)
	def(&o.LocalLinks, DefaultLocalLinks)
	def(&o.Addrs, DefaultAddrs)
	if o.Domain == "" {
		o.Domain = DefaultDomain
	}
	o.Domain = strings.ToLower(strings.Trim(o.Domain, "."))
	switch {
	case o.Hosts < 1:
		return o, fmt.Errorf("hosts %d, want at least 1", o.Hosts)
	case o.PagesPerHost < 1:
		return o, fmt.Errorf("pages per host %d, want at least 1", o.PagesPerHost)
	case o.LocalLinks < 1:
		return o, fmt.Errorf("local links %d, want at least 1", o.LocalLinks)
	case o.PageBytes < 0:
		return o, fmt.Errorf("negative page bytes %d", o.PageBytes)
	case o.Addrs < 1 || o.Addrs > maxAddrs:
		return o, fmt.Errorf("addrs %d out of range 1..%d", o.Addrs, maxAddrs)
	}
	if o.CrossLinks < 0 {
		o.CrossLinks = 0
	}
	return o, nil
}

// Site is a running broad site and its DNS server. Its methods are safe
// for concurrent use.
type Site struct {
	opts Options
	port int
	srvs []*http.Server
	dns  *dnsServer

	hits  []atomic.Uint32 // by host*PagesPerHost + page
	other atomic.Int64    // requests for anything else (HeldURL aside)

	heldHits atomic.Int64
	queries  atomic.Int64 // DNS queries answered
	conns    atomic.Int64 // HTTP connections accepted
	mu       sync.Mutex
	release  chan struct{} // closed by Release; guarded by mu
	released bool
	done     chan struct{}
	closeOne sync.Once
	serving  sync.WaitGroup
	bufs     sync.Pool
}

// Start serves the site and its DNS server until Close.
func Start(opts Options) (*Site, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("broadsite: %w", err)
	}
	s := &Site{opts: opts, hits: make([]atomic.Uint32, opts.Hosts*opts.PagesPerHost),
		release: make(chan struct{}), done: make(chan struct{})}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	lns, err := listenAll(opts.Addrs)
	if err != nil {
		return nil, fmt.Errorf("broadsite: %w", err)
	}
	s.port = lns[0].Addr().(*net.TCPAddr).Port
	if s.dns, err = startDNS(s.resolve, &s.queries); err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return nil, fmt.Errorf("broadsite: dns: %w", err)
	}
	for _, ln := range lns {
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
			ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					s.conns.Add(1)
				}
			}}
		s.srvs = append(s.srvs, srv)
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			_ = srv.Serve(ln) // ErrServerClosed after Close; other errors show as missing hits
		}()
	}
	return s, nil
}

// listenAll binds 127.0.1.1..127.0.1.n on one port, retrying with a new
// port when one of them is taken.
func listenAll(n int) ([]net.Listener, error) {
	var last error
	for range 20 {
		first, err := net.Listen("tcp", addrIP(0)+":0")
		if err != nil {
			return nil, err
		}
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		lns := []net.Listener{first}
		for i := 1; i < n; i++ {
			ln, err := net.Listen("tcp", addrIP(i)+":"+port)
			if err != nil {
				last = err
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			return lns, nil
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	return nil, fmt.Errorf("bind %d loopback addresses on one port: %w", n, last)
}

func addrIP(i int) string { return "127.0.1." + strconv.Itoa(1+i) }

// Close stops the HTTP and DNS servers, releases HeldURL and waits for the
// serve loops. Calling it again does nothing.
func (s *Site) Close() {
	s.closeOne.Do(func() {
		close(s.done)
		for _, srv := range s.srvs {
			srv.Close()
		}
		s.dns.close()
		s.serving.Wait()
	})
}

// Options returns the options in effect.
func (s *Site) Options() Options { return s.opts }

// DNSAddr is the DNS server's address (host:port, UDP and TCP), for
// dns.server.
func (s *Site) DNSAddr() string { return s.dns.addr }

// AllowHosts is the crawl.allow_hosts pattern of every host.
func (s *Site) AllowHosts() string { return "*." + s.opts.Domain }

// HostName is host i's name.
func (s *Site) HostName(i int) string { return "h" + strconv.Itoa(i) + "." + s.opts.Domain }

// PageURL is the URL of page n of host i.
func (s *Site) PageURL(i, n int) string {
	return "http://" + s.HostName(i) + ":" + strconv.Itoa(s.port) + pagePath(n)
}

// Seeds returns every host's root URL.
func (s *Site) Seeds() []string {
	out := make([]string, s.opts.Hosts)
	for i := range out {
		out[i] = s.PageURL(i, 0)
	}
	return out
}

// ExpectedPages is the number of pages, Hosts × PagesPerHost.
func (s *Site) ExpectedPages() int { return len(s.hits) }

// HeldURL is the URL of the page that answers only after Release (or
// Close); it is no page of ExpectedPages.
func (s *Site) HeldURL() string {
	return "http://" + s.HostName(0) + ":" + strconv.Itoa(s.port) + heldPath
}

// HeldRequested reports how many times HeldURL was requested.
func (s *Site) HeldRequested() int64 { return s.heldHits.Load() }

// Release lets HeldURL answer, now and from now on.
func (s *Site) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		close(s.release)
		s.released = true
	}
}

func (s *Site) held() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release
}

// DNSQueries is the number of DNS queries answered since Start or the
// last ResetHits (an A and an AAAA query each for a resolver that asks
// both).
func (s *Site) DNSQueries() int64 { return s.queries.Load() }

// Conns is the number of HTTP connections accepted since Start or the
// last ResetHits.
func (s *Site) Conns() int64 { return s.conns.Load() }

// ResetHits forgets the requests, DNS queries and connections counted and
// holds HeldURL again, for another crawl of the same site.
func (s *Site) ResetHits() {
	for i := range s.hits {
		s.hits[i].Store(0)
	}
	s.other.Store(0)
	s.heldHits.Store(0)
	s.queries.Store(0)
	s.conns.Store(0)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		s.release, s.released = make(chan struct{}), false
	}
}

// Hits compares the requests counted with one request per page: missing
// pages never requested, extra requests beyond one per page, other
// requests for anything else (HeldURL aside).
func (s *Site) Hits() (missing, extra int, other int64) {
	for i := range s.hits {
		switch n := s.hits[i].Load(); {
		case n == 0:
			missing++
		case n > 1:
			extra += int(n - 1)
		}
	}
	return missing, extra, s.other.Load()
}

// resolve answers a DNS name: host i's address, or ok false for a name
// that is no host of the site.
func (s *Site) resolve(name string) (ip net.IP, ok bool) {
	i, ok := s.hostIndex(strings.TrimSuffix(strings.ToLower(name), "."))
	if !ok {
		return nil, false
	}
	return net.ParseIP(addrIP(i % s.opts.Addrs)).To4(), true
}

// hostIndex parses "h<i>.<domain>".
func (s *Site) hostIndex(host string) (int, bool) {
	rest, ok := strings.CutSuffix(host, "."+s.opts.Domain)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutPrefix(rest, "h")
	if !ok || digits == "" || len(digits) > 9 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || i >= s.opts.Hosts {
		return 0, false
	}
	return i, true
}

func pagePath(n int) string {
	if n == 0 {
		return "/"
	}
	return "/page/" + strconv.Itoa(n)
}

// ServeHTTP serves a page of the host the Host header names.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	i, ok := s.hostIndex(strings.ToLower(host))
	n, okPage := pageIndex(r.URL.Path, s.opts.PagesPerHost)
	if ok && i == 0 && r.URL.Path == heldPath {
		s.heldHits.Add(1)
		select {
		case <-s.held():
		case <-s.done:
			panic(http.ErrAbortHandler)
		case <-r.Context().Done():
			return
		}
		s.write(w, http.StatusOK, []byte("<html><body><p>The held page.</p></body></html>\n"))
		return
	}
	if !ok || !okPage || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		s.other.Add(1)
		s.write(w, http.StatusNotFound, []byte("404 page not found\n"))
		return
	}
	s.hits[i*s.opts.PagesPerHost+n].Add(1)
	b := s.bufs.Get().(*bytes.Buffer)
	defer s.bufs.Put(b)
	b.Reset()
	s.render(b, i, n)
	s.write(w, http.StatusOK, b.Bytes())
}

func (s *Site) write(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	ctype := "text/html; charset=utf-8"
	if status != http.StatusOK {
		ctype = "text/plain; charset=utf-8"
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func pageIndex(path string, pages int) (int, bool) {
	if path == "/" {
		return 0, true
	}
	rest, ok := strings.CutPrefix(path, "/page/")
	if !ok || rest == "" || len(rest) > 9 || rest[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || n >= pages {
		return 0, false
	}
	return n, true
}

// words pad the pages.
var words = strings.Fields(`crawl frontier host page link queue slave master
redis politeness fetch parse extract index store lease claim shard broad web`)

// render writes page n of host i: links to the next pages of its host,
// to CrossLinks other roots, and padding.
func (s *Site) render(b *bytes.Buffer, i, n int) {
	o := &s.opts
	fmt.Fprintf(b, "<!doctype html>\n<html><head><title>%s page %d</title></head><body>\n<h1>%s, page %d</h1>\n<ul>\n",
		s.HostName(i), n, s.HostName(i), n)
	for k := n + 1; k < o.PagesPerHost && k <= n+o.LocalLinks; k++ {
		fmt.Fprintf(b, "<li><a href=\"%s\">page %d</a></li>\n", pagePath(k), k)
	}
	x := mix(uint64(o.Seed), uint64(i)<<20|uint64(n))
	for range o.CrossLinks {
		x = mix(x, 0x9e3779b97f4a7c15)
		j := int(x % uint64(o.Hosts))
		fmt.Fprintf(b, "<li><a href=\"%s\">%s</a></li>\n", s.PageURL(j, 0), s.HostName(j))
	}
	b.WriteString("</ul>\n<p>")
	for b.Len() < o.PageBytes {
		x = mix(x, 1)
		b.WriteString(words[x%uint64(len(words))])
		b.WriteByte(' ')
	}
	b.WriteString("</p>\n</body></html>\n")
}

// mix is a splitmix64 step of a and b.
func mix(a, b uint64) uint64 {
	z := a + b + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
