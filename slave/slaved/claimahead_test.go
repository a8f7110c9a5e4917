package slaved

import (
	"testing"
	"time"
)

// TestClaimAhead: the leases held ahead are the pages finished in one
// claim's time, none for a slave whose pages are slow, at most max.
func TestClaimAhead(t *testing.T) {
	tests := []struct {
		name     string
		claims   []time.Duration // durations recorded, in order
		finished int64           // pages finished over the last second
		want     int
	}{
		{"no claim timed yet", nil, 4000, 0},
		{"nothing finished", []time.Duration{20 * time.Millisecond}, 0, 0},
		{"Redis near by", []time.Duration{500 * time.Microsecond}, 8000, 2},     // 4,000/s × 0.5 ms
		{"work API at 20 ms", []time.Duration{20 * time.Millisecond}, 2000, 20}, // 1,000/s (the average moves halfway) × 20 ms
		{"slow pages", []time.Duration{3 * time.Millisecond}, 100, 0},           // 50/s × 3 ms
		{"capped", []time.Duration{100 * time.Millisecond}, 8000, 32},
		{"latency averaged", []time.Duration{40 * time.Millisecond, 0}, 2000, 30}, // 1,000/s × (40 ms moved a quarter to 0)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := claimAhead{max: 32}
			for _, d := range tt.claims {
				a.claimed(d)
			}
			a.n(0) // starts the window
			a.since = a.since.Add(-time.Second)
			got := a.n(tt.finished)
			if got != tt.want {
				t.Errorf("n = %d, want %d (rate %.0f/s, latency %v)", got, tt.want, a.rate, time.Duration(a.latency*float64(time.Second)))
			}
		})
	}
}
