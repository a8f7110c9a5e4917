package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
)

// client scrapes without keeping connections, so no transport goroutine
// outlives a test.
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// scrape fetches url over HTTP in the text format and parses it.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("scrape %s: %s: %s", url, res.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// flatten turns the families named prefix* into series: name{labels} ->
// value, without the constant labels; histograms give name_count and
// name_sum.
func flatten(fams map[string]*dto.MetricFamily, prefix string, constLabels ...string) map[string]float64 {
	skip := map[string]bool{}
	for _, l := range constLabels {
		skip[l] = true
	}
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				if !skip[lp.GetName()] {
					ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
				}
			}
			sort.Strings(ls)
			key := func(n string) string {
				if len(ls) == 0 {
					return n
				}
				return n + "{" + strings.Join(ls, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key(name)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(name)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key(name+"_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key(name+"_sum")] = m.GetHistogram().GetSampleSum()
			default:
				out[key(name)] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// checkConstLabels fails unless every family named prefix* carries want.
func checkConstLabels(t *testing.T, fams map[string]*dto.MetricFamily, prefix string, want map[string]string) {
	t.Helper()
	for name, f := range fams {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				if _, ok := want[lp.GetName()]; ok {
					got[lp.GetName()] = lp.GetValue()
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: constant labels (-want +got):\n%s", name, diff)
			}
		}
	}
}

// checkRuntime fails unless the Go and process collectors are there.
func checkRuntime(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	want := []string{"go_goroutines"}
	if runtime.GOOS == "linux" {
		want = append(want, "process_cpu_seconds_total")
	}
	for _, n := range want {
		if fams[n] == nil {
			t.Errorf("no %s", n)
		}
	}
}

func merge(base, over map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// serve serves h with Serve on a free loopback port until the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr, wait, err := metrics.Serve(ctx, "127.0.0.1:0", h, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); wait() })
	return "http://" + addr + "/metrics"
}

func TestSlave(t *testing.T) {
	base := map[string]float64{
		`redcrawl_slave_pages_total{outcome="ok"}`:    0,
		`redcrawl_slave_pages_total{outcome="error"}`: 0,
		"redcrawl_slave_bytes_total":                  0,
		"redcrawl_slave_rendered_total":               0,
		"redcrawl_slave_in_flight":                    0,
		"redcrawl_slave_claim_seconds_count":          0,
		"redcrawl_slave_claim_seconds_sum":            0,
		"redcrawl_slave_ack_seconds_count":            0,
		"redcrawl_slave_ack_seconds_sum":              0,
		"redcrawl_slave_claimed_total":                0,
		"redcrawl_slave_leases_lost_total":            0,
	}
	for _, tc := range []struct {
		name string
		do   func(*metrics.Slave)
		want map[string]float64 // over base
	}{
		{"nothing", func(*metrics.Slave) {}, nil},
		{"pages", func(s *metrics.Slave) {
			s.Page(true)
			s.Page(true)
			s.Page(false)
		}, map[string]float64{`redcrawl_slave_pages_total{outcome="ok"}`: 2, `redcrawl_slave_pages_total{outcome="error"}`: 1}},
		{"bytes", func(s *metrics.Slave) {
			s.Bytes(1000)
			s.Bytes(24)
			s.Bytes(0)
			s.Bytes(-5)
		}, map[string]float64{"redcrawl_slave_bytes_total": 1024}},
		{"errors by kind", func(s *metrics.Slave) {
			s.Error("timeout")
			s.Error("dns")
			s.Error("timeout")
			s.Error("http_status")
		}, map[string]float64{
			`redcrawl_slave_errors_total{kind="timeout"}`:     2,
			`redcrawl_slave_errors_total{kind="dns"}`:         1,
			`redcrawl_slave_errors_total{kind="http_status"}`: 1,
		}},
		{"rendered", func(s *metrics.Slave) { s.Rendered(); s.Rendered() },
			map[string]float64{"redcrawl_slave_rendered_total": 2}},
		{"in flight", func(s *metrics.Slave) { s.SetInFlight(7); s.SetInFlight(3) },
			map[string]float64{"redcrawl_slave_in_flight": 3}},
		{"claim and ack", func(s *metrics.Slave) {
			s.ObserveClaim(2 * time.Millisecond)
			s.ObserveClaim(500 * time.Microsecond)
			s.ObserveAck(250 * time.Millisecond)
			s.Claimed(5)
			s.Claimed(0)
		}, map[string]float64{
			"redcrawl_slave_claim_seconds_count": 2, "redcrawl_slave_claim_seconds_sum": 0.0025,
			"redcrawl_slave_ack_seconds_count": 1, "redcrawl_slave_ack_seconds_sum": 0.25,
			"redcrawl_slave_claimed_total": 5,
		}},
		{"leases lost", func(s *metrics.Slave) { s.LeasesLost(2); s.LeasesLost(1) },
			map[string]float64{"redcrawl_slave_leases_lost_total": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := metrics.NewSlave("c1", "s1")
			tc.do(s)
			fams := scrape(t, serve(t, s.Handler()))
			got := flatten(fams, "redcrawl_", "crawl", "slave")
			if diff := cmp.Diff(merge(base, tc.want), got, cmp.Comparer(approx)); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
			checkConstLabels(t, fams, "redcrawl_", map[string]string{"crawl": "c1", "slave": "s1"})
			checkRuntime(t, fams)
		})
	}
}

func approx(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

// TestSlaveConcurrent updates one kind's counter from many goroutines (run
// with -race).
func TestSlaveConcurrent(t *testing.T) {
	s := metrics.NewSlave("c", "s")
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for j := range each {
				s.Error([]string{"timeout", "dns"}[(i+j)%2])
				s.Page(true)
			}
		})
	}
	wg.Wait()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	got := flatten(scrape(t, srv.URL), "redcrawl_slave_errors_total", "crawl", "slave")
	want := map[string]float64{
		`redcrawl_slave_errors_total{kind="timeout"}`: workers * each / 2,
		`redcrawl_slave_errors_total{kind="dns"}`:     workers * each / 2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestNil checks that a nil set discards updates.
func TestNil(t *testing.T) {
	var s *metrics.Slave
	s.Page(true)
	s.Bytes(1)
	s.Error("x")
	s.Rendered()
	s.SetInFlight(1)
	s.ObserveClaim(time.Second)
	s.ObserveAck(time.Second)
	s.Claimed(1)
	s.LeasesLost(1)
	var m *metrics.Master
	m.LeasesRecovered(metrics.ReasonExpired, 1)
	m.EventsStored("page", 1)
	m.ForgedEvent("s", "crawl")
	m.ScheduledRun()
}

// TestSlaveAllocs checks that the hot-path methods allocate nothing once
// a kind has been seen.
func TestSlaveAllocs(t *testing.T) {
	s := metrics.NewSlave("c", "s")
	s.Error("timeout")
	allocs := testing.AllocsPerRun(100, func() {
		s.Page(true)
		s.Bytes(10)
		s.Error("timeout")
		s.SetInFlight(3)
		s.ObserveClaim(time.Millisecond)
		s.ObserveAck(time.Millisecond)
		s.Claimed(1)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per update round, want 0", allocs)
	}
}

func TestMaster(t *testing.T) {
	snap := frontier.Stats{Queued: 10, InFlight: 4, Retry: 3, RenderQueued: 2, Done: 100, Failed: 5,
		Seen: 150, Lost: 1, Duplicates: 7, SlavesAlive: 2, PagesPerSec: 12.5}
	state := map[string]float64{
		"redcrawl_up":                                          1,
		`redcrawl_queue_depth{queue="queued"}`:                 10,
		`redcrawl_queue_depth{queue="in_flight"}`:              4,
		`redcrawl_queue_depth{queue="retry"}`:                  3,
		`redcrawl_queue_depth{queue="render_queued"}`:          2,
		`redcrawl_queue_depth{queue="failed"}`:                 5,
		"redcrawl_pages_done":                                  100,
		"redcrawl_seen_urls":                                   150,
		"redcrawl_slaves_alive":                                2,
		"redcrawl_pages_per_second":                            12.5,
		"redcrawl_duplicates":                                  7,
		"redcrawl_lost_tasks":                                  1,
		`redcrawl_leases_recovered_total{reason="expired"}`:    0,
		`redcrawl_leases_recovered_total{reason="slave_dead"}`: 0,
		"redcrawl_scheduled_runs_total":                        0,
	}
	down := map[string]float64{
		"redcrawl_up": 0,
		`redcrawl_leases_recovered_total{reason="expired"}`:    0,
		`redcrawl_leases_recovered_total{reason="slave_dead"}`: 0,
		"redcrawl_scheduled_runs_total":                        0,
	}
	ok := func(context.Context) (frontier.Stats, error) { return snap, nil }
	sharded := snap
	sharded.Shards = []frontier.ShardStats{{Shard: 0, Queued: 6, InFlight: 1, Retry: 3}, {Shard: 1, Queued: 4, InFlight: 3}}
	shardState := map[string]float64{
		`redcrawl_shard_queue_depth{queue="queued",shard="0"}`:    6,
		`redcrawl_shard_queue_depth{queue="in_flight",shard="0"}`: 1,
		`redcrawl_shard_queue_depth{queue="retry",shard="0"}`:     3,
		`redcrawl_shard_queue_depth{queue="queued",shard="1"}`:    4,
		`redcrawl_shard_queue_depth{queue="in_flight",shard="1"}`: 3,
		`redcrawl_shard_queue_depth{queue="retry",shard="1"}`:     0,
	}
	for _, tc := range []struct {
		name  string
		stats func(context.Context) (frontier.Stats, error)
		do    func(*metrics.Master)
		base  map[string]float64
		want  map[string]float64 // over base
	}{
		{"state", ok, func(*metrics.Master) {}, state, nil},
		{"shards", func(context.Context) (frontier.Stats, error) { return sharded, nil }, func(*metrics.Master) {}, state, shardState},
		{"counters", ok, func(m *metrics.Master) {
			m.LeasesRecovered(metrics.ReasonExpired, 3)
			m.LeasesRecovered(metrics.ReasonSlaveDead, 2)
			m.LeasesRecovered(metrics.ReasonExpired, 1)
			m.LeasesRecovered(metrics.ReasonExpired, 0)
			m.EventsStored("page", 40)
			m.EventsStored("exception", 2)
			m.EventsStored("page", 2)
			m.ForgedEvent("pi1", "crawl")
			m.ForgedEvent("pi1", "crawl")
			m.ForgedEvent("pi2", "fetched_at")
			m.ScheduledRun()
			m.ScheduledRun()
		}, state, map[string]float64{
			`redcrawl_forged_events_total{field="crawl",slave="pi1"}`:      2,
			`redcrawl_forged_events_total{field="fetched_at",slave="pi2"}`: 1,
			`redcrawl_leases_recovered_total{reason="expired"}`:            4,
			`redcrawl_leases_recovered_total{reason="slave_dead"}`:         2,
			`redcrawl_events_stored_total{type="page"}`:                    42,
			`redcrawl_events_stored_total{type="exception"}`:               2,
			"redcrawl_scheduled_runs_total":                                2,
		}},
		{"stats fail", func(context.Context) (frontier.Stats, error) {
			return frontier.Stats{}, errors.New("redis down")
		}, func(m *metrics.Master) { m.ScheduledRun() }, down,
			map[string]float64{"redcrawl_scheduled_runs_total": 1}},
		{"stats time out", func(ctx context.Context) (frontier.Stats, error) {
			if _, ok := ctx.Deadline(); !ok {
				return snap, nil // no deadline: the test fails on redcrawl_up
			}
			<-ctx.Done()
			return frontier.Stats{}, ctx.Err()
		}, func(*metrics.Master) {}, down, nil},
		{"no stats", nil, func(*metrics.Master) {}, down, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.NewMaster("c1", tc.stats)
			tc.do(m)
			srv := httptest.NewServer(m.Handler())
			defer srv.Close()
			fams := scrape(t, srv.URL)
			got := flatten(fams, "redcrawl_", "crawl")
			if diff := cmp.Diff(merge(tc.base, tc.want), got); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
			checkConstLabels(t, fams, "redcrawl_", map[string]string{"crawl": "c1"})
			checkRuntime(t, fams)
		})
	}
}

// TestServe checks the routes of the metrics server and that it stops,
// goroutines and all, when its context is cancelled, even with a client
// holding a keep-alive connection.
func TestServe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "x_total 1\n") })
	addr, wait, err := metrics.Serve(ctx, "127.0.0.1:0", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Errorf("bound address %q", addr)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	kc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/metrics", http.StatusOK},
		{http.MethodHead, "/metrics", http.StatusOK},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, nil)
		res, err := kc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, res.StatusCode, tc.status)
		}
	}
	// a second server on the same address fails to listen
	if _, _, err := metrics.Serve(ctx, addr, h, nil); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("serve on a taken address: %v", err)
	}
	cancel()
	stopped := make(chan struct{})
	go func() { wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	wait() // again: returns at once
	if res, err := client.Get("http://" + addr + "/metrics"); err == nil {
		res.Body.Close()
		t.Error("server still answers after shutdown")
	}
}
