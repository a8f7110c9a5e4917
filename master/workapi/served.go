package workapi

import (
	"sync"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// servedLeases remembers the leases this server handed each slave, as
// the frontier leased them (its claim's answer), so that judging their
// completions needs no read of Redis: a completion of a lease found here
// is judged against it, any other against Frontier.HeldLeases. A lease
// found here may have been lost since (it expired, the slave was declared
// dead): that changes nothing, since what the judge lets through is
// applied only if the slave still holds the lease when the function
// complete runs, which it checks atomically. What it saves is a round trip
// to Redis per request, which a busy Redis answers only after the scripts
// queued before it.
//
// It is bounded: at most perSlave leases of a slave (the oldest forgotten
// first, an lru: they are read from Redis when completed) and at most
// total in all (beyond it, leases are not remembered).
type servedLeases struct {
	mu       sync.Mutex
	perSlave int
	total    int
	n        int // leases remembered, all slaves together
	slaves   map[string]*lru[servedKey, frontier.Lease]
}

// servedKey names a lease as a slave's completion names it.
type servedKey struct {
	shard int
	token int64
	url   string
}

// maxServedLeases bounds the leases remembered for all slaves together
// (a few hundred bytes each).
const maxServedLeases = 200000

// servedPerSlave is the most leases remembered for one slave: what it
// may hold on every shard, twice over for leases lost and never
// completed.
func servedPerSlave(opt Options) int {
	shards := 1
	if opt.Front != nil {
		shards = max(opt.Front.NumShards(), 1)
	}
	return 2 * max(opt.Limits.MaxInFlight, 256) * shards
}

func newServedLeases(perSlave, total int) *servedLeases {
	return &servedLeases{perSlave: max(perSlave, 1), total: max(total, 1), slaves: map[string]*lru[servedKey, frontier.Lease]{}}
}

// add remembers the leases served to slave.
func (c *servedLeases) add(slave string, leases []frontier.Lease) {
	if len(leases) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ls := c.slaves[slave]
	if ls == nil {
		ls = newLRU[servedKey, frontier.Lease](c.perSlave)
		c.slaves[slave] = ls
	}
	for _, l := range leases {
		before := ls.len()
		if before < c.perSlave && c.n >= c.total {
			return // a lease more, and none of this slave's to make room
		}
		ls.put(servedKey{l.Shard, l.Token, l.URL}, l)
		c.n += ls.len() - before
	}
}

// take returns the lease served to slave that ref names (its URL, token
// and shard) and forgets it: a lease is completed once.
func (c *servedLeases) take(slave string, ref frontier.Lease) (frontier.Lease, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ls := c.slaves[slave]
	if ls == nil {
		return frontier.Lease{}, false
	}
	k := servedKey{ref.Shard, ref.Token, ref.URL}
	l, ok := ls.get(k)
	if ok {
		ls.remove(k)
		c.n--
	}
	return l, ok
}

// forget drops what was served to slave (it left).
func (c *servedLeases) forget(slave string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ls := c.slaves[slave]; ls != nil {
		c.n -= ls.len()
		delete(c.slaves, slave)
	}
}
