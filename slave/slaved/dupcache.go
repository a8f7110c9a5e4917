package slaved

import (
	"sync"

	"github.com/redcrawl/redcrawl/shared/robots"
)

// dupCache remembers the content checksums of the last n bodies this slave
// fetched whose completions the frontier acknowledged, so a duplicate of
// one is not parsed again. The frontier holds the crawl-wide set and
// records every duplicate, whichever slave fetched the first copy; this
// cache only saves the extraction work. With each checksum it keeps the
// robots meta directives the body carried, which apply to a copy that is
// not parsed again.
//
// A body counts only once its page is acknowledged (acked): a completion
// that is lost (its lease expired in an outage, a failover lost its ack)
// leaves its page to be fetched again, and the copy fetched then must be
// parsed, or the links of the page are never sent. Until then its
// directives wait in pending, bounded by the slave's completions in
// flight (at most n; more are dropped, and only cost a parse).
type dupCache struct {
	mu      sync.Mutex
	set     map[uint64]robots.Directives
	ring    []uint64
	next    int
	pending map[uint64]robots.Directives
}

func newDupCache(n int) *dupCache {
	return &dupCache{set: make(map[uint64]robots.Directives, n), ring: make([]uint64, 0, n),
		pending: map[uint64]robots.Directives{}}
}

// seen reports whether a body with checksum sum was acknowledged before,
// with the directives noted for it.
func (d *dupCache) seen(sum uint64) (robots.Directives, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.set[sum]
	return r, ok
}

// parsed notes the robots meta directives of a body just parsed, until its
// completion is acknowledged (acked) or lost.
func (d *dupCache) parsed(sum uint64, r robots.Directives) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) < cap(d.ring) {
		d.pending[sum] = r
	}
}

// acked remembers sum, the body of a page the frontier acknowledged.
func (d *dupCache) acked(sum uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.pending[sum]
	delete(d.pending, sum)
	if _, ok := d.set[sum]; ok {
		return
	}
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, sum)
	} else {
		delete(d.set, d.ring[d.next])
		d.ring[d.next] = sum
		d.next = (d.next + 1) % len(d.ring)
	}
	d.set[sum] = r
}

// lost forgets the directives of a body whose completion was refused.
func (d *dupCache) lost(sum uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, sum)
}
