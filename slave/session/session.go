// Package session is the slave's pool of sessions, in the manner of
// Crawlee's SessionPool: a session binds one route (a proxy, or direct
// connections), one user agent and one cookie jar, and the pool decides
// which session carries each request from what the responses say.
//
// Where colly's proxy rotation falls short, and what this package does:
//
//   - colly rotates proxies round-robin through one http.Transport, so a
//     keep-alive connection pins every request to the proxy it was opened
//     through. Here every route has its own http.Transport: connections are
//     pooled per proxy, and picking a proxy really picks the path.
//   - colly has no ban detection. Here the caller reports each response
//     (Pool.Report); a transport error, a ban status (403, 429 by default)
//     or a body matching a pattern (a captcha page) counts as an error
//     against the session and its proxy. The proxy cools down for
//     CooldownBase, doubled for each consecutive error up to CooldownMax,
//     and is retired after MaxErrors consecutive errors; a success resets
//     the count. A banned session is retired at once (its cookies and user
//     agent are what the site flagged); a session is also retired after
//     MaxErrors consecutive errors or MaxUses uses. A retired session is
//     replaced by a fresh one (new cookie jar, next user agent).
//   - Reports about a proxy that is already cooling down change only the
//     session: requests that were in flight when the proxy was banned
//     would otherwise count the same ban many times over and retire the
//     proxy after one incident.
//   - A host keeps its session for StickyRequests requests (the site sees
//     one visitor with consistent cookies and user agent); otherwise
//     proxies are taken round-robin and, within a proxy, the least
//     recently used session.
//   - When every proxy is cooling down or retired, Acquire waits, without
//     polling, on a channel closed when a cooldown ends or the proxy list
//     changes, and the pool logs "all proxies down" once per outage.
//   - The proxy and user agent lists may live in files that are polled for
//     changes; added proxies appear, removed ones stop being handed out,
//     unchanged ones keep their state, and a file with an invalid line is
//     ignored (the previous list stays in force).
//
// Passwords in proxy URLs never leave the package: events, logs, errors,
// ProxyStatus and Session.Proxy show url.URL.Redacted().
//
// The pool's state is guarded by one mutex, held only for bookkeeping
// (never across I/O or a callback). Events are queued under the mutex and
// handed to Options.OnEvent after it is released.
package session

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// Proxy states, in ProxyStatus.State and Event.State.
const (
	StateAdded   = "added"   // event only: the proxy joined the pool
	StateUp      = "up"      // usable
	StateCooling = "cooling" // banned or failing, usable again at CoolingUntil
	StateRetired = "retired" // never used again
	StateRemoved = "removed" // event only: the proxy left the proxy file
)

// Defaults of the Options fields.
const (
	DefaultPoolSize       = 4
	DefaultStickyRequests = 20
	DefaultCooldownBase   = 30 * time.Second
	DefaultCooldownMax    = 10 * time.Minute
	DefaultMaxErrors      = 5
	DefaultMaxUses        = 500
	DefaultReloadInterval = 5 * time.Second
	// BodyPrefix is how much of a body BanBodyPattern looks at.
	BodyPrefix = 64 << 10
)

