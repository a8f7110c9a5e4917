package dnscache

// Lookups: literals, localhost and hosts-file names to the system resolver,
// the positive and negative caches, and one resolution per name at a time
// however many goroutines ask (flight).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

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
