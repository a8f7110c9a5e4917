package memlimit

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/config"
)

func TestWant(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		base        int64
		live, other uint64
		broad       bool
		want        int64
	}{
		{"a few hosts: the base", 28 * mib, 10 * mib, 10 * mib, false, 28 * mib},
		{"live and room at the base: the base", 28 * mib, 11 * mib, 10 * mib, false, 28 * mib},
		{"past the base: a quarter of the base as room", 28 * mib, 12 * mib, 10 * mib, false, 29 * mib},
		{"past half the base: the room grows four times as fast", 28 * mib, 16 * mib, 10 * mib, false, 41 * mib},
		{"a broad crawl's start: on the way to twice the live heap", 28 * mib, 22 * mib, 12 * mib, false, 73 * mib},
		{"a broad crawl: twice the live heap as room", 28 * mib, 40 * mib, 12 * mib, false, 132 * mib},
		{"many hosts, a small heap: still the base", 28 * mib, 6 * mib, 10 * mib, true, 28 * mib},
		{"many hosts past the base: twice the live heap as room, not a quarter of the base", 28 * mib, 12 * mib, 10 * mib, true, 46 * mib},
		{"many hosts past half the base: twice the live heap, not the ramp", 28 * mib, 16 * mib, 10 * mib, true, 58 * mib},
		{"many hosts, a broad crawl's heap: twice the live heap, as without", 28 * mib, 40 * mib, 12 * mib, true, 132 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Want(tc.base, tc.live, tc.other, tc.broad); got != tc.want {
				t.Errorf("Want(%d, %d, %d, %v) = %d, want %d", tc.base, tc.live, tc.other, tc.broad, got, tc.want)
			}
		})
	}
}

// TestFollow: the limit follows the live heap up and back down to the
// base, is set again only when it changes, and Follow returns with its
// context.
func TestFollow(t *testing.T) {
	defer goleak.VerifyNone(t)
	lives := []uint64{10, 40, 40, 60, 10, 10} // the live heap read by read
	ctx, cancel := context.WithCancel(context.Background())
	next := steps(len(lives)-1, cancel)
	set := runFollow(t, ctx, 20, Options{Read: func() (uint64, uint64) { return lives[next()], 0 }})
	// base 20 (room 5, or twice the live heap past 40): 10 -> 20,
	// 40 -> 120, 40 (same), 60 -> 180, 10 -> 20, 10 (same)
	if d := cmp.Diff([]int64{20, 120, 180, 20}, set); d != "" {
		t.Errorf("limits set (-want +got):\n%s", d)
	}
}

// TestFollowHosts: the limit takes the broad room while the slave knows
// BroadHosts hosts or more, and gives it back when it knows fewer.
func TestFollowHosts(t *testing.T) {
	defer goleak.VerifyNone(t)
	hosts := []int{10, BroadHosts, BroadHosts, BroadHosts - 1} // read with each live heap
	ctx, cancel := context.WithCancel(context.Background())
	next := steps(len(hosts)-1, cancel)
	// live 8, other 10, under half the base 20: room 5, or 16 with many hosts
	set := runFollow(t, ctx, 20, Options{Read: func() (uint64, uint64) { return 8, 10 },
		Hosts: func() int { return hosts[next()] }})
	if d := cmp.Diff([]int64{23, 34, 23}, set); d != "" {
		t.Errorf("limits set (-want +got):\n%s", d)
	}
}

// steps returns the index of each of its calls, from 0 up to last, and
// cancels at the call of index last: the test's last read stops Follow
// after it.
func steps(last int, cancel context.CancelFunc) func() int {
	var mu sync.Mutex
	n := 0
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		if n == last {
			cancel()
		}
		i := min(n, last)
		n++
		return i
	}
}

// runFollow runs Follow(ctx, base, opt) every millisecond until ctx ends
// (the test's reads cancel it) and returns the limits it set.
func runFollow(t *testing.T, ctx context.Context, base int64, opt Options) []int64 {
	t.Helper()
	var mu sync.Mutex
	var set []int64
	opt.Every = time.Millisecond
	opt.Set = func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		set = append(set, n)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Follow(ctx, base, opt)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	return set
}

func TestReadMemory(t *testing.T) {
	runtime.GC() // live is measured by a collection
	live, other := readMemory()
	if live == 0 || other == 0 {
		t.Errorf("readMemory() = %d live, %d other: the runtime's metrics not read", live, other)
	}
}

// TestApplyGCPercent: the automatic limit sets the collector's pace to
// GCPercent; GOGC in the environment, a limit of the config's or none
// leave Go's own (100 here).
func TestApplyGCPercent(t *testing.T) {
	// the limit is reset after goleak has seen every Follow return, so
	// that none sets it again behind the reset
	defer debug.SetMemoryLimit(math.MaxInt64)
	defer goleak.VerifyNone(t)
	tests := []struct {
		name  string
		limit int64
		gogc  string
		want  int
	}{
		{"automatic", 0, "", GCPercent},
		{"automatic, GOGC set", 0, "150", 100},
		{"a limit of the config's", 48 << 20, "", 100},
		{"none", -1, "", 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv("GOGC", tc.gogc)
			debug.SetGCPercent(100)
			defer debug.SetGCPercent(100)
			cfg := config.Default()
			cfg.Slave.MemoryLimit = tc.limit
			ctx, cancel := context.WithCancel(context.Background())
			Apply(ctx, &cfg, nil)
			cancel()
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("GC percent after Apply = %d, want %d", got, tc.want)
			}
		})
	}
}