// Options configures a Pool. Zero values take the defaults above; for
// StickyRequests and MaxUses, a negative value turns the feature off.
type Options struct {
	// Proxies are proxy URLs: http://, https://, socks5:// (or socks5h://),
	// with optional user:pass; the word "direct" is a route without proxy.
	// With neither Proxies nor ProxyFile, every session goes direct.
	Proxies []string
	// ProxyFile lists more proxies, one URL a line, # comments. It is
	// re-read when its size or modification time changes (polled every
	// ReloadInterval by Run). An invalid line is logged with file:line and
	// the previous list stays in force. A file with no proxies leaves the
	// pool without routes (Acquire waits); it does not mean direct.
	ProxyFile string
	// UserAgents are handed out to new sessions in turn.
	UserAgents []string
	// UserAgentFile lists more user agents, same format and reloading as
	// ProxyFile. Sessions whose user agent is no longer listed are retired.
	UserAgentFile string
	// DefaultUserAgent is used when neither UserAgents nor UserAgentFile
	// lists one. When it is empty too, the request's own User-Agent is kept.
	DefaultUserAgent string
	// Cookies gives each session its own cookie jar (net/http/cookiejar
	// with the public suffix list). Off: no jar, no cookies.
	Cookies bool
	// PoolSize is the number of sessions per proxy (default 4).
	PoolSize int
	// StickyRequests is how many consecutive requests to one host use the
	// same session (default 20; negative: pick each time).
	StickyRequests int
	// BanStatuses are the statuses that mean "banned" (default 403, 429).
	BanStatuses []int
	// BanBodyPattern is an RE2 regular expression matched against the
	// first BodyPrefix bytes of a body, such as "(?i)captcha"; "" = none.
	BanBodyPattern string
	// CooldownBase is the first cooldown of a failing proxy (default 30 s);
	// it doubles with each consecutive error up to CooldownMax (default
	// 10 min).
	CooldownBase time.Duration
	CooldownMax  time.Duration
	// MaxErrors consecutive errors retire a proxy or a session (default 5).
	MaxErrors int
	// MaxUses retires a session after that many uses; a fresh one replaces
	// it (default 500; negative: unlimited).
	MaxUses int
	// ReloadInterval is how often Run looks at the list files (default 5 s).
	ReloadInterval time.Duration
	// DialContext makes direct connections. Pass the SSRF-guarded
	// (netguard), DNS-cached dialer here: the default is a plain
	// net.Dialer that connects anywhere.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// ProxyDialContext makes connections to the proxies (default a plain
	// net.Dialer with a 30 s timeout).
	ProxyDialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TransportTemplate returns a NEW transport with base settings
	// (timeouts, idle connections, TLS); it is called once per proxy. The
	// pool sets Proxy and DialContext and clears the other dial hooks.
	TransportTemplate func() *http.Transport
	// OnEvent receives every proxy state change, in order, one call at a
	// time, outside the pool's lock: on the goroutine that caused the
	// change (a fetch worker in Report, Acquire, Run), or on one already
	// delivering events. It may call the Pool, but it delays that caller,
	// so it must return quickly (hand the event to a channel or a buffer).
	OnEvent func(Event)
	// Logger receives the pool's logs (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now); for tests.
	Now func() time.Time
}

// Event is a proxy state change.
type Event struct {
	Proxy  string    `json:"proxy"` // redacted URL or "direct"
	State  string    `json:"state"` // added, up, cooling, retired, removed
	Reason string    `json:"reason,omitempty"`
	Errors int       `json:"errors"` // consecutive errors
	Uses   int       `json:"uses"`
	At     time.Time `json:"at"`
}

// ProxyStatus is one proxy in Pool.Proxies.
type ProxyStatus struct {
	URL          string    `json:"url"`   // redacted URL or "direct"
	State        string    `json:"state"` // up, cooling, retired
	Errors       int       `json:"errors"`
	Uses         int       `json:"uses"`
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
}

// Result is what a request through a session gave, for Pool.Report.
type Result struct {
	// Status is the HTTP status, 0 if there was no response.
	Status int
	// Err is the transport error, if any: any non-nil value counts as a
	// connection failure against the session and its proxy. A Result
	// with neither Status nor Err is neutral (use it for failures that
	// are not the route's fault, such as a refused target address).
	Err error
	// Body is a prefix of the body (may be nil), for BanBodyPattern.
	Body []byte
}

// Verdict is the pool's reading of a Result.
type Verdict struct {
	// Banned: the response is a ban (status or body), not the page; the
	// request should be retried, through another session.
	Banned bool
	// Reason explains an error or a ban; "" for a success.
	Reason string
}

// Session is one identity: a route, a user agent and a cookie jar. It may
// be used by several goroutines at once.
type Session struct {
	id   string
	pool *Pool
	px   *proxyEntry
	ua   string
	jar  http.CookieJar // nil when cookies are off
	rt   *roundTripper
	slot int // index in px.sessions

	// guarded by pool.mu
	uses, errors int
	retired      bool
	lastUsed     uint64
}

// ID identifies the session within its pool.
func (s *Session) ID() string { return s.id }

// Proxy is the session's proxy URL with the password redacted, or
// "direct".
func (s *Session) Proxy() string { return s.px.spec.display }

