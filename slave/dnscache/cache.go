package dnscache

// The cache: entries weighted by resolve time, TTL and last access; when
// full, the lowest weight of a sample of the unpinned entries is evicted.

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

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

// sampleRounds is how many samples are drawn before the victim is sought
// by a scan, when every sampled entry is pinned.
const sampleRounds = 4

// cache is a bounded map of entries with sampled lowest-weight eviction.
// Entries whose host is in pins (a count above 0) are never evicted: the
// cache holds more than max entries rather than drop one. It is not safe
// for concurrent use.
type cache struct {
	max  int
	m    map[string]*entry
	list []*entry       // the entries, for sampling
	pins map[string]int // hosts in use; shared with the other cache, may be nil
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
		v := c.victim(now)
		if v == nil { // every entry is pinned
			break
		}
		c.remove(v.host)
		evicted++
	}
	e.idx = len(c.list)
	c.list = append(c.list, e)
	c.m[e.host] = e
	return evicted
}

// victim returns the lowest-weight unpinned entry among all entries if
// there are at most sampleSize, else among sampleSize random ones (drawn
// again, up to sampleRounds times, while all are pinned, then among all
// entries); nil when every entry is pinned.
func (c *cache) victim(now time.Time) *entry {
	var best *entry
	var bestW float64
	consider := func(e *entry) {
		if c.pins[e.host] > 0 {
			return
		}
		if w := e.weight(now); best == nil || w < bestW {
			best, bestW = e, w
		}
	}
	if len(c.list) > sampleSize {
		for range sampleRounds {
			for range sampleSize {
				consider(c.list[c.rng.IntN(len(c.list))])
			}
			if best != nil {
				return best
			}
		}
	}
	for _, e := range c.list {
		consider(e)
	}
	return best
}
