package session

// The proxy and user agent lists: replacing them (from Options or the
// watched files) while proxies that stay keep their state.

import (
	"time"
)

// setProxiesLocked makes the route list want: new routes are added, routes
// not in it are removed, the others keep their state and sessions.
func (p *Pool) setProxiesLocked(want []proxySpec) error {
	now := p.now()
	old := map[string]*proxyEntry{}
	for _, px := range p.proxies {
		old[px.spec.key] = px
	}
	list := make([]*proxyEntry, 0, len(want))
	var added []*proxyEntry
	for _, sp := range want {
		if px, ok := old[sp.key]; ok {
			list = append(list, px)
			delete(old, sp.key)
			continue
		}
		t, err := p.newTransport(sp)
		if err != nil {
			for _, px := range added {
				px.transport.CloseIdleConnections()
			}
			return err
		}
		px := &proxyEntry{spec: sp, transport: t, state: StateUp}
		list = append(list, px)
		added = append(added, px)
	}
	for _, px := range added {
		px.sessions = make([]*Session, p.opt.PoolSize)
		for i := range px.sessions {
			px.sessions[i] = p.newSessionLocked(px, i)
		}
		p.eventLocked(px, StateAdded, "", now)
	}
	for _, px := range p.proxies {
		if _, gone := old[px.spec.key]; !gone {
			continue
		}
		px.removed = true
		px.state = StateRetired
		px.coolingUntil = time.Time{}
		for _, s := range px.sessions {
			s.retired = true
		}
		px.transport.CloseIdleConnections()
		p.eventLocked(px, StateRemoved, "no longer listed", now)
	}
	p.proxies = list
	if len(list) > 0 {
		p.rr %= len(list)
	}
	p.recomputeExpiryLocked()
	if len(added) > 0 {
		p.broadcastLocked()
	}
	return nil
}

// setUserAgentsLocked installs a new user agent list and retires the
// sessions whose user agent is no longer in it.
func (p *Pool) setUserAgentsLocked(uas []string) {
	p.uas = uas
	in := map[string]bool{}
	for _, ua := range uas {
		in[ua] = true
	}
	for _, px := range p.proxies {
		for _, s := range px.sessions {
			if !in[s.ua] {
				p.retireSessionLocked(s)
			}
		}
	}
}

// broadcastLocked wakes every waiting Acquire.
func (p *Pool) broadcastLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Proxies is the state of every route in the pool, in list order.
func (p *Pool) Proxies() []ProxyStatus {
	p.mu.Lock()
	p.expireLocked(p.now())
	out := make([]ProxyStatus, 0, len(p.proxies))
	for _, px := range p.proxies {
		out = append(out, ProxyStatus{URL: px.spec.display, State: px.state, Errors: px.errors, Uses: px.uses, CoolingUntil: px.coolingUntil})
	}
	p.mu.Unlock()
	p.flush()
	return out
}