// ProxyURL is the session's proxy URL with its credentials, or nil for a
// direct session: for handing the route to another client (a headless
// browser). Never log it; Proxy is the printable form.
func (s *Session) ProxyURL() *url.URL {
	if s.px.spec.u == nil {
		return nil
	}
	u := *s.px.spec.u
	return &u
}

// Jar is the session's cookie jar, nil when cookies are off.
func (s *Session) Jar() http.CookieJar { return s.jar }

// UserAgent is the User-Agent the session sends ("" keeps the request's).
func (s *Session) UserAgent() string { return s.ua }

// RoundTripper sends requests as this session: it sets the session's
// User-Agent (overriding the request's), adds the session's cookies and
// stores the ones the response sets (when cookies are on), and sends
// through the session's proxy. It does not follow redirects (use it in an
// http.Client for that) and does not modify the caller's request.
func (s *Session) RoundTripper() http.RoundTripper { return s.rt }

type roundTripper struct{ s *Session }

// RoundTrip implements http.RoundTripper.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	s := rt.s
	if s.ua == "" && s.jar == nil {
		return s.px.transport.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if s.ua != "" {
		r.Header.Set("User-Agent", s.ua)
	}
	if s.jar != nil {
		for _, c := range s.jar.Cookies(req.URL) {
			r.AddCookie(c)
		}
	}
	res, err := s.px.transport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if s.jar != nil {
		if cs := res.Cookies(); len(cs) > 0 {
			s.jar.SetCookies(req.URL, cs)
		}
	}
	return res, nil
}

// proxyEntry is one route and its sessions.
type proxyEntry struct {
	spec      proxySpec
	transport *http.Transport // immutable

	// guarded by pool.mu
	state        string // StateUp, StateCooling, StateRetired
	removed      bool
	errors       int // consecutive
	uses         int
	coolingUntil time.Time
	sessions     []*Session
}

type stickyEntry struct {
	s    *Session
	left int
}

// maxSticky bounds the host → session map; past it, entries are dropped.
const maxSticky = 1 << 16

// Pool hands out sessions. Create it with New and run Run.
type Pool struct {
	opt       Options
	log       *slog.Logger
	rlog      *ratelog.Logger
	now       func() time.Time
	banRE     *regexp.Regexp
	banStatus map[int]bool
	kick      chan struct{} // wakes Run when a cooldown starts

	fileMu    sync.Mutex // serializes file reloads
	proxyFile *listFile
	uaFile    *listFile

	mu         sync.Mutex
	proxies    []*proxyEntry
	uas        []string
	uaNext     int
	nextID     uint64
	useSeq     uint64
	rr         int
	sticky     map[string]*stickyEntry
	wake       chan struct{} // closed and replaced when a route may have become usable
	nextExpiry time.Time     // earliest coolingUntil, zero if none
	downLogged bool
	waiting    int // Acquire calls waiting for a usable route
	pending    []Event
	delivering bool
}

