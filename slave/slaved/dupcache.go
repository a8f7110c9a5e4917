package slaved

import (
	"sync"

	"github.com/redcrawl/redcrawl/shared/robots"
)

// dupCache remembers the content checksums of the last n bodies this slave
// saw, so a duplicate it fetched itself is not parsed again. The frontier
// holds the crawl-wide set and records every duplicate, whichever slave
// fetched the first copy; this cache only saves the extraction work. With
// each checksum it keeps the robots meta directives the body carried, which
// apply to a copy that is not parsed again.
type dupCache struct {
	mu   sync.Mutex
	set  map[uint64]robots.Directives
	ring []uint64
	next int
}

func newDupCache(n int) *dupCache {
	return &dupCache{set: make(map[uint64]robots.Directives, n), ring: make([]uint64, 0, n)}
}

// seen reports whether sum was seen before, with the directives noted for
// it, and remembers it.
func (d *dupCache) seen(sum uint64) (robots.Directives, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.set[sum]; ok {
		return r, true
	}
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, sum)
	} else {
		delete(d.set, d.ring[d.next])
		d.ring[d.next] = sum
		d.next = (d.next + 1) % len(d.ring)
	}
	d.set[sum] = robots.Directives{}
	return robots.Directives{}, false
}

// note records the robots meta directives of the body with checksum sum,
// once it was parsed (a copy fetched meanwhile by another worker sees
// none: the frontier does not follow a duplicate's links either way).
func (d *dupCache) note(sum uint64, r robots.Directives) {
	if r.IsZero() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.set[sum]; ok {
		d.set[sum] = r
	}
}
