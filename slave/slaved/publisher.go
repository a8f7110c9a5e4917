package slaved

import (
	"context"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/session"
)

// maxPendingEvents bounds the proxy events kept through a Redis outage.
const maxPendingEvents = 10000

// newPublisher returns the batcher that sends the events that belong to no
// task (proxy state changes) to the crawl's event stream.
func newPublisher(s *Slave) *batcher[frontier.Event] {
	return newBatcher(s, "publish events", 500, maxPendingEvents, func(ctx context.Context, batch []frontier.Event) error {
		return s.front.Publish(ctx, batch)
	})
}

// proxyEvent records a session pool's proxy state change for MySQL
// proxy_events (the pool logs it).
func (s *Slave) proxyEvent(ev session.Event) {
	at := ev.At
	if at.IsZero() {
		at = s.now()
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