// New validates opt and builds the pool, reading the list files once.
func New(opt Options) (*Pool, error) {
	if opt.PoolSize <= 0 {
		opt.PoolSize = DefaultPoolSize
	}
	if opt.StickyRequests == 0 {
		opt.StickyRequests = DefaultStickyRequests
	}
	if len(opt.BanStatuses) == 0 {
		opt.BanStatuses = []int{http.StatusForbidden, http.StatusTooManyRequests}
	}
	if opt.CooldownBase <= 0 {
		opt.CooldownBase = DefaultCooldownBase
	}
	if opt.CooldownMax <= 0 {
		opt.CooldownMax = DefaultCooldownMax
	}
	opt.CooldownMax = max(opt.CooldownMax, opt.CooldownBase)
	if opt.MaxErrors <= 0 {
		opt.MaxErrors = DefaultMaxErrors
	}
	if opt.MaxUses == 0 {
		opt.MaxUses = DefaultMaxUses
	}
	if opt.ReloadInterval <= 0 {
		opt.ReloadInterval = DefaultReloadInterval
	}
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if opt.DialContext == nil {
		opt.DialContext = plain.DialContext
	}
	if opt.ProxyDialContext == nil {
		opt.ProxyDialContext = plain.DialContext
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	p := &Pool{
		opt:       opt,
		log:       opt.Logger,
		rlog:      ratelog.New(opt.Logger, time.Minute),
		now:       opt.Now,
		banStatus: map[int]bool{},
		kick:      make(chan struct{}, 1),
		sticky:    map[string]*stickyEntry{},
		wake:      make(chan struct{}),
	}
	for _, st := range opt.BanStatuses {
		if st < 100 || st > 999 {
			return nil, fmt.Errorf("new session pool: invalid ban status %d", st)
		}
		p.banStatus[st] = true
	}
	if opt.BanBodyPattern != "" {
		re, err := regexp.Compile(opt.BanBodyPattern)
		if err != nil {
			return nil, fmt.Errorf("new session pool: compile ban body pattern: %w", err)
		}
		p.banRE = re
	}
	for _, raw := range opt.Proxies {
		if _, err := parseProxy(raw); err != nil {
			return nil, fmt.Errorf("new session pool: %w", err)
		}
	}
	for _, ua := range opt.UserAgents {
		if err := checkUserAgent(ua); err != nil {
			return nil, fmt.Errorf("new session pool: %w", err)
		}
	}
	if err := checkUserAgent(opt.DefaultUserAgent); err != nil {
		return nil, fmt.Errorf("new session pool: default: %w", err)
	}
	if opt.ProxyFile != "" {
		p.proxyFile = &listFile{path: opt.ProxyFile, what: "proxy", parse: func(l string) error { _, err := parseProxy(l); return err }}
		if _, err := p.proxyFile.load(); err != nil {
			return nil, fmt.Errorf("new session pool: %w", err)
		}
	}
	if opt.UserAgentFile != "" {
		p.uaFile = &listFile{path: opt.UserAgentFile, what: "user agent", parse: checkUserAgent}
		if _, err := p.uaFile.load(); err != nil {
			return nil, fmt.Errorf("new session pool: %w", err)
		}
	}
	p.mu.Lock()
	p.uas = p.desiredUserAgents()
	err := p.setProxiesLocked(p.desiredProxies())
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("new session pool: %w", err)
	}
	if p.proxyFile != nil && len(p.proxies) == 0 {
		p.log.Warn("proxy file lists no proxies", "file", p.proxyFile.path)
	}
	p.flush()
	return p, nil
}

// Run watches the list files and ends cooldowns until ctx ends; then it
// closes the idle connections of every transport.
func (p *Pool) Run(ctx context.Context) {
	defer p.CloseIdleConnections()
	var reload <-chan time.Time
	if p.proxyFile != nil || p.uaFile != nil {
		tk := time.NewTicker(p.opt.ReloadInterval)
		defer tk.Stop()
		reload = tk.C
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.expire()
		timer.Reset(p.untilNextExpiry())
		select {
		case <-ctx.Done():
			return
		case <-reload:
			p.reloadFiles(ctx)
		case <-timer.C:
		case <-p.kick:
		}
	}
}

// tick does one round of Run's work at once: file reload and cooldown
// expiry.
func (p *Pool) tick(ctx context.Context) {
	p.reloadFiles(ctx)
	p.expire()
}

// Wait bounds, so that a clock that jumps is noticed and a wait never
// degenerates into spinning.
const (
	minWait = 5 * time.Millisecond
	maxWait = time.Minute
)

// untilNextExpiry is how long until the earliest cooldown ends, bounded.
func (p *Pool) untilNextExpiry() time.Duration {
	p.mu.Lock()
	next := p.nextExpiry
	p.mu.Unlock()
	if next.IsZero() {
		return maxWait
	}
	return min(max(next.Sub(p.now()), minWait), maxWait)
}

// CloseIdleConnections closes the idle connections of every route.
func (p *Pool) CloseIdleConnections() {
	p.mu.Lock()
	ts := make([]*http.Transport, 0, len(p.proxies))
	for _, px := range p.proxies {
		ts = append(ts, px.transport)
	}
	p.mu.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
}

