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
// AAAA queries are sent together to Options.Server from one UDP socket
// (answers told apart by their IDs), each retried over TCP when its
// answer is truncated (or, with Server "", one system
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
// cache size. Each cache holds at most MaxEntries entries, but for pinned
// ones.
//
// # Pinning
//
// A broad crawl has far more hosts than the cache holds. The hosts a slave
// holds leases for are about to be fetched (their entries were just
// pre-resolved), so evicting one only makes its fetch resolve it again:
// Pin marks a name in use (a count: one Pin per lease, one Unpin when the
// lease is let go), and eviction passes over the entries of pinned names.
// When every entry is pinned, the cache grows past MaxEntries rather than
// evict one; it shrinks back as names are unpinned and new entries stored.
// The pinned names are few (the leases a slave holds, a few times its
// concurrency), so drawing a victim stays O(1) unless nearly every entry is
// pinned (then it scans the cache).
//
// # Prefetch
//
// Prefetch queues the names not already cached, queued or being resolved,
// and returns at once. PrefetchIfRoom does the same for names that may
// never be fetched here (the hosts of found links, which another slave may
// claim, or which are already crawled): it queues only as many as fit the
// positive cache without evicting anything, and counts the others
// (Stats.Skipped), so speculation never pushes out the entries of hosts in
// use; a full cache of a broad crawl thus resolves a name when its task is
// claimed, not each time a page links to it. The queue holds at most MaxPending names; names that
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
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	// Timeout bounds one resolution, the A and AAAA queries sent together
	// under it (default 5s).
	Timeout time.Duration
	// MaxEntries is the capacity of each of the two caches (default
	// 100000, ~200 bytes an entry), pinned entries aside.
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
	Skipped      uint64 // names PrefetchIfRoom skipped because the cache had no room
	Positive     int    // entries in the positive cache now
	Negative     int    // entries in the negative cache now
	Pinned       int    // names pinned now
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

	cmu  sync.RWMutex // guards pos, neg, pins (lock order: fmu, then cmu)
	pos  *cache
	neg  *cache
	pins map[string]int // pinned names and their counts, shared by pos and neg

	fmu      sync.Mutex // guards the fields below
	closed   bool
	inflight map[string]*call
	queue    []string // names waiting to be prefetched
	queued   map[string]bool
	workers  int

	queries, hits, negHits, misses, coalesced, slow, evictions, prefetched, dropped, skipped atomic.Uint64
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
		{"MaxEntries", &opt.MaxEntries, 100000},
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
		pins:     make(map[string]int),
		inflight: make(map[string]*call),
		queued:   make(map[string]bool),
	}
	r.pos.pins, r.neg.pins = r.pins, r.pins
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
	pos, neg, pinned := r.pos.len(), r.neg.len(), len(r.pins)
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
		Skipped:      r.skipped.Load(),
		Positive:     pos,
		Negative:     neg,
		Pinned:       pinned,
	}
}

// Pin marks host in use: its entries are not evicted until as many Unpin
// calls as Pin calls were made. Pinning does not resolve the name.
func (r *Resolver) Pin(host string) {
	name := normalize(host)
	r.cmu.Lock()
	r.pins[name]++
	r.cmu.Unlock()
}

// Unpin ends one Pin of host; unpinning a name that is not pinned does
// nothing.
func (r *Resolver) Unpin(host string) {
	name := normalize(host)
	r.cmu.Lock()
	if n := r.pins[name]; n > 1 {
		r.pins[name] = n - 1
	} else {
		delete(r.pins, name)
	}
	r.cmu.Unlock()
}

// normalize lower-cases a name and drops its final dot.
func normalize(host string) string {
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
