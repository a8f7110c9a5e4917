package frontier

import (
	"math/bits"
	"sync/atomic"
)

// linkCache remembers, in this process, the fingerprints of links that
// completions it sent have already put through the seen set, and of the
// URLs it leased (every function that queues a task puts its URL through
// the seen set first: seed, reseed, the links of a completion), so a link
// found again is not sent to Redis again (with bfs and dfs a seen link
// changes nothing there). The leased URLs matter most when many slaves
// share a crawl: a host's pages are leased together, and their links to
// each other, which another slave sent, are then known to the slave that
// fetches them. It is direct-mapped: a fingerprint's slot is its
// low bits and a newer one overwrites it, so memory is fixed (8 bytes a
// slot) and a miss only costs the script's usual check. Lock-free: acks
// may run in several goroutines.
//
// A link is added only after the completion that carried it was acked and
// its links were followed (not a lost lease, not duplicate content), so
// every link the cache skips is in the seen set (or was dropped by a trap
// cap or the seeds' scope, which only ever drop more).
type linkCache struct {
	slots []atomic.Uint64
	mask  uint64
}

// newLinkCache returns a cache of at least n slots (a power of two), nil
// for n <= 0.
func newLinkCache(n int) *linkCache {
	if n <= 0 {
		return nil
	}
	size := 1 << bits.Len(uint(n-1))
	return &linkCache{slots: make([]atomic.Uint64, size), mask: uint64(size - 1)}
}

// key maps a fingerprint to a stored value; 0 marks an empty slot.
func key(fp uint64) uint64 {
	if fp == 0 {
		return 1
	}
	return fp
}

// has reports whether fp was added and not overwritten since.
func (c *linkCache) has(fp uint64) bool {
	return c != nil && c.slots[fp&c.mask].Load() == key(fp)
}

// add remembers fp.
func (c *linkCache) add(fp uint64) {
	if c != nil {
		c.slots[fp&c.mask].Store(key(fp))
	}
}