// Acquire returns a session for a request to host: the host's sticky
// session while it has requests left and its proxy is up, otherwise the
// least recently used session of the next usable proxy, round-robin. When
// no proxy is usable it waits until one is, or returns ctx.Err().
func (p *Pool) Acquire(ctx context.Context, host string) (*Session, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.expireLocked(p.now())
		s := p.pickLocked(host)
		if s != nil {
			back := p.downLogged
			p.downLogged = false
			p.mu.Unlock()
			p.flush()
			if back {
				p.log.Info("a proxy is usable again", "proxy", s.px.spec.display)
			}
			return s, nil
		}
		first := !p.downLogged
		p.downLogged = true
		wake, next := p.wake, p.nextExpiry
		p.waiting++
		var cooling, retired int
		for _, px := range p.proxies {
			if px.state == StateCooling {
				cooling++
			} else {
				retired++
			}
		}
		p.mu.Unlock()
		p.flush()
		if first {
			p.log.Warn("all proxies down, waiting", "cooling", cooling, "retired", retired, "next_up", next)
		}
		d := maxWait
		if !next.IsZero() {
			d = min(max(next.Sub(p.now()), minWait), maxWait)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
	}
}

// pickLocked chooses and uses a session, or returns nil if no route is up.
func (p *Pool) pickLocked(host string) *Session {
	sticky := p.opt.StickyRequests > 0 && host != ""
	if sticky {
		if e, ok := p.sticky[host]; ok {
			if e.left > 0 && !e.s.retired && e.s.px.state == StateUp {
				e.left--
				if e.left == 0 {
					delete(p.sticky, host)
				}
				p.useLocked(e.s)
				return e.s
			}
			delete(p.sticky, host)
		}
	}
	n := len(p.proxies)
	for i := range n {
		idx := (p.rr + i) % n
		px := p.proxies[idx]
		if px.state != StateUp {
			continue
		}
		p.rr = (idx + 1) % n
		s := px.sessions[0]
		for _, c := range px.sessions[1:] {
			if c.lastUsed < s.lastUsed {
				s = c
			}
		}
		p.useLocked(s)
		if sticky && p.opt.StickyRequests > 1 {
			if len(p.sticky) >= maxSticky {
				p.trimStickyLocked()
			}
			p.sticky[host] = &stickyEntry{s: s, left: p.opt.StickyRequests - 1}
		}
		return s
	}
	return nil
}

// trimStickyLocked drops a quarter of the sticky map (Go's map order is
// unspecified, so which ones is arbitrary), dead sessions first.
func (p *Pool) trimStickyLocked() {
	for h, e := range p.sticky {
		if e.s.retired || e.s.px.state != StateUp {
			delete(p.sticky, h)
		}
	}
	for h := range p.sticky {
		if len(p.sticky) <= maxSticky*3/4 {
			break
		}
		delete(p.sticky, h)
	}
}

// useLocked counts one use of s; at MaxUses the session is retired (the
// request at hand still goes through it) and replaced.
func (p *Pool) useLocked(s *Session) {
	p.useSeq++
	s.lastUsed = p.useSeq
	s.uses++
	s.px.uses++
	if p.opt.MaxUses > 0 && s.uses >= p.opt.MaxUses {
		p.retireSessionLocked(s)
	}
}

// newSessionLocked makes a fresh session for slot i of px.
func (p *Pool) newSessionLocked(px *proxyEntry, i int) *Session {
	p.nextID++
	s := &Session{id: "s" + strconv.FormatUint(p.nextID, 10), pool: p, px: px, slot: i}
	if len(p.uas) > 0 {
		s.ua = p.uas[p.uaNext%len(p.uas)]
		p.uaNext++
	}
	if p.opt.Cookies {
		jar, err := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
		if err == nil { // cookiejar.New never fails
			s.jar = jar
		}
	}
	s.rt = &roundTripper{s: s}
	return s
}

// retireSessionLocked retires s and puts a fresh session in its place if
// its proxy is still in service.
func (p *Pool) retireSessionLocked(s *Session) {
	if s.retired {
		return
	}
	s.retired = true
	px := s.px
	if px.state != StateRetired && s.slot < len(px.sessions) && px.sessions[s.slot] == s {
		px.sessions[s.slot] = p.newSessionLocked(px, s.slot)
	}
}

