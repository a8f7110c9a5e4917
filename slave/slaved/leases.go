package slaved

// The leases a slave holds: tracked while their fetches run, and extended
// before they expire.

import (
	"context"
	"net/url"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// heldLease is a lease in flight, when the claim that gave it was sent
// and until when it is surely this slave's, by its own monotonic clock: a
// lease duration after the claim or the extension that gave it was sent
// (zero once an extension found it taken back). The lease's LeasedAt and
// Deadline are Redis's clock, from which the slave's may be minutes off.
type heldLease struct {
	frontier.Lease
	asked, until time.Time
}

// track adds a lease the claim sent at asked returned (add), or forgets
// one.
func (s *Slave) track(l frontier.Lease, asked time.Time, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.leases[l.URL]
	if add {
		s.leases[l.URL] = heldLease{Lease: l, asked: asked, until: asked.Add(s.cfg.Lease.Duration)}
	} else {
		delete(s.leases, l.URL)
	}
	if s.dns != nil && had != add {
		// the host's DNS entry stays cached while the slave holds one
		// of its leases (dnscache: pinning)
		if host := leaseHost(l); host != "" {
			if add {
				s.dns.Pin(host)
			} else {
				s.dns.Unpin(host)
			}
		}
	}
	s.met.SetInFlight(len(s.leases))
}

// leaseHost is the host name of a lease's URL, without its port.
func leaseHost(l frontier.Lease) string {
	if l.ScopeHost != "" {
		return l.ScopeHost
	}
	if u, err := url.Parse(l.URL); err == nil {
		return u.Hostname()
	}
	return ""
}

func (s *Slave) inFlight() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.leases))
}

func (s *Slave) held() []heldLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]heldLease, 0, len(s.leases))
	for _, l := range s.leases {
		out = append(out, l)
	}
	return out
}

// extender pushes the deadlines of leases claimed or extended more than a
// third of the lease duration ago, so long fetches are not taken back.
// How long ago is the slave's own measure, never its wall clock against
// the lease's time, which is Redis's.
func (s *Slave) extender(ctx context.Context) {
	every := s.cfg.Lease.Duration / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var old []frontier.Lease
		for _, l := range s.held() {
			if time.Until(l.until) < s.cfg.Lease.Duration-every {
				old = append(old, l.Lease)
			}
		}
		if len(old) == 0 {
			continue
		}
		asked := time.Now()
		held, err := s.front.Extend(ctx, s.id, old)
		if err != nil {
			s.rl.Log(ctx, levelWarn, "extend", "extend leases", "err", err)
			continue
		}
		s.mu.Lock()
		for i, ok := range held {
			h, tracked := s.leases[old[i].URL]
			if !tracked || h.Token != old[i].Token {
				continue
			}
			if ok {
				h.until = asked.Add(s.cfg.Lease.Duration)
			} else {
				// taken back: not fetched from now on (mayFetch)
				s.log.Debug("lease lost while fetching", "url", old[i].URL)
				h.until = time.Time{}
			}
			s.leases[old[i].URL] = h
		}
		s.mu.Unlock()
	}
}

// mayFetch reports whether a request for lease l may start now: the
// master cannot have taken it back yet, by the slave's own (monotonic)
// clock. The master takes a lease back when its deadline passes, and all
// of a slave's when its heartbeats stop for master.dead_after; a slave
// that was frozen (a pause, a swap storm, SIGSTOP) or cut off from Redis
// or the work API for that long must not fetch what another slave may
// fetch now, as that would break the host's politeness delay. So a lease
// is fetched only while a quarter of its duration is left, the last
// heartbeat that went through was sent less than three quarters of
// master.dead_after ago, and no heartbeat came through after a silence
// that long since the lease's claim was sent (beatWent): heartbeats that
// resume after the master declared the slave dead do not make the leases
// it took back fetchable again. A lease an extension found taken back is
// never fetched. A lease the slave does not track (FetchOne, Parse) may
// always be fetched.
func (s *Slave) mayFetch(l frontier.Lease) bool {
	s.mu.Lock()
	h, ok := s.leases[l.URL]
	s.mu.Unlock()
	if !ok || h.Token != l.Token {
		return true
	}
	now := time.Now()
	if h.until.Sub(now) < s.cfg.Lease.Duration/4 {
		return false
	}
	if resumed := s.beatResumed.Load(); resumed != nil && !h.asked.After(*resumed) {
		return false
	}
	beat := s.beatSent.Load()
	return beat == nil || now.Sub(*beat) < s.deadSoon()
}

// deadSoon is the silence after which the master may take the slave for
// dead, with a quarter of master.dead_after to spare for the time a
// request takes on its way.
func (s *Slave) deadSoon() time.Duration { return s.cfg.Master.DeadAfter * 3 / 4 }
