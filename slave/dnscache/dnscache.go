// Package dnscache is a caching DNS resolver with pre-resolution for the
// crawler's slaves, after patent CN110365810B (a DNS cache with
// pre-resolution, a positive and a negative cache, entries weighted by
// resolve time, TTL and last access, the lowest weight evicted when full).
//
// # Lookups
//
// LookupIP returns IP literals as they are, without a query. The names
// "localhost" and "*.localhost" (RFC 6761) always go to the system resolver
// (net.DefaultResolver), uncached; so do the names of the hosts file when
// Options.Server is "" (the system resolver answers them from the file, so
// caching them would only hide edits to it). Every other name is looked up
// in the positive cache, then in the negative cache; on a miss the A and
// AAAA queries are sent concurrently to Options.Server over UDP, retried
// over TCP when the answer is truncated (or, with Server "", one system
// resolver call is made). Concurrent lookups of one name share one
// resolution (a hand-written singleflight), and a name's cache is checked
// again under the same lock that registers a resolution, so a name is
// resolved at most once per TTL however many goroutines ask for it.
//
// A resolution runs in its own goroutine under the resolver's life and
// Options.Timeout, not under the caller's context: a caller whose context
// ends gets its context's error at once, and the resolution still
// completes and fills the cache for the next caller.
//
// # The two caches
//
// Successful answers go to the positive cache for the smallest TTL of the
// answer records, clamped to [MinTTL, MaxTTL] (DefaultTTL for the system
// resolver, whose answers carry no TTL). Failures (NXDOMAIN, a NOERROR
// answer without addresses, SERVFAIL, timeouts, unreachable servers) go to
// the negative cache for NegativeTTL, and a lookup that hits one gets the
// cached *net.DNSError (IsNotFound, IsTimeout and IsTemporary preserved)
// without a query.
//
// The patent puts hosts whose resolution is slow on the negative side. A
// resolution that succeeds but takes longer than SlowThreshold is here
// served (its addresses are good) and stored in the negative cache with the
// addresses, marked slow, for min(its TTL, NegativeTTL): a slow host is
// therefore re-resolved sooner than a fast one (its name server may have
// been briefly overloaded), it competes for room with failures rather than
// with healthy hosts, and Slow(host) reports the mark so that a scheduler
// can deprioritise fetches to it. Lookups that hit a slow entry count as
// hits and return its addresses without error.
//
// # Eviction
//
// Each entry has a weight
//
//	weight = (1 + resolve time in ms) × remaining TTL in s / (1 + idle time in min)
//
// where idle time is the time since the entry was last served: an entry that
// was expensive to resolve, has long to live and was used recently is worth
// keeping; an expired entry weighs 0. Weights change as time passes, so a
// heap ordered by weight would go stale; instead, as in Redis's approximated
// LRU, inserting into a full cache evicts the lowest-weight entry of a
// random sample of 16 entries (all of them when the cache holds at most 16,
// so small caches evict exactly the lowest weight). Eviction is O(1) in the
// cache size. Each cache holds at most MaxEntries entries.
//
// # Prefetch
//
// Prefetch queues the names not already cached, queued or being resolved,
// and returns at once. The queue holds at most MaxPending names; names that
// do not fit are dropped and counted (Stats.Dropped), so Prefetch never
// blocks, even when the name server is stuck. Workers are started on demand,
// up to min(MaxWorkers, ceil(queued/4)), so a handful of names does not spawn
// a crowd of goroutines, and exit when the queue is empty. Close stops
// everything: it cancels the resolutions under way and waits for every
// goroutine the resolver started.
package dnscache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// ErrClosed is the error (wrapped in a *net.DNSError) of a lookup that needs
// a resolution after Close.
var ErrClosed = errors.New("dnscache: resolver closed")

