package benchsuite

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
)

// TestRunBroadSmoke runs a tiny broad benchmark: 200 hosts × 2 pages
// with 1 and 2 slaves (in this process, or subprocesses of
// REDCRAWL_BENCH_SLAVE; the master a process of REDCRAWL_BENCH_MASTER
// when set), 3 slaves of one fetch, and the 20-host comparison, and
// checks that every figure was measured and the report written.
func TestRunBroadSmoke(t *testing.T) {
	cfg := config.Default()
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	dir := t.TempDir()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunBroad(ctx, BroadOptions{Hosts: 200, PagesPerHost: 2, PageBytes: 2000, Slaves: []int{1, 2},
		Concurrency: 8, Many: 3, Colly: true, IdleWindow: time.Second, OutDir: dir, Config: &cfg,
		SlaveBinary: os.Getenv("REDCRAWL_BENCH_SLAVE"), MasterBinary: os.Getenv("REDCRAWL_BENCH_MASTER"),
		InProcess: inProcess, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if len(rep.Runs) != 3 || rep.Narrow == nil {
		t.Fatalf("%d runs and narrow %v, want 3 and one", len(rep.Runs), rep.Narrow)
	}
	for _, r := range append(rep.Runs, rep.Narrow) {
		if want := int64(400); r.Pages != want || r.Missing != 0 || r.Extra != 0 || r.Other != 0 || r.Failed != 0 {
			t.Errorf("%s: %d pages, %d missing, %d extra, %d other, %d failed; want %d, 0, 0, 0, 0",
				r.Label, r.Pages, r.Missing, r.Extra, r.Other, r.Failed, want)
		}
		for name, v := range map[string]float64{"pages/s": r.PagesPerSec, "redis µs": r.RedisCPUPerPageUs,
			"claim p50": r.ClaimP50Ms, "claim p99": r.ClaimP99Ms,
			"idle commands/s": r.IdleCmdsPerSec, "dns queries/host": r.DNSQueriesPerHost, "conns/host": r.ConnsPerHost, "master ms": r.MasterMs, "redis ms": r.RedisMs,
			"all-in": r.AllInMs, "all-in tail": r.AllInTailMs} {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s: %s = %v, want > 0", r.Label, name, v)
			}
		}
		// measured, but not checked for size: another client of a shared
		// Redis moves used_memory by more than 200 hosts' keys
		if math.IsNaN(r.RedisBytesPerHost) || math.IsNaN(r.SeenBytesPerHost) {
			t.Errorf("%s: Redis bytes a host %v (seen set %v) not measured", r.Label, r.RedisBytesPerHost, r.SeenBytesPerHost)
		}
		if r.Claims == 0 || r.ClaimP99Ms < r.ClaimP50Ms {
			t.Errorf("%s: %d claims, p50 %v p99 %v", r.Label, r.Claims, r.ClaimP50Ms, r.ClaimP99Ms)
		}
	}
	if r := rep.Runs[2]; r.Slaves != 3 || r.PerSlav != 1 {
		t.Errorf("many-slaves run: %d × %d, want 3 × 1", r.Slaves, r.PerSlav)
	}
	if rep.Runs[1].PerSlav != 4 {
		t.Errorf("2 slaves × %d fetches, want 4", rep.Runs[1].PerSlav)
	}
	if !(rep.BroadVsNarrow > 0) {
		t.Errorf("broad vs narrow %v", rep.BroadVsNarrow)
	}
	// plain colly crawled both sites, every page (colly may fetch a page
	// twice: its visited check races in async mode)
	for _, c := range []*CollyBroadRun{rep.CollyBroad, rep.CollyNarrow} {
		if c == nil {
			t.Fatalf("colly runs %v, %v: want both", rep.CollyBroad, rep.CollyNarrow)
		}
		if c.Pages != 400+int64(c.Extra) || c.Missing != 0 || c.Errors != 0 || !(c.PagesPerSec > 0) || !(c.CPUMsPerPage > 0) {
			t.Errorf("colly, %d hosts: %+v; want 400 pages and the repeats, none missing or failed", c.Hosts, *c)
		}
	}
	if !(rep.CollyBroadVsNarrow > 0) {
		t.Errorf("colly broad vs narrow %v", rep.CollyBroadVsNarrow)
	}
	md, err := os.ReadFile(rep.LatestPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| **pages/s** |", "| claim p50 / p99, ms |", "| idle commands/s (function calls/s) |",
		"| **all-in CPU / page, ms** |", "Pages/s at 200 hosts / at 20 hosts", "| 3 × 1 slaves × fetches |",
		"Colly's pages/s at 200 hosts / at 20 hosts"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestClaimQuantile checks the histogram quantiles.
func TestClaimQuantile(t *testing.T) {
	h := &claimHist{bounds: []float64{0.001, 0.002, math.Inf(1)},
		cum: map[float64]uint64{0.001: 50, 0.002: 99, math.Inf(1): 100}, count: 100}
	for _, tt := range []struct{ q, want float64 }{{0.5, 0.001}, {0.25, 0.0005}, {0.99, 0.002}, {0.995, math.Inf(1)}} {
		if got := h.quantile(tt.q); math.Abs(got-tt.want) > 1e-12 && got != tt.want {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := (&claimHist{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty: %v", got)
	}
}
