package faults

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/soak"
)

// The soak's settings, from the environment (make soak sets them).
const (
	envSoakSeed     = "REDCRAWL_SOAK_SEED"     // the faults' seed (default 1)
	envSoakDuration = "REDCRAWL_SOAK_DURATION" // how long it crawls (default 3m)
	envSoakOut      = "REDCRAWL_SOAK_OUT"      // a file the figures' line is written to
)

// TestSoak crawls the test site again and again for REDCRAWL_SOAK_DURATION
// (3 minutes by default: one crawl on one Redis, one on a Redis Cluster)
// under random faults drawn from REDCRAWL_SOAK_SEED, and checks each
// crawl's invariants (internal/harness/soak): finished by itself, every
// page fetched and stored once, re-fetches only for lost leases or lost
// Redis data, politeness kept, no crash, memory bounded. It logs one line
// of figures, and writes it to REDCRAWL_SOAK_OUT when set (make soak).
func TestSoak(t *testing.T) {
	opt := soak.Options{Seed: 1, Duration: 3 * time.Minute}
	if v := os.Getenv(envSoakSeed); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSoakSeed, v, err)
		}
		opt.Seed = seed
	}
	if v := os.Getenv(envSoakDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSoakDuration, v, err)
		}
		opt.Duration = d
	}
	if testing.Verbose() {
		opt.Log = os.Stderr
	}
	fig := soak.Run(t, opt)
	line := fig.Line()
	t.Log(line)
	if out := os.Getenv(envSoakOut); out != "" {
		if err := os.WriteFile(out, []byte(line+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestMakeSoak: make soak runs TestSoak with the settings it reads.
func TestMakeSoak(t *testing.T) {
	b, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	for _, want := range []string{"\nsoak: services\n", envSoakDuration + "=$(SOAK_DURATION)", envSoakSeed + "=$(SOAK_SEED)",
		envSoakOut + "=", "-run '^TestSoak$$' ./internal/e2e/faults/"} {
		if !strings.Contains(mk, want) {
			t.Errorf("Makefile lacks %q", want)
		}
	}
}
