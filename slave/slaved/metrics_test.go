package slaved_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestMetrics crawls a small site with one slave serving /metrics on a
// free loopback port, finds the port in the slave's heartbeat, scrapes it
// over HTTP and checks the counters against the frontier's stats; after
// the slave leaves, the metrics server is gone.
func TestMetrics(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, _, stopSite := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 15, Robots: true, Seed: 5}, 0)
	defer stopSite()
	cfg := testConfig(t, site)
	cfg.Slave.MetricsListen = "127.0.0.1:0"
	h := newHarness(t, cfg, site)
	ctx := context.Background()

	s, err := slaved.New(cfg, slaved.Options{ID: "metered"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()

	finished := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if fin, err := h.f.CheckFinished(ctx, time.Second); err == nil && fin {
			finished = true
			break
		}
	}
	if !finished {
		stop()
		<-done
		t.Fatal("crawl not finished")
	}
	stats, err := h.f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr := ""
	for deadline := time.Now().Add(5 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ss, err := h.f.Slaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, si := range ss {
			if si.Slave == s.ID() {
				addr = si.MetricsAddr
			}
		}
	}
	if addr == "" {
		stop()
		<-done
		t.Fatal("no metrics address in the heartbeat")
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	fams := scrapeMetrics(t, client, "http://"+addr+"/metrics")
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	if stats.Done == 0 {
		t.Fatalf("nothing crawled: %+v", stats)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		m := findMetric(fams, name, labels...)
		if m == nil {
			t.Errorf("no %s%v", name, labels)
			return -1
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
		return -1
	}
	if got := value("redcrawl_slave_pages_total", "outcome", "ok"); got != float64(stats.Done) {
		t.Errorf("pages_total{outcome=ok} = %v, want %d (done)", got, stats.Done)
	}
	if got := value("redcrawl_slave_pages_total", "outcome", "error"); got != float64(stats.Failed) {
		t.Errorf("pages_total{outcome=error} = %v, want %d (failed)", got, stats.Failed)
	}
	if got := value("redcrawl_slave_claim_seconds"); got <= 0 {
		t.Errorf("claim_seconds has %v observations", got)
	}
	if got := value("redcrawl_slave_ack_seconds"); got <= 0 {
		t.Errorf("ack_seconds has %v observations", got)
	}
	if got := value("redcrawl_slave_claimed_total"); got < float64(stats.Done+stats.Failed) {
		t.Errorf("claimed_total = %v, want at least %d", got, stats.Done+stats.Failed)
	}
	if got := value("redcrawl_slave_bytes_total"); got <= 0 {
		t.Errorf("bytes_total = %v", got)
	}
	if got := value("redcrawl_slave_in_flight"); got != 0 {
		t.Errorf("in_flight = %v after the crawl finished", got)
	}
	if m := findMetric(fams, "redcrawl_slave_pages_total", "crawl", cfg.Crawl.Name, "slave", "metered"); m == nil {
		t.Error("pages_total lacks the crawl and slave labels")
	}
	if fams["go_goroutines"] == nil {
		t.Error("no Go runtime metrics")
	}
	// the server stopped with the slave
	if res, err := client.Get("http://" + addr + "/metrics"); err == nil {
		res.Body.Close()
		t.Error("metrics still served after the slave left")
	}
}

// scrapeMetrics fetches a /metrics page in the text format and parses it.
func scrapeMetrics(t *testing.T, client *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse metrics: %v", err)
	}
	return fams
}

// findMetric returns the first series of a family with the label pairs
// given (name, value, name, value, ...), or nil.
func findMetric(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}
