package slaved

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// hostGates start a slave's fetches of one host one at a time at first,
// and more at once as they finish: one more for every gateRamp done. The
// frontier may lease several pages of a host at once (politeness
// host_concurrency with no delay), and fetched together each would dial
// its own connection. A broad crawl's host has a few pages, and fetched
// one after another they share one kept-alive connection (a dial, with
// its goroutines and buffers, cost a broad slave more than a page's
// parsing); a host with many pages soon has as many fetches at once as the
// frontier leases. A lease waiting at its host's gate holds no worker, and
// waits at most a patience (twice the slave's average fetch): a slow page
// does not hold up its host's others. The frontier's host slots still
// bound what is in flight; the gate only starts them later.
type hostGates struct {
	mu sync.Mutex
	m  map[string]*hostGate
	// waiting counts the fetches waiting at any gate; onWait (when not
	// nil) is called when one starts to wait
	waiting atomic.Int64
	onWait  func()
}

// hostGate is one host's: its fetches running and waiting, and how many
// have finished.
type hostGate struct {
	running, waiting, done int
	wake                   chan struct{} // closed and replaced when a fetch ends while some wait
}

// gateRamp is how many fetches of a host finish for each one more that may
// run at once: a host of up to gateRamp pages is fetched over one
// connection.
const gateRamp = 4

func newHostGates(onWait func()) *hostGates {
	return &hostGates{m: map[string]*hostGate{}, onWait: onWait}
}

// enter waits until a fetch of host may start, or patience has passed
// (a slow page does not hold its host's others: they go on, on
// connections of their own), and returns the function that ends it.
// While it waits it counts in waiting (onWait is called when it starts).
// When ctx ends, enter returns at once: the fetch that follows meets the
// end itself.
func (g *hostGates) enter(ctx context.Context, host string, patience time.Duration) (leave func()) {
	g.mu.Lock()
	h := g.m[host]
	if h == nil {
		h = &hostGate{wake: make(chan struct{})}
		g.m[host] = h
	}
	var timeout <-chan time.Time
	for h.running >= 1+h.done/gateRamp && ctx.Err() == nil {
		if timeout == nil {
			t := time.NewTimer(patience)
			defer t.Stop()
			timeout = t.C
			g.waiting.Add(1)
			defer g.waiting.Add(-1)
			if g.onWait != nil {
				g.onWait()
			}
		}
		h.waiting++
		wake := h.wake
		g.mu.Unlock()
		impatient := false
		select {
		case <-wake:
		case <-ctx.Done():
		case <-timeout:
			impatient = true
		}
		g.mu.Lock()
		h.waiting--
		if impatient {
			break
		}
	}
	h.running++
	g.mu.Unlock()
	return func() { g.leave(host, h) }
}

func (g *hostGates) leave(host string, h *hostGate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h.running--
	h.done++
	if h.waiting > 0 {
		close(h.wake)
		h.wake = make(chan struct{})
	}
	if h.running == 0 && h.waiting == 0 && len(g.m) > maxGateHosts {
		// a host between two batches of leases keeps its ramp; past
		// maxGateHosts the hosts with nothing running go
		for k, o := range g.m {
			if o.running == 0 && o.waiting == 0 {
				delete(g.m, k)
			}
		}
	}
}

// maxGateHosts is how many hosts hostGates keeps before it forgets those
// with nothing running (their ramp starts again).
const maxGateHosts = 4096

// len returns the hosts it keeps.
func (g *hostGates) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}
