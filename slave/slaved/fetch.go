package slaved

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/slave/content"
	"github.com/redcrawl/redcrawl/slave/dnscache"
	"github.com/redcrawl/redcrawl/slave/netguard"
	"github.com/redcrawl/redcrawl/slave/session"
)

// Fetcher fetches one URL without following redirects.
type Fetcher interface {
	Fetch(ctx context.Context, req FetchRequest) (*Response, error)
}

// FetchRequest is one URL to fetch and the session and fetch options of
// its rule set (the zero value: the default pool and the crawl's
// settings).
type FetchRequest struct {
	URL     string
	Session rules.Session
	// UserAgents are the rule set's user agents (fetch.user_agents of a
	// rule file): the request goes through a session of a pool that
	// rotates them; nil = the crawl's.
	UserAgents []string
	// Header holds extra request headers: a rule set's fetch.headers, a
	// recrawl's conditional If-None-Match and If-Modified-Since
	// (recrawl.go) and OnRequest hooks' headers, which replace the
	// fetcher's own of the same name.
	Header http.Header
	// Timeout bounds the request (a rule set's fetch.timeout); 0 =
	// fetch.timeout.
	Timeout time.Duration
}

// Response is a fetched page. A redirect is a response like any other:
// its Location is for the frontier to schedule. The caller closes it.
type Response struct {
	Status   int
	Proto    string
	Header   http.Header
	Body     *content.Body // the decompressed body, capped; never nil
	Duration time.Duration
	// Proxy is the redacted proxy URL the request went through, or
	// "direct".
	Proxy string
	// Request is the request header block as sent (for WARC).
	Request []byte
	// Rendered is set for a page rendered in headless Chromium; FinalURL
	// is then where the browser ended (it follows redirects).
	Rendered bool
	FinalURL string
}

// Truncated reports that the body was larger than fetch.max_body_bytes.
func (r *Response) Truncated() bool { return r.Body.Truncated() }

// Close releases the body (its temporary file, if it spilled).
func (r *Response) Close() {
	if r != nil && r.Body != nil {
		r.Body.Close()
	}
}

// FetchError is a typed fetch failure.
type FetchError struct {
	Kind      string // one of the events.Kind* values
	Retryable bool
	Err       error
	Snapshot  string // path of an HTML snapshot of a failed render
}

func (e *FetchError) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// httpFetcher sends each request through a session of a pool (its proxy's
// transport, its user agent and cookie jar) over the caching resolver and
// the private-network guard, and reads the body into a document input
// stream, decompressed and capped. Redirects are not followed: a redirect
// target goes through the frontier like a discovered link.
//
// The default pool uses fetch.proxies and fetch.proxy_file; a rule set may
// ask for direct connections, a named pool of fetch.proxy_pools, its own
// cookie setting or its own user agents, and gets a pool of its own for
// that combination, made on first use and run until the fetcher closes
// (an edited list of user agents makes another).
type httpFetcher struct {
	s       *Slave
	timeout time.Duration
	bodyOpt content.BodyOptions
	base    session.Options
	// checkTarget refuses, before a request goes to a proxy, a target
	// host that resolves to a non-public address (a proxy resolves and
	// connects on its own, out of reach of the dial guard).
	checkTarget func(ctx context.Context, host string) error
	banStatuses []int

	runCtx context.Context // the pools' background work
	mu     sync.Mutex
	pools  map[poolKey]*fetchPool
	// retired are the proxies an admin retired (redacted URLs), applied
	// to every pool, including pools made later
	retired map[string]bool
	wg      sync.WaitGroup
}

// poolKey names a session pool variant.
type poolKey struct {
	direct  bool
	pool    string // a fetch.proxy_pools name; "" = default
	cookies int8   // -1 off, 0 config, 1 on
	// uas are a rule set's user agents, joined by newlines (a user agent
	// has none); "" = the crawl's
	uas string
}

type fetchPool struct {
	*session.Pool
	// proxied is true when the pool has proxies: bans then retry the page
	// through another proxy; a direct connection has nowhere else to go.
	proxied bool
}