// Options configure a Resolver. Zero values take the documented defaults.
type Options struct {
	// Server is the "host:port" of a DNS server queried directly (UDP, TCP
	// when the answer is truncated). "" uses the system resolver,
	// net.DefaultResolver.
	Server string
	// MinTTL and MaxTTL clamp the TTL of the answers (defaults 30s and 1h).
	MinTTL, MaxTTL time.Duration
	// DefaultTTL is the time answers of the system resolver, which carry no
	// TTL, are cached (default 5m).
	DefaultTTL time.Duration
	// NegativeTTL is the time failures are cached (default 1m); it also
	// caps the time a slow host is cached.
	NegativeTTL time.Duration
	// SlowThreshold: a successful resolution slower than this marks its host
	// slow (see the package documentation; default 2s).
	SlowThreshold time.Duration
	// Timeout bounds one resolution, the A and AAAA queries running
	// concurrently under it (default 5s).
	Timeout time.Duration
	// MaxEntries is the capacity of each of the two caches (default 10000).
	MaxEntries int
	// MaxWorkers bounds the goroutines resolving prefetched names
	// (default 16).
	MaxWorkers int
	// MaxPending bounds the names waiting to be prefetched; more are dropped
	// (default 1024).
	MaxPending int
	// HostsFile is the hosts file whose names bypass the cache when Server
	// is "" (default /etc/hosts; read once by New, a missing file is
	// ignored).
	HostsFile string
	// Logger receives debug logs of resolutions (default: discarded).
	Logger *slog.Logger
	// Now is the clock of TTLs, idle and resolve times (default time.Now);
	// for tests.
	Now func() time.Time
}

// Stats are counters since New.
type Stats struct {
	Queries      uint64 // resolutions sent upstream (an A+AAAA pair to Server, or one system resolver call)
	Hits         uint64 // lookups answered with addresses from a cache
	NegativeHits uint64 // lookups answered with a cached error
	Misses       uint64 // lookups that waited for a resolution
	Coalesced    uint64 // of the misses, those that joined a resolution already under way
	Slow         uint64 // successful resolutions slower than SlowThreshold
	Evictions    uint64 // entries evicted from a full cache
	Prefetched   uint64 // resolutions started by Prefetch
	Dropped      uint64 // names Prefetch dropped because its queue was full
	Positive     int    // entries in the positive cache now
	Negative     int    // entries in the negative cache now
}

// Resolver is a caching resolver. Its methods are safe for concurrent use.
type Resolver struct {
	opt   Options
	log   *slog.Logger
	now   func() time.Time
	hosts map[string]bool // hosts-file names bypassing the cache (Server "")

	base   context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // resolutions and workers

	cmu sync.RWMutex // guards pos, neg (lock order: fmu, then cmu)
	pos *cache
	neg *cache

	fmu      sync.Mutex // guards the fields below
	closed   bool
	inflight map[string]*call
	queue    []string // names waiting to be prefetched
	queued   map[string]bool
	workers  int

	queries, hits, negHits, misses, coalesced, slow, evictions, prefetched, dropped atomic.Uint64
}

// call is one resolution, shared by the lookups of its name.
type call struct {
	done  chan struct{}
	addrs []netip.Addr
	err   *net.DNSError
}

