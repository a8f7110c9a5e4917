package session

// Report: what a response says about its session and proxy (ban, error,
// success), cooldowns that double, and retirement.

import (
	"fmt"
	"strconv"
	"time"
)

// Result is what a request through a session gave, for Pool.Report.
type Result struct {
	// Status is the HTTP status, 0 if there was no response.
	Status int
	// Err is the transport error, if any: any non-nil value counts as a
	// connection failure against the session and its proxy. A Result
	// with neither Status nor Err is neutral (use it for failures that
	// are not the route's fault, such as a refused target address).
	Err error
	// Body is a prefix of the body (may be nil), for BanBodyPattern.
	Body []byte
}

// Verdict is the pool's reading of a Result.
type Verdict struct {
	// Banned: the response is a ban (status or body), not the page; the
	// request should be retried, through another session.
	Banned bool
	// Reason explains an error or a ban; "" for a success.
	Reason string
}

// expire ends the cooldowns that are over.
func (p *Pool) expire() {
	p.mu.Lock()
	p.expireLocked(p.now())
	p.mu.Unlock()
	p.flush()
}

func (p *Pool) expireLocked(now time.Time) {
	if p.nextExpiry.IsZero() || now.Before(p.nextExpiry) {
		return
	}
	woke := false
	for _, px := range p.proxies {
		if px.state == StateCooling && !now.Before(px.coolingUntil) {
			px.state = StateUp
			px.coolingUntil = time.Time{}
			woke = true
			p.eventLocked(px, StateUp, "cooldown over", now)
		}
	}
	p.recomputeExpiryLocked()
	if woke {
		p.broadcastLocked()
	}
}

func (p *Pool) recomputeExpiryLocked() {
	p.nextExpiry = time.Time{}
	for _, px := range p.proxies {
		if px.state == StateCooling && (p.nextExpiry.IsZero() || px.coolingUntil.Before(p.nextExpiry)) {
			p.nextExpiry = px.coolingUntil
		}
	}
}

// Report tells the pool how a request through s went and returns its
// reading: a transport error, a ban status or a body matching the ban
// pattern is an error against the session and its proxy; a response with
// any other status is a success and resets their consecutive error
// counts. See the package documentation for what follows an error.
func (p *Pool) Report(s *Session, r Result) Verdict {
	if s == nil || s.pool != p {
		return Verdict{}
	}
	var v Verdict
	switch {
	case r.Err != nil:
		v.Reason = "connection error: " + s.px.spec.scrub(r.Err.Error())
	case p.banStatus[r.Status]:
		v.Banned, v.Reason = true, "ban status "+strconv.Itoa(r.Status)
	case p.banRE != nil && r.Body != nil && p.banRE.Match(r.Body[:min(len(r.Body), BodyPrefix)]):
		v.Banned, v.Reason = true, "body matches the ban pattern"
	}
	if r.Err == nil && r.Status == 0 {
		return v // neutral
	}
	p.mu.Lock()
	px := s.px
	if v.Reason == "" {
		s.errors = 0
		if px.state == StateUp {
			px.errors = 0
		}
		p.mu.Unlock()
		return v
	}
	s.errors++
	if v.Banned || s.errors >= p.opt.MaxErrors {
		p.retireSessionLocked(s)
	}
	kick := false
	if px.state == StateUp {
		now := p.now()
		px.errors++
		if px.errors >= p.opt.MaxErrors {
			p.retireProxyLocked(px, fmt.Sprintf("%d consecutive errors, last: %s", px.errors, v.Reason), now)
		} else {
			d := p.opt.CooldownBase
			for i := 1; i < px.errors && d < p.opt.CooldownMax; i++ {
				d *= 2
			}
			px.state = StateCooling
			px.coolingUntil = now.Add(min(d, p.opt.CooldownMax))
			if p.nextExpiry.IsZero() || px.coolingUntil.Before(p.nextExpiry) {
				p.nextExpiry = px.coolingUntil
				kick = true
			}
			p.eventLocked(px, StateCooling, v.Reason, now)
		}
	}
	p.mu.Unlock()
	if kick {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	p.flush()
	return v
}

func (p *Pool) retireProxyLocked(px *proxyEntry, reason string, now time.Time) {
	px.state = StateRetired
	px.coolingUntil = time.Time{}
	for _, s := range px.sessions {
		s.retired = true
	}
	px.transport.CloseIdleConnections()
	p.recomputeExpiryLocked()
	p.eventLocked(px, StateRetired, reason, now)
}

// RetireProxy retires the proxy with this URL (as shown in ProxyStatus, or
// the full URL) for good, an admin action. It reports whether a proxy in
// service was retired. A proxy listed in ProxyFile comes back only if it
// leaves the file and is added again.
func (p *Pool) RetireProxy(proxy string) bool {
	key := proxy
	if sp, err := parseProxy(proxy); err == nil {
		key = sp.key
	}
	p.mu.Lock()
	done := false
	now := p.now()
	for _, px := range p.proxies {
		if px.state != StateRetired && (px.spec.display == proxy || px.spec.key == key) {
			p.retireProxyLocked(px, "retired by an admin", now)
			done = true
		}
	}
	p.mu.Unlock()
	p.flush()
	return done
}
