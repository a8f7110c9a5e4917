package workapi

import (
	"testing"
	"time"
)

func TestBeatsUntold(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var b beats
	if n := b.untold(t0); n != 0 {
		t.Fatalf("no slave: %d untold", n)
	}
	b.record("a", t0.Add(time.Second), false)
	b.record("b", t0.Add(2*time.Second), false)
	b.record("old", t0.Add(-time.Minute), false) // silent since before: dead
	if n := b.untold(t0); n != 2 {
		t.Errorf("two beating, not told: %d untold, want 2", n)
	}
	b.record("a", t0.Add(3*time.Second), true)
	if n := b.untold(t0); n != 1 {
		t.Errorf("a told: %d untold, want 1", n)
	}
	b.forget("b") // it left
	if n := b.untold(t0); n != 0 {
		t.Errorf("a told, b left: %d untold, want 0", n)
	}
}
