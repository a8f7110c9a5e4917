package slaved

import (
	"context"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/retry"
)

// batcher sends items to Redis in batches from one goroutine: items added
// while a call is under way go into the next call, so under load many share
// one round trip. On a failed call it keeps the items and retries with
// backoff (a Redis outage is a pause). With a limit, the oldest items are
// dropped once that many wait, so a long outage cannot exhaust memory.
type batcher[T any] struct {
	s        *Slave
	key      string // rate-limited log key and operation name
	maxBatch int
	limit    int // 0: unbounded
	// gather, when positive, lets a small batch (under a quarter of
	// maxBatch) wait that long for more items before it is sent
	gather time.Duration
	// send delivers a batch; a nil error consumes all of it.
	send func(ctx context.Context, batch []T) error
	// onAdd, when set, runs after each add (outside the lock)
	onAdd func()
	// hold, when set, keeps a batch under maxBatch waiting past its
	// gather time while it returns true (another sender will take it:
	// take), up to holdMax after the last take
	hold    func() bool
	holdMax time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []T
	sending int // items at the front of queue being sent
	closed  bool
	dropped int64
	takes   uint64 // calls of take that took items
}

func newBatcher[T any](s *Slave, key string, maxBatch, limit int, send func(context.Context, []T) error) *batcher[T] {
	b := &batcher[T]{s: s, key: key, maxBatch: maxBatch, limit: limit, send: send}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *batcher[T]) add(x T) {
	b.mu.Lock()
	if b.limit > 0 && len(b.queue) >= b.limit && len(b.queue) > b.sending {
		// drop the oldest item not being sent
		b.queue = append(b.queue[:b.sending], b.queue[b.sending+1:]...)
		b.dropped++
	}
	b.queue = append(b.queue, x)
	b.mu.Unlock()
	b.cond.Signal()
	if b.onAdd != nil {
		b.onAdd()
	}
}

// take removes and returns up to max queued items that are not being
// sent, for a caller that sends them itself (the claim loop's
// CompleteClaim); it gives them back with putBack if that fails.
func (b *batcher[T]) take(max int) []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue)-b.sending, max)
	if n <= 0 {
		return nil
	}
	b.takes++
	out := append([]T(nil), b.queue[b.sending:b.sending+n]...)
	b.queue = append(b.queue[:b.sending], b.queue[b.sending+n:]...)
	return out
}

// putBack queues items a caller took and could not send.
func (b *batcher[T]) putBack(items []T) {
	if len(items) == 0 {
		return
	}
	b.mu.Lock()
	b.queue = append(b.queue, items...)
	b.mu.Unlock()
	b.cond.Signal()
}

func (b *batcher[T]) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// close makes run return once the queue is empty.
func (b *batcher[T]) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Signal()
}

// run sends until closed and empty, or until ctx ends (what is left is
// then not sent).
func (b *batcher[T]) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, b.close)
	defer stop()
	fail := 0
	for {
		b.mu.Lock()
		for len(b.queue) == 0 && !b.closed {
			b.cond.Wait()
		}
		if len(b.queue) == 0 || ctx.Err() != nil {
			b.mu.Unlock()
			return
		}
		// a small batch waits gather for more; a caller that took the
		// queue meanwhile (take) sent what had waited, so what is queued
		// now is younger and waits again, and an emptied queue sends
		// nothing (the claim loop would otherwise lose its acks to this
		// loop at every gather, and wake at each empty send). While hold
		// says another sender will take them, a batch of any size under
		// maxBatch waits, up to holdMax after the last take.
		waitStart, waited := time.Now(), false
		for b.gather > 0 && len(b.queue) > 0 && !b.closed && ctx.Err() == nil {
			holding := b.hold != nil && len(b.queue) < b.maxBatch && time.Since(waitStart) < b.holdMax && b.hold()
			if !holding && (waited || len(b.queue) >= b.maxBatch/4) {
				break
			}
			takes := b.takes
			b.mu.Unlock()
			retry.Sleep(ctx, b.gather)
			b.mu.Lock()
			waited = true
			if b.takes != takes {
				// what is queued came after the take
				waitStart, waited = time.Now(), false
			}
		}
		if len(b.queue) == 0 {
			b.mu.Unlock()
			continue
		}
		n := min(len(b.queue), b.maxBatch)
		batch := append([]T(nil), b.queue[:n]...)
		b.sending = n
		dropped := b.dropped
		b.dropped = 0
		b.mu.Unlock()
		if dropped > 0 {
			b.s.log.Warn(b.key+" queue full: oldest items dropped", "dropped", dropped)
		}
		err := b.send(ctx, batch)
		b.mu.Lock()
		b.sending = 0
		if err == nil {
			b.queue = b.queue[n:]
		}
		b.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fail++
			b.s.rl.Log(ctx, levelWarn, b.key, b.key+" failed; keeping the batch", "pending", n, "err", err)
			retry.Sleep(ctx, retry.Backoff(fail))
			continue
		}
		if fail > 0 {
			b.s.log.Info(b.key+" working again", "after_failures", fail)
			b.s.rl.Reset(b.key)
			fail = 0
		}
	}
}
