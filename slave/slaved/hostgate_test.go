package slaved

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHostGatesRamp: a host's fetches start one at a time, one more for
// every gateRamp finished; other hosts do not wait for it.
func TestHostGatesRamp(t *testing.T) {
	g := newHostGates(nil)
	ctx := context.Background()
	var running, peak atomic.Int64
	fetch := func(host string) {
		leave := g.enter(ctx, host, time.Minute)
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		leave()
	}
	var wg sync.WaitGroup
	for range gateRamp {
		wg.Add(1)
		go func() { defer wg.Done(); fetch("a.test") }()
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Errorf("the first %d fetches of a host ran %d at once, want 1", gateRamp, p)
	}
	// after gateRamp done, two at once
	peak.Store(0)
	block := g.enter(ctx, "a.test", time.Minute)
	second := make(chan struct{})
	go func() { leave := g.enter(ctx, "a.test", time.Minute); close(second); leave() }()
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("the second fetch waited after the ramp allowed two")
	}
	// another host is not held
	other := make(chan struct{})
	go func() { leave := g.enter(ctx, "b.test", time.Minute); close(other); leave() }()
	select {
	case <-other:
	case <-time.After(5 * time.Second):
		t.Fatal("another host's fetch waited")
	}
	block()
}

// TestHostGatesPatience: a fetch behind a slow one of its host starts
// after the patience; onWait is called once, when it starts to wait; a fetch
// whose context ends stops waiting.
func TestHostGatesPatience(t *testing.T) {
	waits := 0
	g := newHostGates(func() { waits++ })
	slow := g.enter(context.Background(), "a.test", time.Minute)
	defer slow()
	start := time.Now()
	leave := g.enter(context.Background(), "a.test", 50*time.Millisecond)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("started after %v, before the patience", d)
	}
	if waits != 1 {
		t.Errorf("onWait called %d times, want 1", waits)
	}
	if n := g.waiting.Load(); n != 0 {
		t.Errorf("%d counted waiting after the wait", n)
	}
	leave()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l := g.enter(ctx, "a.test", time.Minute); l(); close(done) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch whose context ended still waits")
	}
}

// TestHostGatesForget: past maxGateHosts, hosts with nothing running are
// forgotten; a host with a fetch running is kept.
func TestHostGatesForget(t *testing.T) {
	g := newHostGates(nil)
	ctx := context.Background()
	busy := g.enter(ctx, "busy.test", time.Minute)
	for i := range maxGateHosts + 1 {
		g.enter(ctx, "h"+strconv.Itoa(i)+".test", time.Minute)()
	}
	if n := g.len(); n > maxGateHosts+1 || n < 1 {
		t.Errorf("%d hosts kept, want at most %d", n, maxGateHosts+1)
	}
	g.mu.Lock()
	_, kept := g.m["busy.test"]
	g.mu.Unlock()
	if !kept {
		t.Error("the host with a fetch running was forgotten")
	}
	busy()
}
