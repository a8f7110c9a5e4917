package banker

import (
	"context"
	"sync/atomic"
	"testing"
)

// loaded returns a Governor over 3 kinds with 64 workers holding part of
// their claims. Even workers hold all but one conn of their claim; odd ones
// hold one conn of four. With tight, 2 conns are left available, so that a
// grant of a conn to an odd worker needs the search (its remaining need no
// longer fits in what is left); otherwise plenty is available and every
// grant takes the fast path.
func loaded(b *testing.B, tight bool) (*Governor, []*Worker) {
	b.Helper()
	const n = 64
	conns := int64(n/2*4 + n/2*1 + 2) // held + 2
	if !tight {
		conns = n * 4
	}
	g, err := New(Vector{"conns": conns, "tabs": n / 4, "membytes": 4 << 30}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ws := make([]*Worker, n)
	for i := range ws {
		max := Vector{"conns": 4, "membytes": 32 << 20}
		hold := Vector{"conns": 1, "membytes": 1 << 20}
		if i%2 == 0 {
			max["conns"], hold["conns"] = 5, 4
		}
		if i%4 == 1 {
			max["tabs"], hold["tabs"] = 1, 1
		}
		if ws[i], err = g.Register(max); err != nil {
			b.Fatal(err)
		}
		if err := ws[i].Acquire(ctx, hold); err != nil {
			b.Fatal(err)
		}
	}
	return g, ws
}

// BenchmarkAcquireRelease measures one grant and one release of a conn by
// one of 64 registered workers over 3 kinds, uncontended.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name  string
		tight bool
	}{{"fast-path", false}, {"search", true}} {
		b.Run(bc.name, func(b *testing.B) {
			g, ws := loaded(b, bc.tight)
			ctx := context.Background()
			req := Vector{"conns": 1}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				w := ws[1+2*(i%32)] // odd workers
				i++
				if err := w.Acquire(ctx, req); err != nil {
					b.Fatal(err)
				}
				if err := w.Release(req); err != nil {
					b.Fatal(err)
				}
			}
			if !g.Safe() {
				b.Fatal("unsafe")
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel is BenchmarkAcquireRelease from
// GOMAXPROCS goroutines, each driving its own worker (fast path).
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	_, ws := loaded(b, false)
	ctx := context.Background()
	req := Vector{"conns": 1}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := ws[1+2*(next.Add(1)%32)]
		for pb.Next() {
			if err := w.Acquire(ctx, req); err != nil {
				b.Error(err)
				return
			}
			if err := w.Release(req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSafe compares the full sorted search with the textbook
// O(workers² × kinds) scan, both over the Governor's slices, on the tight
// state of BenchmarkAcquireRelease (worst-case orders are benchmarked in
// BenchmarkSafeWorstCase).
func BenchmarkSafe(b *testing.B) {
	g, _ := loaded(b, true)
	b.Run("sorted", func(b *testing.B) {
		for b.Loop() {
			if !g.safe(nil) {
				b.Fatal("unsafe")
			}
		}
	})
	b.Run("textbook", func(b *testing.B) {
		finish := make([]bool, len(g.workers))
		work := make([]int64, len(g.kinds))
		for b.Loop() {
			if !textbookSafe(g, work, finish) {
				b.Fatal("unsafe")
			}
		}
	})
}

func textbookSafe(g *Governor, work []int64, finish []bool) bool {
	copy(work, g.avail)
	clear(finish)
	done := 0
	for progress := true; progress; {
		progress = false
		for i, w := range g.workers {
			if finish[i] || !fits(w.need, work) {
				continue
			}
			for j, a := range w.alloc {
				work[j] += a
			}
			finish[i], progress = true, true
			done++
		}
	}
	return done == len(g.workers)
}

// BenchmarkSafeWorstCase uses a chain: worker i can finish only after
// worker i+1 has, and the workers are registered in the order 0..n-1, so
// the textbook scan finishes one worker per pass (n passes).
func BenchmarkSafeWorstCase(b *testing.B) {
	const n = 64
	g, err := New(Vector{"conns": n + 1, "tabs": 1, "membytes": 1}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ws := make([]*Worker, n)
	for i := range ws {
		// Worker i holds 1 and needs n-i more; 1 is available.
		if ws[i], err = g.Register(Vector{"conns": int64(n - i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	for i := n - 1; i >= 0; i-- {
		if err := ws[i].Acquire(context.Background(), Vector{"conns": 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("sorted", func(b *testing.B) {
		for b.Loop() {
			if !g.safe(nil) {
				b.Fatal("unsafe")
			}
		}
	})
	b.Run("textbook", func(b *testing.B) {
		finish := make([]bool, len(g.workers))
		work := make([]int64, len(g.kinds))
		for b.Loop() {
			if !textbookSafe(g, work, finish) {
				b.Fatal("unsafe")
			}
		}
	})
}