// New returns a Resolver. It fails on invalid options.
func New(opt Options) (*Resolver, error) {
	if opt.Server != "" {
		if _, _, err := net.SplitHostPort(opt.Server); err != nil {
			return nil, fmt.Errorf("dnscache: parse server %q: %w", opt.Server, err)
		}
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"MinTTL", &opt.MinTTL, 30 * time.Second},
		{"MaxTTL", &opt.MaxTTL, time.Hour},
		{"DefaultTTL", &opt.DefaultTTL, 5 * time.Minute},
		{"NegativeTTL", &opt.NegativeTTL, time.Minute},
		{"SlowThreshold", &opt.SlowThreshold, 2 * time.Second},
		{"Timeout", &opt.Timeout, 5 * time.Second},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("dnscache: check options: negative %s %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if opt.MinTTL > opt.MaxTTL {
		return nil, fmt.Errorf("dnscache: check options: MinTTL %v above MaxTTL %v", opt.MinTTL, opt.MaxTTL)
	}
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxEntries", &opt.MaxEntries, 10000},
		{"MaxWorkers", &opt.MaxWorkers, 16},
		{"MaxPending", &opt.MaxPending, 1024},
	} {
		if *n.v < 0 {
			return nil, fmt.Errorf("dnscache: check options: negative %s %d", n.name, *n.v)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	if opt.HostsFile == "" {
		opt.HostsFile = "/etc/hosts"
	}
	r := &Resolver{
		opt:      opt,
		log:      opt.Logger,
		now:      opt.Now,
		pos:      newCache(opt.MaxEntries),
		neg:      newCache(opt.MaxEntries),
		inflight: make(map[string]*call),
		queued:   make(map[string]bool),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if opt.Server == "" {
		hosts, err := readHosts(opt.HostsFile)
		if err != nil {
			return nil, err
		}
		r.hosts = hosts
	}
	r.base, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// readHosts returns the names of a hosts file; a missing file has none.
func readHosts(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dnscache: open hosts file: %w", err)
	}
	defer f.Close()
	hosts, err := parseHosts(f)
	if err != nil {
		return nil, fmt.Errorf("dnscache: read hosts file %s: %w", path, err)
	}
	return hosts, nil
}

// parseHosts returns the names of the lines "ip name..." of a hosts file.
func parseHosts(f io.Reader) (map[string]bool, error) {
	hosts := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if _, err := netip.ParseAddr(fields[0]); err != nil {
			continue
		}
		for _, name := range fields[1:] {
			hosts[normalize(name)] = true
		}
	}
	return hosts, sc.Err()
}

// Close cancels the resolutions under way and waits for every goroutine of
// the resolver to end. Cached answers are still served after Close; lookups
// that need a resolution fail with ErrClosed. Close may be called more than
// once.
func (r *Resolver) Close() {
	r.fmu.Lock()
	r.closed = true
	r.queue, r.queued = nil, map[string]bool{}
	r.fmu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// Stats returns the counters.
func (r *Resolver) Stats() Stats {
	r.cmu.RLock()
	pos, neg := r.pos.len(), r.neg.len()
	r.cmu.RUnlock()
	return Stats{
		Queries:      r.queries.Load(),
		Hits:         r.hits.Load(),
		NegativeHits: r.negHits.Load(),
		Misses:       r.misses.Load(),
		Coalesced:    r.coalesced.Load(),
		Slow:         r.slow.Load(),
		Evictions:    r.evictions.Load(),
		Prefetched:   r.prefetched.Load(),
		Dropped:      r.dropped.Load(),
		Positive:     pos,
		Negative:     neg,
	}
}

// normalize lower-cases a name and drops its final dot.
func normalize(host string) string {
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// kind classifies a normalized name.
type kind int

const (
	kindName    kind = iota // an ordinary name, cached
	kindLiteral             // an IP literal
	kindSystem              // localhost or a hosts-file name: system resolver, uncached
	kindInvalid             // not a valid domain name
)

func (r *Resolver) classify(host string) (kind, netip.Addr) {
	if host == "" {
		return kindInvalid, netip.Addr{}
	}
	// Only a name ending in a digit or holding a colon can be an IP
	// literal; skipping ParseAddr otherwise spares a hit its error value.
	if last := host[len(host)-1:]; strings.ContainsRune(host, ':') || (last >= "0" && last <= "9") || last == "]" {
		if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
			return kindLiteral, ip
		}
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || r.hosts[host] {
		return kindSystem, netip.Addr{}
	}
	if _, ok := dns.IsDomainName(host); !ok || host == "" || len(host) > 253 {
		return kindInvalid, netip.Addr{}
	}
	return kindName, netip.Addr{}
}

// LookupIP returns the addresses of host, IPv4 first. Errors are
// *net.DNSError (from a cache, a resolution, or wrapping the context's
// error or ErrClosed in UnwrapErr).
func (r *Resolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	name := normalize(host)
	switch k, ip := r.classify(name); k {
	case kindLiteral:
		return []netip.Addr{ip}, nil
	case kindInvalid:
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	case kindSystem:
		addrs, err := r.systemLookup(ctx, name)
		if err != nil {
			return nil, err
		}
		return addrs, nil
	}
	if addrs, ok, err := r.cached(name); ok {
		return addrs, err
	}
	r.misses.Add(1)
	c, _, err := r.flight(name)
	if err != nil {
		return nil, err
	}
	select {
	case <-c.done:
		if c.err != nil {
			e := *c.err
			return nil, &e
		}
		return clone(c.addrs), nil
	case <-ctx.Done():
		return nil, &net.DNSError{
			Err:       ctx.Err().Error(),
			Name:      name,
			Server:    r.opt.Server,
			IsTimeout: errors.Is(ctx.Err(), context.DeadlineExceeded),
			UnwrapErr: ctx.Err(),
		}
	}
}

// Slow reports whether host's last resolution was slower than
// SlowThreshold and is still cached, so fetches to it may be deprioritised.
func (r *Resolver) Slow(host string) bool {
	name := normalize(host)
	now := r.now()
	r.cmu.RLock()
	defer r.cmu.RUnlock()
	e := r.neg.peek(name, now)
	return e != nil && e.slow
}

// entry returns the live cached entry of name, positive first, or nil.
// Entries are immutable once stored (but for lastAccess), so the caller may
// read one after the lock is released.
func (r *Resolver) entry(name string, now time.Time) *entry {
	r.cmu.RLock()
	defer r.cmu.RUnlock()
	if e := r.pos.peek(name, now); e != nil {
		return e
	}
	return r.neg.peek(name, now)
}

// cached answers a lookup of name from the caches, counting the hit and
// updating the entry's last access; ok is false on a miss.
func (r *Resolver) cached(name string) (addrs []netip.Addr, ok bool, err error) {
	now := r.now()
	e := r.entry(name, now)
	if e == nil {
		return nil, false, nil
	}
	e.lastAccess.Store(now.UnixNano())
	if e.err != nil {
		r.negHits.Add(1)
		de := *e.err
		return nil, true, &de
	}
	r.hits.Add(1)
	return clone(e.addrs), true, nil
}

// flight returns the resolution of name under way, or starts one; started
// reports the latter. A call that is already done is returned when the
// name was cached in the meantime.
func (r *Resolver) flight(name string) (c *call, started bool, err error) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if r.closed {
		return nil, false, &net.DNSError{Err: ErrClosed.Error(), Name: name, Server: r.opt.Server, UnwrapErr: ErrClosed}
	}
	if c := r.inflight[name]; c != nil {
		r.coalesced.Add(1)
		return c, false, nil
	}
	// The resolution that filled the cache may have ended since the
	// caller's miss: it stores its answer and leaves inflight under fmu.
	if e := r.entry(name, r.now()); e != nil {
		c := &call{done: make(chan struct{}), addrs: e.addrs, err: e.err}
		close(c.done)
		return c, false, nil
	}
	c = &call{done: make(chan struct{})}
	r.inflight[name] = c
	r.wg.Add(1)
	go r.run(name, c)
	return c, true, nil
}

// run resolves name, caches the answer and ends c.
func (r *Resolver) run(name string, c *call) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.base, r.opt.Timeout)
	start := r.now()
	r.queries.Add(1)
	var (
		addrs []netip.Addr
		ttl   time.Duration
		derr  *net.DNSError
	)
	if r.opt.Server == "" {
		addrs, derr = r.system(ctx, name)
		ttl = r.opt.DefaultTTL
	} else {
		addrs, ttl, derr = r.query(ctx, name)
		ttl = min(max(ttl, r.opt.MinTTL), r.opt.MaxTTL)
	}
	cancel()
	now := r.now()
	took := now.Sub(start)
	closing := r.base.Err() != nil

	e := &entry{host: name, addrs: addrs, err: derr, took: took}
	e.lastAccess.Store(now.UnixNano())
	slow := derr == nil && took > r.opt.SlowThreshold
	switch {
	case derr != nil:
		e.expires = now.Add(r.opt.NegativeTTL)
	case slow:
		r.slow.Add(1)
		e.slow = true
		e.expires = now.Add(min(ttl, r.opt.NegativeTTL))
	default:
		e.expires = now.Add(ttl)
	}

	r.fmu.Lock()
	if !(closing && derr != nil) { // a failure caused by Close says nothing about name
		r.cmu.Lock()
		into, other := r.pos, r.neg
		if derr != nil || slow {
			into, other = r.neg, r.pos
		}
		other.remove(name)
		r.evictions.Add(uint64(into.put(e, now)))
		r.cmu.Unlock()
	}
	c.addrs, c.err = addrs, derr
	delete(r.inflight, name)
	r.fmu.Unlock()
	close(c.done)

	if derr != nil {
		r.log.Debug("dnscache: resolution failed", "host", name, "took", took, "err", derr)
	} else {
		r.log.Debug("dnscache: resolved", "host", name, "took", took, "addrs", len(addrs), "ttl", e.expires.Sub(now), "slow", slow)
	}
}

