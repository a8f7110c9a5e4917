package session

// The pool: its options, its proxies' state, and its life (New, Run, the
// expiry of cooldowns and idle connections).

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"

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
