package slaved

import (
	"net/http"
	"sync"
	"time"
)

// throttle adapts each host's politeness delay to the latency the slave
// observes (the algorithm of Scrapy's AutoThrottle): the target delay is
// latency / target (the number of requests the host should have in flight
// on average); the new delay moves halfway from the old one towards it,
// never below it, clamped between the configured delay and the cap. An
// error or redirect (small, fast pages) may raise the delay but never
// lowers it.
//
// The delay is sent with the completion and stored in the frontier's
// per-host delay, so it binds every slave; each slave keeps its own
// estimate, and the last completion's estimate wins.
type throttle struct {
	min, max time.Duration
	target   float64

	mu    sync.Mutex
	delay map[string]time.Duration
	// order bounds memory: the oldest hosts are forgotten first (a
	// forgotten host restarts from the configured delay).
	order []string
	limit int
}

func newThrottle(min, max time.Duration, target float64) *throttle {
	return &throttle{min: min, max: max, target: target, delay: map[string]time.Duration{}, limit: 50000}
}

// observe records one response's latency and returns the host's new delay.
func (t *throttle) observe(host string, latency time.Duration, status int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.delay[host]
	if !ok {
		old = t.min
		if len(t.order) >= t.limit {
			delete(t.delay, t.order[0])
			t.order = t.order[1:]
		}
		t.order = append(t.order, host)
	}
	targetDelay := time.Duration(float64(latency) / t.target)
	d := max(targetDelay, (old+targetDelay)/2)
	d = min(max(d, t.min), t.max)
	if status != http.StatusOK && d < old {
		d = old
	}
	t.delay[host] = d
	return d
}