// systemLookup resolves a localhost or hosts-file name, uncached.
func (r *Resolver) systemLookup(ctx context.Context, name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.Timeout)
	defer cancel()
	addrs, derr := r.system(ctx, name)
	if derr != nil {
		return nil, derr
	}
	return addrs, nil
}

// system resolves name with net.DefaultResolver.
func (r *Resolver) system(ctx context.Context, name string) ([]netip.Addr, *net.DNSError) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) {
			c := *de
			return nil, &c
		}
		return nil, &net.DNSError{Err: err.Error(), Name: name, IsTemporary: true, UnwrapErr: err}
	}
	var v4, v6 []netip.Addr
	for _, ip := range ips {
		ip = ip.Unmap()
		if ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	return dedup(append(v4, v6...)), nil
}

// answer is the outcome of one query.
type answer struct {
	addrs []netip.Addr
	ttl   uint32 // smallest TTL of the answer records
	rcode int
	err   error // transport error; rcode is meaningless then
}

// query sends the A and AAAA queries for name concurrently and combines
// their answers.
func (r *Resolver) query(ctx context.Context, name string) ([]netip.Addr, time.Duration, *net.DNSError) {
	var a, aaaa answer
	var wg sync.WaitGroup
	wg.Go(func() { a = r.exchange(ctx, name, dns.TypeA) })
	aaaa = r.exchange(ctx, name, dns.TypeAAAA)
	wg.Wait()

	if len(a.addrs)+len(aaaa.addrs) > 0 {
		ttl := uint32(1<<32 - 1)
		for _, x := range []answer{a, aaaa} {
			if len(x.addrs) > 0 {
				ttl = min(ttl, x.ttl)
			}
		}
		return dedup(append(a.addrs, aaaa.addrs...)), time.Duration(ttl) * time.Second, nil
	}
	de := &net.DNSError{Name: name, Server: r.opt.Server}
	switch {
	case (a.err == nil && a.rcode == dns.RcodeNameError) || (aaaa.err == nil && aaaa.rcode == dns.RcodeNameError),
		a.err == nil && aaaa.err == nil && a.rcode == dns.RcodeSuccess && aaaa.rcode == dns.RcodeSuccess:
		de.Err, de.IsNotFound = "no such host", true
	case isTimeout(a.err) || isTimeout(aaaa.err):
		de.Err, de.IsTimeout, de.IsTemporary = "i/o timeout", true, true
		de.UnwrapErr = context.DeadlineExceeded
	case a.err != nil:
		de.Err, de.IsTemporary, de.UnwrapErr = a.err.Error(), true, a.err
	case aaaa.err != nil:
		de.Err, de.IsTemporary, de.UnwrapErr = aaaa.err.Error(), true, aaaa.err
	default:
		rc := a.rcode
		if rc == dns.RcodeSuccess {
			rc = aaaa.rcode
		}
		de.Err, de.IsTemporary = "server misbehaving: "+dns.RcodeToString[rc], true
	}
	return nil, 0, de
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
}

