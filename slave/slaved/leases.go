package slaved

// The leases a slave holds: tracked while their fetches run, and extended
// before they expire.

import (
	"context"
	"net/url"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// heldLease is a lease in flight and when this slave got it, by its own
// monotonic clock: the lease's LeasedAt is Redis's clock, from which the
// slave's may be minutes off.
type heldLease struct {
	frontier.Lease
	got time.Time
}

func (s *Slave) track(l frontier.Lease, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.leases[l.URL]
	if add {
		s.leases[l.URL] = heldLease{Lease: l, got: time.Now()}
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

// extender pushes the deadlines of leases held for more than a third of
// the lease duration, so long fetches are not taken back. How long a lease
// has been held is the slave's own measure since it got it, never its
// wall clock against the lease's time, which is Redis's.
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
			if time.Since(l.got) > every {
				old = append(old, l.Lease)
			}
		}
		if len(old) == 0 {
			continue
		}
		held, err := s.front.Extend(ctx, s.id, old)
		if err != nil {
			s.rl.Log(ctx, levelWarn, "extend", "extend leases", "err", err)
			continue
		}
		for i, ok := range held {
			if !ok {
				s.log.Debug("lease lost while fetching", "url", old[i].URL)
			}
		}
	}
}
