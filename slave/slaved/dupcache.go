package slaved

import "sync"

// dupCache remembers the content checksums of the last n bodies this slave
// saw, so a duplicate it fetched itself is not parsed again. The frontier
// holds the crawl-wide set and records every duplicate, whichever slave
// fetched the first copy; this cache only saves the extraction work.
type dupCache struct {
	mu   sync.Mutex
	set  map[uint64]struct{}
	ring []uint64
	next int
}

func newDupCache(n int) *dupCache {
	return &dupCache{set: make(map[uint64]struct{}, n), ring: make([]uint64, 0, n)}
}

// seen reports whether sum was seen before, and remembers it.
func (d *dupCache) seen(sum uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.set[sum]; ok {
		return true
	}
	if len(d.ring) < cap(d.ring) {
		d.ring = append(d.ring, sum)
	} else {
		delete(d.set, d.ring[d.next])
		d.ring[d.next] = sum
		d.next = (d.next + 1) % len(d.ring)
	}
	d.set[sum] = struct{}{}
	return false
}