// exchange sends one query, over UDP and, if the answer is truncated, over
// TCP.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) answer {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	resp, err := r.exchangeNet(ctx, "udp", m)
	if err == nil && resp.Truncated {
		resp, err = r.exchangeNet(ctx, "tcp", m)
	}
	if err != nil {
		return answer{err: err}
	}
	ans := answer{rcode: resp.Rcode, ttl: 1<<32 - 1}
	if resp.Rcode != dns.RcodeSuccess {
		return ans
	}
	for _, rr := range resp.Answer {
		var ip netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			ip, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			ip, _ = netip.AddrFromSlice(rr.AAAA.To16())
		case *dns.CNAME:
			ans.ttl = min(ans.ttl, rr.Hdr.Ttl)
			continue
		default:
			continue
		}
		if ip.IsValid() {
			ans.addrs = append(ans.addrs, ip)
			ans.ttl = min(ans.ttl, rr.Header().Ttl)
		}
	}
	return ans
}

// exchangeNet sends m over network; ending ctx closes the connection, so
// Close interrupts a query to a stuck server (miekg/dns only honours the
// context's deadline).
func (r *Resolver) exchangeNet(ctx context.Context, network string, m *dns.Msg) (*dns.Msg, error) {
	client := &dns.Client{Net: network, Timeout: r.opt.Timeout}
	co, err := client.DialContext(ctx, r.opt.Server)
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: %w", network, r.opt.Server, err)
	}
	defer co.Close()
	stop := context.AfterFunc(ctx, func() { co.Close() })
	defer stop()
	resp, _, err := client.ExchangeWithConnContext(ctx, m, co)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exchange over %s: %w", network, ctx.Err())
		}
		return nil, fmt.Errorf("exchange over %s: %w", network, err)
	}
	return resp, nil
}

