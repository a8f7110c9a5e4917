package workapi

import (
	"sync"
	"time"
)

// beats remembers, for each slave of the API, when its last heartbeat
// was answered and whether that answer said the crawl is finished: a
// master that exits when done (bin/master run --exit-when-done) stays
// until every slave still beating has been told (Server.Untold), since a
// slave of the API learns it only from a heartbeat's answer. A slave is
// forgotten when it leaves; at most maxCachedTokens are kept (an lru:
// the slaves silent longest go first).
type beats struct {
	mu sync.Mutex
	m  *lru[string, beat]
}

type beat struct {
	at   time.Time
	told bool
}

func (b *beats) record(slave string, at time.Time, finished bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = newLRU[string, beat](maxCachedTokens)
	}
	b.m.put(slave, beat{at: at, told: finished})
}

func (b *beats) forget(slave string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m != nil {
		b.m.remove(slave)
	}
}

// untold counts the slaves that beat after since and were not told the
// crawl is finished at their last beat.
func (b *beats) untold(since time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	if b.m != nil {
		b.m.each(func(_ string, v beat) {
			if v.at.After(since) && !v.told {
				n++
			}
		})
	}
	return n
}

// Untold counts the slaves of the API that sent a heartbeat within the
// last within (master.dead_after: the others are dead) and were not
// answered, at their last one, that the crawl is finished.
func (s *Server) Untold(within time.Duration) int {
	return s.beats.untold(time.Now().Add(-within))
}