// newHTTPFetcher builds the fetcher and its default session pool; the
// pools' background work (file reloads, cooldowns) runs until runCtx ends,
// and close waits for it.
func (s *Slave) newHTTPFetcher(runCtx context.Context, dns *dnscache.Resolver) (*httpFetcher, error) {
	cfg := s.cfg
	guarded := netguard.Dialer(cfg.Fetch.Timeout, cfg.Fetch.AllowPrivateNetworks)
	direct := dns.DialContext(guarded.DialContext)
	idle := idleLimits(cfg.Slave.Concurrency, cfg.Politeness.HostConcurrency)
	template := func() *http.Transport {
		return &http.Transport{
			MaxIdleConns:        idle.total,
			MaxIdleConnsPerHost: idle.perHost,
			IdleConnTimeout:     idle.timeout,
			TLSHandshakeTimeout: 10 * time.Second,
			// no ResponseHeaderTimeout: the request's context bounds it
			// all, by fetch.timeout or its rule set's
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		}
	}
	f := &httpFetcher{s: s, timeout: cfg.Fetch.Timeout, banStatuses: cfg.Fetch.BanStatuses, runCtx: runCtx,
		pools: map[poolKey]*fetchPool{},
		bodyOpt: content.BodyOptions{MemLimit: int(cfg.Fetch.MemoryBodyBytes),
			MaxBytes: cfg.Fetch.MaxBodyBytes, TempDir: cfg.Fetch.TempDir},
		base: session.Options{
			Proxies:           cfg.Fetch.Proxies,
			ProxyFile:         cfg.Fetch.ProxyFile,
			UserAgents:        cfg.Fetch.UserAgents,
			UserAgentFile:     cfg.Fetch.UserAgentFile,
			DefaultUserAgent:  cfg.Fetch.UserAgent,
			Cookies:           cfg.Fetch.Cookies,
			PoolSize:          cfg.Fetch.SessionsPerProxy,
			StickyRequests:    offIfZero(cfg.Fetch.StickyRequests),
			BanStatuses:       cfg.Fetch.BanStatuses,
			BanBodyPattern:    cfg.Fetch.BanBodyRegex,
			CooldownBase:      cfg.Fetch.ProxyCooldown,
			CooldownMax:       cfg.Fetch.ProxyCooldownMax,
			MaxErrors:         cfg.Fetch.ProxyMaxErrors,
			MaxUses:           offIfZero(cfg.Fetch.SessionMaxUses),
			DialContext:       direct,
			TransportTemplate: template,
			OnEvent:           s.proxyEvent,
			Logger:            s.log,
		}}
	if _, err := f.poolFor(rules.Session{}, nil); err != nil {
		return nil, err
	}
	if !cfg.Fetch.AllowPrivateNetworks {
		f.checkTarget = func(ctx context.Context, host string) error {
			ips, err := dns.LookupIP(ctx, host)
			if err != nil {
				return err
			}
			for _, ip := range ips {
				if netguard.IsBlocked(ip) {
					return &netguard.BlockedError{Addr: net.JoinHostPort(ip.String(), "0")}
				}
			}
			return nil
		}
	}
	return f, nil
}