// Prefetch resolves in the background the hosts that are not IP literals,
// not already cached, queued or being resolved. It returns at once; names
// beyond the queue's room are dropped and counted.
func (r *Resolver) Prefetch(hosts []string) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if r.closed {
		return
	}
	dropped, now := 0, r.now()
	for _, h := range hosts {
		name := normalize(h)
		if k, _ := r.classify(name); k != kindName || r.queued[name] || r.inflight[name] != nil {
			continue
		}
		if r.entry(name, now) != nil {
			continue
		}
		if len(r.queue) >= r.opt.MaxPending {
			dropped++
			continue
		}
		r.queue = append(r.queue, name)
		r.queued[name] = true
	}
	if dropped > 0 {
		r.dropped.Add(uint64(dropped))
		r.log.Debug("dnscache: prefetch queue full", "dropped", dropped)
	}
	for want := min(r.opt.MaxWorkers, (len(r.queue)+3)/4); r.workers < want; r.workers++ {
		r.wg.Add(1)
		go r.worker()
	}
}

// worker resolves queued names until the queue is empty or the resolver
// closes.
func (r *Resolver) worker() {
	defer r.wg.Done()
	for {
		r.fmu.Lock()
		if r.closed || len(r.queue) == 0 {
			r.workers--
			r.fmu.Unlock()
			return
		}
		name := r.queue[0]
		r.queue[0] = ""
		r.queue = r.queue[1:]
		if len(r.queue) == 0 {
			r.queue = nil
		}
		delete(r.queued, name)
		r.fmu.Unlock()

		if r.entry(name, r.now()) != nil {
			continue
		}
		c, started, err := r.flight(name)
		if err != nil {
			continue
		}
		if started {
			r.prefetched.Add(1)
		}
		select {
		case <-c.done:
		case <-r.base.Done():
		}
	}
}

