package slaved

import (
	"context"
	"sync"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/retry"
)

// acker sends completions to the frontier. Completions that arrive while a
// call is under way are batched into the next call, so under load many
// pages share one round trip. On a Redis outage it keeps them and retries;
// a completion whose lease was lost in the meantime is refused by the
// frontier and dropped here (the task was requeued and is fetched again).
type acker struct {
	s      *Slave
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []frontier.Completion
	closed bool
}

// maxAckBatch bounds one script call.
const maxAckBatch = 64

func newAcker(s *Slave) *acker {
	a := &acker{s: s}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *acker) add(c frontier.Completion) {
	a.mu.Lock()
	a.queue = append(a.queue, c)
	a.mu.Unlock()
	a.cond.Signal()
}

// close makes run return once the queue is empty.
func (a *acker) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cond.Signal()
}

func (a *acker) run(ctx context.Context) {
	fail := 0
	for {
		a.mu.Lock()
		for len(a.queue) == 0 && !a.closed {
			a.cond.Wait()
		}
		if len(a.queue) == 0 && a.closed {
			a.mu.Unlock()
			return
		}
		n := min(len(a.queue), maxAckBatch)
		batch := append([]frontier.Completion(nil), a.queue[:n]...)
		a.mu.Unlock()

		acked, err := a.s.front.Complete(ctx, a.s.id, batch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fail++
			a.s.rl.Log(ctx, levelWarn, "ack", "acknowledge failed; keeping completions", "pending", n, "err", err)
			retry.Sleep(ctx, retry.Backoff(fail))
			continue
		}
		if fail > 0 {
			a.s.log.Info("acknowledging again", "after_failures", fail)
			a.s.rl.Reset("ack")
			fail = 0
		}
		a.mu.Lock()
		a.queue = a.queue[n:]
		a.mu.Unlock()
		for i, c := range batch {
			a.s.track(c.Lease, false)
			if !acked[i] {
				a.s.lostAcks.Add(1)
				a.s.log.Debug("lease lost before ack", "url", c.Lease.URL)
			}
		}
	}
}
