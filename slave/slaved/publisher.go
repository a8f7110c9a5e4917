package slaved

import (
	"context"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/session"
)

// publisher sends the events that belong to no task (proxy state changes)
// to the crawl's event stream, batched, and keeps them through a Redis
// outage. The queue is bounded: past maxPending the oldest are dropped and
// counted, so a long outage cannot exhaust memory.
type publisher struct {
	s       *Slave
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []frontier.Event
	closed  bool
	dropped int64
}

const maxPendingEvents = 10000

func newPublisher(s *Slave) *publisher {
	p := &publisher{s: s}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *publisher) add(ev frontier.Event) {
	p.mu.Lock()
	if len(p.queue) >= maxPendingEvents {
		p.queue = p.queue[1:]
		p.dropped++
	}
	p.queue = append(p.queue, ev)
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *publisher) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// close makes run return once the queue is empty.
func (p *publisher) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *publisher) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cond.Broadcast()
	})
	defer stop()
	fail := 0
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.queue) == 0 || ctx.Err() != nil {
			p.mu.Unlock()
			return
		}
		batch := append([]frontier.Event(nil), p.queue...)
		dropped := p.dropped
		p.mu.Unlock()
		if dropped > 0 {
			p.s.rl.Log(ctx, levelWarn, "events-dropped", "event queue full: oldest proxy events dropped", "dropped", dropped)
		}
		if err := p.s.front.Publish(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return
			}
			fail++
			p.s.rl.Log(ctx, levelWarn, "publish", "publish events failed; keeping them", "pending", len(batch), "err", err)
			retry.Sleep(ctx, retry.Backoff(fail))
			continue
		}
		fail = 0
		p.mu.Lock()
		// the queue may have been cut from the front while publishing
		n := min(len(batch), len(p.queue))
		p.queue = p.queue[n:]
		p.mu.Unlock()
	}
}

// proxyEvent records a session pool's proxy state change for MySQL
// proxy_events (the pool logs it).
func (s *Slave) proxyEvent(ev session.Event) {
	at := ev.At
	if at.IsZero() {
		at = time.Now()
	}
	rec := &events.Proxy{Crawl: s.cfg.Crawl.Name, Slave: s.id, Proxy: ev.Proxy, State: ev.State,
		Reason: ev.Reason, Errors: ev.Errors, Uses: ev.Uses, At: at.UnixMilli()}
	e, err := frontier.NewEvent(rec)
	if err != nil {
		s.log.Error("encode proxy event", "err", err)
		return
	}
	s.pub.add(e)
}