// DialContext wraps dial: the host of addr is resolved through the cache
// and dial is called with "ip:port" for each address in turn (restricted
// to the family of "tcp4"/"tcp6" networks) until one connects or ctx ends.
// A dialer with a netguard Control function thus still checks the IP it
// connects to.
func (r *Resolver) DialContext(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dnscache: dial %s: %w", addr, err)
		}
		ips, err := r.LookupIP(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("dnscache: dial %s: %w", addr, err)
		}
		var errs []error
		tried := 0
		for _, ip := range ips {
			if (strings.HasSuffix(network, "4") && !ip.Unmap().Is4()) || (strings.HasSuffix(network, "6") && !ip.Is6()) {
				continue
			}
			tried++
			conn, err := dial(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		if tried == 0 {
			return nil, fmt.Errorf("dnscache: dial %s: no %s address among %v", addr, network, ips)
		}
		return nil, fmt.Errorf("dnscache: dial %s: %w", addr, errors.Join(errs...))
	}
}

func clone(addrs []netip.Addr) []netip.Addr {
	return append([]netip.Addr(nil), addrs...)
}

// dedup removes repeated addresses, keeping the first of each.
func dedup(addrs []netip.Addr) []netip.Addr {
	out := addrs[:0]
	for i, a := range addrs {
		seen := false
		for _, b := range addrs[:i] {
			if a == b {
				seen = true
				break
			}
		}
		if !seen {
			out = append(out, a)
		}
	}
	return out
}

// entry is one cached answer or failure.
type entry struct {
	host       string
	addrs      []netip.Addr
	err        *net.DNSError // a failure (negative cache) when set
	slow       bool          // a slow success (negative cache)
	took       time.Duration // resolve time
	expires    time.Time
	lastAccess atomic.Int64 // Unix ns; updated by hits under the read lock
	idx        int          // index in cache.list
}

// weight is the value of keeping e at now; see the package documentation.
func (e *entry) weight(now time.Time) float64 {
	remaining := e.expires.Sub(now)
	if remaining <= 0 {
		return 0
	}
	cost := 1 + float64(e.took)/float64(time.Millisecond)
	idle := max(0, now.Sub(time.Unix(0, e.lastAccess.Load())))
	return cost * remaining.Seconds() / (1 + idle.Minutes())
}

// sampleSize is the number of entries sampled to choose one to evict.
const sampleSize = 16

// cache is a bounded map of entries with sampled lowest-weight eviction.
// It is not safe for concurrent use.
type cache struct {
	max  int
	m    map[string]*entry
	list []*entry // the entries, for sampling
	rng  *rand.Rand
}

func newCache(maxEntries int) *cache {
	return &cache{
		max: maxEntries,
		m:   make(map[string]*entry),
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
}

func (c *cache) len() int { return len(c.list) }

// peek returns the live entry of host, or nil.
func (c *cache) peek(host string, now time.Time) *entry {
	e := c.m[host]
	if e == nil || !now.Before(e.expires) {
		return nil
	}
	return e
}

// remove deletes host's entry if any.
func (c *cache) remove(host string) {
	e := c.m[host]
	if e == nil {
		return
	}
	last := c.list[len(c.list)-1]
	c.list[e.idx] = last
	last.idx = e.idx
	c.list[len(c.list)-1] = nil
	c.list = c.list[:len(c.list)-1]
	delete(c.m, host)
}

// put stores e, replacing the entry of its host, and returns the number of
// entries evicted to make room.
func (c *cache) put(e *entry, now time.Time) int {
	c.remove(e.host)
	evicted := 0
	for len(c.list) >= c.max && len(c.list) > 0 {
		c.remove(c.victim(now).host)
		evicted++
	}
	e.idx = len(c.list)
	c.list = append(c.list, e)
	c.m[e.host] = e
	return evicted
}

// victim returns the lowest-weight entry among all entries if there are at
// most sampleSize, else among sampleSize random ones.
func (c *cache) victim(now time.Time) *entry {
	var best *entry
	var bestW float64
	consider := func(e *entry) {
		if w := e.weight(now); best == nil || w < bestW {
			best, bestW = e, w
		}
	}
	if len(c.list) <= sampleSize {
		for _, e := range c.list {
			consider(e)
		}
		return best
	}
	for range sampleSize {
		consider(c.list[c.rng.IntN(len(c.list))])
	}
	return best
}