// poolFor returns the session pool for a rule set's session options and
// user agents (nil: the crawl's).
func (f *httpFetcher) poolFor(so rules.Session, uas []string) (*fetchPool, error) {
	k := poolKey{direct: so.Proxies != nil && !*so.Proxies, pool: so.ProxyPool, uas: strings.Join(uas, "\n")}
	if k.direct {
		k.pool = ""
	}
	if so.Cookies != nil {
		k.cookies = -1
		if *so.Cookies {
			k.cookies = 1
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pools[k]; ok {
		return p, nil
	}
	opt := f.base
	switch {
	case k.direct:
		opt.Proxies, opt.ProxyFile = nil, ""
	case k.pool != "":
		list, ok := f.s.cfg.Fetch.ProxyPools[k.pool]
		if !ok {
			return nil, fmt.Errorf("session pool: unknown proxy pool %q", k.pool)
		}
		opt.Proxies, opt.ProxyFile = list, ""
	}
	if k.cookies != 0 {
		opt.Cookies = k.cookies > 0
	}
	if len(uas) > 0 {
		opt.UserAgents, opt.UserAgentFile = uas, ""
	}
	sp, err := session.New(opt)
	if err != nil {
		return nil, fmt.Errorf("session pool: %w", err)
	}
	p := &fetchPool{Pool: sp, proxied: len(opt.Proxies) > 0 || opt.ProxyFile != ""}
	for proxy := range f.retired {
		sp.RetireProxy(proxy)
	}
	f.pools[k] = p
	f.wg.Add(1)
	go func() { defer f.wg.Done(); sp.Run(f.runCtx) }()
	return p, nil
}

// session acquires a session for a host from the pool of a rule set's
// session options and user agents.
func (f *httpFetcher) session(ctx context.Context, host string, so rules.Session, uas []string) (*fetchPool, *session.Session, error) {
	p, err := f.poolFor(so, uas)
	if err != nil {
		return nil, nil, err
	}
	sess, err := p.Acquire(ctx, host)
	return p, sess, err
}

// offIfZero maps the config's 0 (= off) to the session pool's negative
// (its 0 means the default).
func offIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// report tells the pool how a request went. Only what the route is to
// blame for counts against it: a direct connection is never cooled down
// (a site's error or 403 must not stop the whole slave; it is recorded
// as the page's status), and through a proxy only connection failures,
// ban statuses and ban bodies count, not a slow target.
func (f *httpFetcher) report(p *fetchPool, sess *session.Session, r session.Result) session.Verdict {
	if sess.Proxy() == "direct" {
		if r.Err != nil || f.banned(r.Status) {
			return session.Verdict{}
		}
		r.Body = nil
	} else if r.Err != nil && classify(r.Err).Kind != events.KindConnect {
		r.Err = nil
	}
	return p.Report(sess, r)
}

func (f *httpFetcher) banned(status int) bool {
	for _, s := range f.banStatuses {
		if s == status {
			return true
		}
	}
	return false
}

// Fetch implements Fetcher.
func (f *httpFetcher) Fetch(ctx context.Context, fr FetchRequest) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rawURL := fr.URL
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &FetchError{Kind: events.KindParse, Err: err}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &FetchError{Kind: events.KindOther, Err: fmt.Errorf("unsupported protocol scheme %q", u.Scheme)}
	}
	pool, sess, err := f.session(ctx, u.Host, fr.Session, fr.UserAgents)
	if err != nil {
		if ctx.Err() == nil {
			return nil, &FetchError{Kind: events.KindProxy, Err: err}
		}
		return nil, err // ctx ended while every proxy was down
	}
	timeout := f.timeout
	if fr.Timeout > 0 {
		timeout = fr.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if f.checkTarget != nil && sess.Proxy() != "direct" {
		if err := f.checkTarget(ctx, u.Hostname()); err != nil {
			return nil, classify(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &FetchError{Kind: events.KindParse, Err: err}
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	// set here, Go's transport leaves the body as sent: readBody decodes it
	req.Header.Set("Accept-Encoding", content.AcceptEncoding)
	// a recrawl's conditional headers and an OnRequest hook's headers
	// replace the slave's own
	for k, v := range fr.Header {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	start := time.Now()
	res, err := sess.RoundTripper().RoundTrip(req)
	if err != nil {
		f.report(pool, sess, session.Result{Err: err})
		fe := classify(err)
		if sess.Proxy() != "direct" && fe.Kind == events.KindConnect {
			fe = &FetchError{Kind: events.KindProxy, Retryable: true, Err: fmt.Errorf("via %s: %w", sess.Proxy(), err)}
		}
		return nil, fe
	}
	body, err := f.readBody(res)
	if err != nil {
		// the headers came: the proxy works, the site is slow or broken
		f.report(pool, sess, session.Result{Status: res.StatusCode})
		return nil, classify(err)
	}
	v := f.report(pool, sess, session.Result{Status: res.StatusCode, Body: body.Prefix(session.BodyPrefix)})
	if v.Banned && pool.proxied {
		body.Close()
		return nil, &FetchError{Kind: events.KindProxy, Retryable: true,
			Err: fmt.Errorf("banned via %s: %s", sess.Proxy(), v.Reason)}
	}
	return &Response{Status: res.StatusCode, Proto: res.Proto, Header: res.Header, Body: body,
		Duration: time.Since(start), Proxy: sess.Proxy(), Request: requestBlock(req, sess.UserAgent())}, nil
}

// readBody reads a response body into a document input stream, capped on
// decompressed bytes: a gzip, br (brotli), zstd or deflate body (the
// fetcher asks for content.AcceptEncoding; deflate only comes unasked) is
// decoded here by streaming decoders of bounded memory, so a compression
// bomb stops at fetch.max_body_bytes with memory bounded. A body in a
// coding the crawler does not know is kept as it came, with its
// Content-Encoding.
func (f *httpFetcher) readBody(res *http.Response) (*content.Body, error) {
	defer res.Body.Close()
	var r io.Reader = res.Body
	decoded := false
	if !res.Uncompressed {
		dr, ok, err := content.NewDecoder(res.Body, res.Header.Get("Content-Encoding"))
		switch {
		case errors.Is(err, content.ErrUnsupportedEncoding):
		case err != nil:
			return nil, &FetchError{Kind: events.KindParse, Err: err}
		case ok:
			defer dr.Close()
			r, decoded = dr, true
			res.Header.Del("Content-Encoding")
			res.Header.Del("Content-Length")
		}
	}
	opt := f.bodyOpt
	if !decoded {
		opt.SizeHint = res.ContentLength // -1 when unknown
	}
	b, err := content.ReadBody(r, opt)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return b, nil
}

// requestBlock is the request's header block as a proxy-less HTTP/1.1
// request would carry it, without credentials: no Cookie (the session's
// jar adds cookies after this request was built), Authorization or
// Proxy-Authorization (the transport adds a proxy's credentials), so a
// WARC request record never holds a session cookie or a proxy password.
// Response records keep Set-Cookie as received: archiving the response is
// their purpose.
func requestBlock(req *http.Request, ua string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	h := req.Header.Clone()
	for _, k := range []string{"Cookie", "Authorization", "Proxy-Authorization"} {
		h.Del(k)
	}
	h.Set("User-Agent", ua)
	h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// retire retires proxies (redacted URLs, as in the proxy events) in every
// pool, now and in pools made later; a proxy already retired costs
// nothing.
func (f *httpFetcher) retire(proxies []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, proxy := range proxies {
		if f.retired[proxy] {
			continue
		}
		if f.retired == nil {
			f.retired = map[string]bool{}
		}
		f.retired[proxy] = true
		n := 0
		for _, p := range f.pools {
			if p.RetireProxy(proxy) {
				n++
			}
		}
		f.s.log.Info("proxy retired by an admin", "proxy", proxy, "pools", n)
	}
}

// close waits for the pools' background work (its context must be
// cancelled first) and closes their idle connections.
func (f *httpFetcher) close() {
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pools {
		p.CloseIdleConnections()
	}
}

// classify turns a transport error into a typed, retryable-or-not error.
// AllowPrivateHint names the setting that lets a slave fetch non-public
// addresses: the message of a blocked fetch carries it.
const AllowPrivateHint = "set fetch.allow_private_networks: true to crawl loopback, private or intranet addresses"

func classify(err error) *FetchError {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe
	}
	var be *netguard.BlockedError
	if errors.As(err, &be) {
		return &FetchError{Kind: events.KindBlocked, Err: fmt.Errorf("%w (%s)", err, AllowPrivateHint)}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return &FetchError{Kind: events.KindDNS, Retryable: !dnsErr.IsNotFound, Err: err}
	}
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	if errors.As(err, &certErr) || errors.As(err, &recErr) || strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "x509: ") {
		return &FetchError{Kind: events.KindTLS, Err: err}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "Client.Timeout") {
		return &FetchError{Kind: events.KindTimeout, Retryable: true, Err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "unsupported protocol scheme") {
		return &FetchError{Kind: events.KindOther, Err: err}
	}
	var oe *net.OpError
	if errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused") {
		return &FetchError{Kind: events.KindConnect, Retryable: true, Err: err}
	}
	return &FetchError{Kind: events.KindOther, Retryable: true, Err: err}
}