// setProxiesLocked makes the route list want: new routes are added, routes
// not in it are removed, the others keep their state and sessions.
func (p *Pool) setProxiesLocked(want []proxySpec) error {
	now := p.now()
	old := map[string]*proxyEntry{}
	for _, px := range p.proxies {
		old[px.spec.key] = px
	}
	list := make([]*proxyEntry, 0, len(want))
	var added []*proxyEntry
	for _, sp := range want {
		if px, ok := old[sp.key]; ok {
			list = append(list, px)
			delete(old, sp.key)
			continue
		}
		t, err := p.newTransport(sp)
		if err != nil {
			for _, px := range added {
				px.transport.CloseIdleConnections()
			}
			return err
		}
		px := &proxyEntry{spec: sp, transport: t, state: StateUp}
		list = append(list, px)
		added = append(added, px)
	}
	for _, px := range added {
		px.sessions = make([]*Session, p.opt.PoolSize)
		for i := range px.sessions {
			px.sessions[i] = p.newSessionLocked(px, i)
		}
		p.eventLocked(px, StateAdded, "", now)
	}
	for _, px := range p.proxies {
		if _, gone := old[px.spec.key]; !gone {
			continue
		}
		px.removed = true
		px.state = StateRetired
		px.coolingUntil = time.Time{}
		for _, s := range px.sessions {
			s.retired = true
		}
		px.transport.CloseIdleConnections()
		p.eventLocked(px, StateRemoved, "no longer listed", now)
	}
	p.proxies = list
	if len(list) > 0 {
		p.rr %= len(list)
	}
	p.recomputeExpiryLocked()
	if len(added) > 0 {
		p.broadcastLocked()
	}
	return nil
}

// setUserAgentsLocked installs a new user agent list and retires the
// sessions whose user agent is no longer in it.
func (p *Pool) setUserAgentsLocked(uas []string) {
	p.uas = uas
	in := map[string]bool{}
	for _, ua := range uas {
		in[ua] = true
	}
	for _, px := range p.proxies {
		for _, s := range px.sessions {
			if !in[s.ua] {
				p.retireSessionLocked(s)
			}
		}
	}
}

// broadcastLocked wakes every waiting Acquire.
func (p *Pool) broadcastLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// expire ends the cooldowns that are over.
func (p *Pool) expire() {
	p.mu.Lock()
	p.expireLocked(p.now())
	p.mu.Unlock()
	p.flush()
}

func (p *Pool) expireLocked(now time.Time) {
	if p.nextExpiry.IsZero() || now.Before(p.nextExpiry) {
		return
	}
	woke := false
	for _, px := range p.proxies {
		if px.state == StateCooling && !now.Before(px.coolingUntil) {
			px.state = StateUp
			px.coolingUntil = time.Time{}
			woke = true
			p.eventLocked(px, StateUp, "cooldown over", now)
		}
	}
	p.recomputeExpiryLocked()
	if woke {
		p.broadcastLocked()
	}
}

func (p *Pool) recomputeExpiryLocked() {
	p.nextExpiry = time.Time{}
	for _, px := range p.proxies {
		if px.state == StateCooling && (p.nextExpiry.IsZero() || px.coolingUntil.Before(p.nextExpiry)) {
			p.nextExpiry = px.coolingUntil
		}
	}
}

