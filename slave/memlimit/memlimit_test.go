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
		want        int64
	}{
		{"a few hosts: the base", 28 * mib, 10 * mib, 10 * mib, 28 * mib},
		{"live and room at the base: the base", 28 * mib, 11 * mib, 10 * mib, 28 * mib},
		{"past the base: a quarter of the base as room", 28 * mib, 12 * mib, 10 * mib, 29 * mib},
		{"past half the base: the room grows four times as fast", 28 * mib, 16 * mib, 10 * mib, 41 * mib},
		{"a broad crawl's start: on the way to twice the live heap", 28 * mib, 22 * mib, 12 * mib, 73 * mib},
		{"a broad crawl: twice the live heap as room", 28 * mib, 40 * mib, 12 * mib, 132 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Want(tc.base, tc.live, tc.other); got != tc.want {
				t.Errorf("Want(%d, %d, %d) = %d, want %d", tc.base, tc.live, tc.other, got, tc.want)
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
	var mu sync.Mutex
	var set []int64
	reads := 0
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	read := func() (uint64, uint64) {
		mu.Lock()
		defer mu.Unlock()
		if reads == len(lives)-1 {
			cancel() // the last read: stop after it
		}
		v := lives[min(reads, len(lives)-1)]
		reads++
		return v, 0
	}
	go func() {
		defer close(done)
		Follow(ctx, 20, Options{Every: time.Millisecond, Read: read, Set: func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			set = append(set, n)
		}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	// base 20 (room 5, or twice the live heap past 40): 10 -> 20,
	// 40 -> 120, 40 (same), 60 -> 180, 10 -> 20, 10 (same)
	want := []int64{20, 120, 180, 20}
	if d := cmp.Diff(want, set); d != "" {
		t.Errorf("limits set (-want +got):\n%s", d)
	}
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
			Apply(ctx, &cfg)
			cancel()
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("GC percent after Apply = %d, want %d", got, tc.want)
			}
		})
	}
}
