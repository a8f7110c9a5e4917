package session

// Acquire: which session carries a request (a host's sticky session, else
// the next proxy round-robin and its least recently used session), and
// waiting while every proxy is down.

import (
	"context"
	"net/http/cookiejar"
	"strconv"
	"time"

	"golang.org/x/net/publicsuffix"
)

type stickyEntry struct {
	s    *Session
	left int
}

// maxSticky bounds the host → session map; past it, entries are dropped.
const maxSticky = 1 << 16

// Acquire returns a session for a request to host: the host's sticky
// session while it has requests left and its proxy is up, otherwise the
// least recently used session of the next usable proxy, round-robin. When
// no proxy is usable it waits until one is, or returns ctx.Err().
func (p *Pool) Acquire(ctx context.Context, host string) (*Session, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.expireLocked(p.now())
		s := p.pickLocked(host)
		if s != nil {
			back := p.downLogged
			p.downLogged = false
			p.mu.Unlock()
			p.flush()
			if back {
				p.log.Info("a proxy is usable again", "proxy", s.px.spec.display)
			}
			return s, nil
		}
		first := !p.downLogged
		p.downLogged = true
		wake, next := p.wake, p.nextExpiry
		p.waiting++
		var cooling, retired int
		for _, px := range p.proxies {
			if px.state == StateCooling {
				cooling++
			} else {
				retired++
			}
		}
		p.mu.Unlock()
		p.flush()
		if first {
			p.log.Warn("all proxies down, waiting", "cooling", cooling, "retired", retired, "next_up", next)
		}
		d := maxWait
		if !next.IsZero() {
			d = min(max(next.Sub(p.now()), minWait), maxWait)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
	}
}

// pickLocked chooses and uses a session, or returns nil if no route is up.
func (p *Pool) pickLocked(host string) *Session {
	sticky := p.opt.StickyRequests > 0 && host != ""
	if sticky {
		if e, ok := p.sticky[host]; ok {
			if e.left > 0 && !e.s.retired && e.s.px.state == StateUp {
				e.left--
				if e.left == 0 {
					delete(p.sticky, host)
				}
				p.useLocked(e.s)
				return e.s
			}
			delete(p.sticky, host)
		}
	}
	n := len(p.proxies)
	for i := range n {
		idx := (p.rr + i) % n
		px := p.proxies[idx]
		if px.state != StateUp {
			continue
		}
		p.rr = (idx + 1) % n
		s := px.sessions[0]
		for _, c := range px.sessions[1:] {
			if c.lastUsed < s.lastUsed {
				s = c
			}
		}
		p.useLocked(s)
		if sticky && p.opt.StickyRequests > 1 {
			if len(p.sticky) >= maxSticky {
				p.trimStickyLocked()
			}
			p.sticky[host] = &stickyEntry{s: s, left: p.opt.StickyRequests - 1}
		}
		return s
	}
	return nil
}

// trimStickyLocked drops a quarter of the sticky map (Go's map order is
// unspecified, so which ones is arbitrary), dead sessions first.
func (p *Pool) trimStickyLocked() {
	for h, e := range p.sticky {
		if e.s.retired || e.s.px.state != StateUp {
			delete(p.sticky, h)
		}
	}
	for h := range p.sticky {
		if len(p.sticky) <= maxSticky*3/4 {
			break
		}
		delete(p.sticky, h)
	}
}

// useLocked counts one use of s; at MaxUses the session is retired (the
// request at hand still goes through it) and replaced.
func (p *Pool) useLocked(s *Session) {
	p.useSeq++
	s.lastUsed = p.useSeq
	s.uses++
	s.px.uses++
	if p.opt.MaxUses > 0 && s.uses >= p.opt.MaxUses {
		p.retireSessionLocked(s)
	}
}

// newSessionLocked makes a fresh session for slot i of px.
func (p *Pool) newSessionLocked(px *proxyEntry, i int) *Session {
	p.nextID++
	s := &Session{id: "s" + strconv.FormatUint(p.nextID, 10), pool: p, px: px, slot: i}
	if len(p.uas) > 0 {
		s.ua = p.uas[p.uaNext%len(p.uas)]
		p.uaNext++
	}
	if p.opt.Cookies {
		jar, err := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
		if err == nil { // cookiejar.New never fails
			s.jar = jar
		}
	}
	s.rt = &roundTripper{s: s}
	return s
}

// retireSessionLocked retires s and puts a fresh session in its place if
// its proxy is still in service.
func (p *Pool) retireSessionLocked(s *Session) {
	if s.retired {
		return
	}
	s.retired = true
	px := s.px
	if px.state != StateRetired && s.slot < len(px.sessions) && px.sessions[s.slot] == s {
		px.sessions[s.slot] = p.newSessionLocked(px, s.slot)
	}
}