// Report tells the pool how a request through s went and returns its
// reading: a transport error, a ban status or a body matching the ban
// pattern is an error against the session and its proxy; a response with
// any other status is a success and resets their consecutive error
// counts. See the package documentation for what follows an error.
func (p *Pool) Report(s *Session, r Result) Verdict {
	if s == nil || s.pool != p {
		return Verdict{}
	}
	var v Verdict
	switch {
	case r.Err != nil:
		v.Reason = "connection error: " + s.px.spec.scrub(r.Err.Error())
	case p.banStatus[r.Status]:
		v.Banned, v.Reason = true, "ban status "+strconv.Itoa(r.Status)
	case p.banRE != nil && r.Body != nil && p.banRE.Match(r.Body[:min(len(r.Body), BodyPrefix)]):
		v.Banned, v.Reason = true, "body matches the ban pattern"
	}
	if r.Err == nil && r.Status == 0 {
		return v // neutral
	}
	p.mu.Lock()
	px := s.px
	if v.Reason == "" {
		s.errors = 0
		if px.state == StateUp {
			px.errors = 0
		}
		p.mu.Unlock()
		return v
	}
	s.errors++
	if v.Banned || s.errors >= p.opt.MaxErrors {
		p.retireSessionLocked(s)
	}
	kick := false
	if px.state == StateUp {
		now := p.now()
		px.errors++
		if px.errors >= p.opt.MaxErrors {
			p.retireProxyLocked(px, fmt.Sprintf("%d consecutive errors, last: %s", px.errors, v.Reason), now)
		} else {
			d := p.opt.CooldownBase
			for i := 1; i < px.errors && d < p.opt.CooldownMax; i++ {
				d *= 2
			}
			px.state = StateCooling
			px.coolingUntil = now.Add(min(d, p.opt.CooldownMax))
			if p.nextExpiry.IsZero() || px.coolingUntil.Before(p.nextExpiry) {
				p.nextExpiry = px.coolingUntil
				kick = true
			}
			p.eventLocked(px, StateCooling, v.Reason, now)
		}
	}
	p.mu.Unlock()
	if kick {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	p.flush()
	return v
}

func (p *Pool) retireProxyLocked(px *proxyEntry, reason string, now time.Time) {
	px.state = StateRetired
	px.coolingUntil = time.Time{}
	for _, s := range px.sessions {
		s.retired = true
	}
	px.transport.CloseIdleConnections()
	p.recomputeExpiryLocked()
	p.eventLocked(px, StateRetired, reason, now)
}

// RetireProxy retires the proxy with this URL (as shown in ProxyStatus, or
// the full URL) for good, an admin action. It reports whether a proxy in
// service was retired. A proxy listed in ProxyFile comes back only if it
// leaves the file and is added again.
func (p *Pool) RetireProxy(proxy string) bool {
	key := proxy
	if sp, err := parseProxy(proxy); err == nil {
		key = sp.key
	}
	p.mu.Lock()
	done := false
	now := p.now()
	for _, px := range p.proxies {
		if px.state != StateRetired && (px.spec.display == proxy || px.spec.key == key) {
			p.retireProxyLocked(px, "retired by an admin", now)
			done = true
		}
	}
	p.mu.Unlock()
	p.flush()
	return done
}

// Proxies is the state of every route in the pool, in list order.
func (p *Pool) Proxies() []ProxyStatus {
	p.mu.Lock()
	p.expireLocked(p.now())
	out := make([]ProxyStatus, 0, len(p.proxies))
	for _, px := range p.proxies {
		out = append(out, ProxyStatus{URL: px.spec.display, State: px.state, Errors: px.errors, Uses: px.uses, CoolingUntil: px.coolingUntil})
	}
	p.mu.Unlock()
	p.flush()
	return out
}

// eventLocked queues an event for OnEvent and the log.
func (p *Pool) eventLocked(px *proxyEntry, state, reason string, now time.Time) {
	p.pending = append(p.pending, Event{Proxy: px.spec.display, State: state, Reason: reason, Errors: px.errors, Uses: px.uses, At: now})
}

// flush delivers the queued events, outside the lock, in order, one at a
// time: if another goroutine is delivering, it delivers ours too.
func (p *Pool) flush() {
	p.mu.Lock()
	if p.delivering || len(p.pending) == 0 {
		p.mu.Unlock()
		return
	}
	p.delivering = true
	p.mu.Unlock()
	defer func() { // even if OnEvent panics
		p.mu.Lock()
		p.delivering = false
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		evs := p.pending
		p.pending = nil
		if len(evs) == 0 {
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		for _, e := range evs {
			p.deliver(e)
		}
	}
}

func (p *Pool) deliver(e Event) {
	ctx := context.Background()
	switch e.State {
	case StateCooling:
		p.rlog.Log(ctx, slog.LevelInfo, "cooling:"+e.Proxy, "proxy cooling down", "proxy", e.Proxy, "reason", e.Reason, "errors", e.Errors)
	case StateRetired:
		p.log.Warn("proxy retired", "proxy", e.Proxy, "reason", e.Reason, "errors", e.Errors, "uses", e.Uses)
	case StateRemoved:
		p.log.Info("proxy removed", "proxy", e.Proxy, "reason", e.Reason, "uses", e.Uses)
	case StateAdded:
		p.log.Info("proxy added", "proxy", e.Proxy)
	default:
		p.log.Debug("proxy state", "proxy", e.Proxy, "state", e.State, "reason", e.Reason)
	}
	if p.opt.OnEvent != nil {
		p.opt.OnEvent(e)
	}
}
