package slaved

import (
	"context"
	"testing"
	"time"
)

// TestClaimAhead: the leases held ahead are the pages finished in one
// claim's time, none for a slave whose pages are slow, at most max; and
// a batch more when the workers finish a batch within aheadHold.
func TestClaimAhead(t *testing.T) {
	tests := []struct {
		name     string
		claims   []time.Duration // durations recorded, in order
		finished int64           // pages finished over the last second
		batch    int             // claimBatch; 0 in the cases of no batch
		want     int
		covers   bool
	}{
		{"no claim timed yet", nil, 4000, 0, 0, false},
		{"nothing finished", []time.Duration{20 * time.Millisecond}, 0, 0, 0, false},
		{"Redis near by", []time.Duration{500 * time.Microsecond}, 8000, 0, 2, false},     // 4,000/s × 0.5 ms
		{"work API at 20 ms", []time.Duration{20 * time.Millisecond}, 2000, 0, 20, false}, // 1,000/s (the average moves halfway) × 20 ms
		{"slow pages", []time.Duration{3 * time.Millisecond}, 100, 0, 0, false},           // 50/s × 3 ms
		{"capped", []time.Duration{100 * time.Millisecond}, 8000, 0, 32, false},
		{"latency averaged", []time.Duration{40 * time.Millisecond, 0}, 2000, 0, 30, false}, // 1,000/s × (40 ms moved a quarter to 0)
		// a broad crawl's slave of 4 workers: 110 pages/s finish 22 in aheadHold
		{"batch held ahead", []time.Duration{10 * time.Millisecond}, 220, 4, 5, true}, // 110/s × 10 ms, + 4
		{"batch capped", []time.Duration{100 * time.Millisecond}, 8000, 4, 32, true},
		{"slow pages: no batch ahead", []time.Duration{10 * time.Millisecond}, 30, 4, 0, false}, // 15/s: 3 in aheadHold
		{"a batch from 40 pages/s", []time.Duration{10 * time.Millisecond}, 82, 8, 8, true},     // 41/s: 8 in aheadHold, + 8 (0.4 rounds to 0)
		{"one worker: no batch", []time.Duration{10 * time.Millisecond}, 2000, 1, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := claimAhead{max: 32, batch: tt.batch}
			for _, d := range tt.claims {
				a.claimed(d)
			}
			a.n(0) // starts the window
			a.since = a.since.Add(-time.Second)
			got := a.n(tt.finished)
			if got != tt.want || a.covers != tt.covers {
				t.Errorf("n = %d, covers %v, want %d, %v (rate %.0f/s, latency %v)", got, a.covers, tt.want, tt.covers, a.rate, time.Duration(a.latency*float64(time.Second)))
			}
		})
	}
}

// TestClaimBatch: a quarter of the concurrency, at least 8, at most twice
// the concurrency; none (1) under 4 workers.
func TestClaimBatch(t *testing.T) {
	for conc, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 8, 8: 8, 16: 8, 32: 8, 64: 16, 4096: 1024} {
		if got := claimBatch(conc); got != want {
			t.Errorf("claimBatch(%d) = %d, want %d", conc, got, want)
		}
	}
}

// TestWaitFreed: the claim loop's wait for a batch of free workers ends
// when the batch is there, when its time is up, or (false) with ctx.
func TestWaitFreed(t *testing.T) {
	freed := make(chan struct{}, 1)
	free := 0
	ok := func() bool { return free >= 3 }
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			freed <- struct{}{}
		}
	}()
	// each signal stands for a freed lease
	if !waitFreed(context.Background(), freed, time.Minute, func() bool { free++; return ok() }) {
		t.Fatal("waitFreed = false without a cancelled context")
	}
	start := time.Now()
	if !waitFreed(context.Background(), freed, 20*time.Millisecond, func() bool { return false }) {
		t.Fatal("waitFreed = false at its time limit")
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Error("waitFreed ended before its time without the batch")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waitFreed(ctx, freed, time.Minute, func() bool { return false }) {
		t.Error("waitFreed = true with a cancelled context")
	}
}
