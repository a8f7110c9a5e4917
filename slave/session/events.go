package session

// Proxy events and status: queued under the mutex, delivered to
// Options.OnEvent after it is released.

import (
	"context"
	"log/slog"
	"time"
)

// Event is a proxy state change.
type Event struct {
	Proxy  string    `json:"proxy"` // redacted URL or "direct"
	State  string    `json:"state"` // added, up, cooling, retired, removed
	Reason string    `json:"reason,omitempty"`
	Errors int       `json:"errors"` // consecutive errors
	Uses   int       `json:"uses"`
	At     time.Time `json:"at"`
}

// ProxyStatus is one proxy in Pool.Proxies.
type ProxyStatus struct {
	URL          string    `json:"url"`   // redacted URL or "direct"
	State        string    `json:"state"` // up, cooling, retired
	Errors       int       `json:"errors"`
	Uses         int       `json:"uses"`
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
}

// eventLocked queues an event for OnEvent and the log.
func (p *Pool) eventLocked(px *proxyEntry, state, reason string, now time.Time) {
	p.pending = append(p.pending, Event{Proxy: px.spec.display, State: state, Reason: reason, Errors: px.errors, Uses: px.uses, At: now})
}

// flush delivers the queued events, outside the lock, in order, one at a
// time: if another goroutine is delivering, it delivers ours too.
func (p *Pool) flush() {
	p.mu.Lock()
	if p.delivering || len(p.pending) == 0 {
		p.mu.Unlock()
		return
	}
	p.delivering = true
	p.mu.Unlock()
	defer func() { // even if OnEvent panics
		p.mu.Lock()
		p.delivering = false
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		evs := p.pending
		p.pending = nil
		if len(evs) == 0 {
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		for _, e := range evs {
			p.deliver(e)
		}
	}
}

func (p *Pool) deliver(e Event) {
	ctx := context.Background()
	switch e.State {
	case StateCooling:
		p.rlog.Log(ctx, slog.LevelInfo, "cooling:"+e.Proxy, "proxy cooling down", "proxy", e.Proxy, "reason", e.Reason, "errors", e.Errors)
	case StateRetired:
		p.log.Warn("proxy retired", "proxy", e.Proxy, "reason", e.Reason, "errors", e.Errors, "uses", e.Uses)
	case StateRemoved:
		p.log.Info("proxy removed", "proxy", e.Proxy, "reason", e.Reason, "uses", e.Uses)
	case StateAdded:
		p.log.Info("proxy added", "proxy", e.Proxy)
	default:
		p.log.Debug("proxy state", "proxy", e.Proxy, "state", e.State, "reason", e.Reason)
	}
	if p.opt.OnEvent != nil {
		p.opt.OnEvent(e)
	}
}
