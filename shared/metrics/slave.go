// Package metrics holds redcrawl's Prometheus metrics: the counters,
// gauges and histograms a slave updates on its hot path (Slave), the
// crawl-wide set a master exports from its queue statistics at scrape time
// (Master), and a small /metrics HTTP server (Serve). Each set lives in its
// own registry; nothing is registered on the global default registry.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// latencyBuckets suit Redis round trips: 0.1ms to 5s.
var latencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

// Outcome label values of redcrawl_slave_pages_total.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// Slave is the metric set of one slave process, in a registry of its own.
// Its methods are safe for concurrent use and cheap enough for the fetch
// path; a nil *Slave discards every update.
type Slave struct {
	reg *prometheus.Registry

	pagesOK    prometheus.Counter
	pagesErr   prometheus.Counter
	bytes      prometheus.Counter
	errors     *prometheus.CounterVec
	errorKinds sync.Map // kind string -> prometheus.Counter
	rendered   prometheus.Counter
	inFlight   prometheus.Gauge
	claim      prometheus.Histogram
	ack        prometheus.Histogram
	claimed    prometheus.Counter
	leasesLost prometheus.Counter
}

// NewSlave builds the metric set of a slave; every series carries the
// constant labels crawl and slave.
func NewSlave(crawl, slaveID string) *Slave {
	cl := prometheus.Labels{"crawl": crawl, "slave": slaveID}
	const ns, sub = "redcrawl", "slave"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name,
			Help: help, ConstLabels: cl})
	}
	histogram := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: name,
			Help: help, ConstLabels: cl, Buckets: latencyBuckets})
	}
	pages := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "pages_total",
		Help: "Tasks finished for good, by outcome (ok: done, error: failed).", ConstLabels: cl}, []string{"outcome"})
	s := &Slave{
		reg:      prometheus.NewRegistry(),
		pagesOK:  pages.WithLabelValues(OutcomeOK),
		pagesErr: pages.WithLabelValues(OutcomeError),
		bytes:    counter("bytes_total", "Response body bytes fetched."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "errors_total",
			Help: "Exceptions reported, by kind.", ConstLabels: cl}, []string{"kind"}),
		rendered: counter("rendered_total", "Pages rendered in headless Chromium."),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "in_flight",
			Help: "Leased tasks being fetched or awaiting acknowledgement.", ConstLabels: cl}),
		claim:      histogram("claim_seconds", "Duration of the Redis claim round trip."),
		ack:        histogram("ack_seconds", "Duration of the Redis acknowledgement (complete) round trip."),
		claimed:    counter("claimed_total", "Tasks claimed from the frontier."),
		leasesLost: counter("leases_lost_total", "Acknowledgements refused because the lease was lost."),
	}
	s.reg.MustRegister(pages, s.bytes, s.errors, s.rendered, s.inFlight, s.claim, s.ack, s.claimed, s.leasesLost,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
}

// Page counts a task finished for good: ok for done, !ok for failed.
func (s *Slave) Page(ok bool) {
	if s == nil {
		return
	}
	if ok {
		s.pagesOK.Inc()
	} else {
		s.pagesErr.Inc()
	}
}

// Bytes adds n fetched body bytes.
func (s *Slave) Bytes(n int64) {
	if s == nil || n <= 0 {
		return
	}
	s.bytes.Add(float64(n))
}

// Error counts an exception of a kind (events.Kind*: timeout, dns,
// http_status, ...).
func (s *Slave) Error(kind string) {
	if s == nil {
		return
	}
	if c, ok := s.errorKinds.Load(kind); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c, _ := s.errorKinds.LoadOrStore(kind, s.errors.WithLabelValues(kind))
	c.(prometheus.Counter).Inc()
}

// Rendered counts a page rendered in headless Chromium.
func (s *Slave) Rendered() {
	if s == nil {
		return
	}
	s.rendered.Inc()
}

// SetInFlight sets the number of leased tasks in flight.
func (s *Slave) SetInFlight(n int) {
	if s == nil {
		return
	}
	s.inFlight.Set(float64(n))
}

// ObserveClaim records the duration of one claim round trip.
func (s *Slave) ObserveClaim(d time.Duration) {
	if s == nil {
		return
	}
	s.claim.Observe(d.Seconds())
}

// ObserveAck records the duration of one acknowledgement round trip.
func (s *Slave) ObserveAck(d time.Duration) {
	if s == nil {
		return
	}
	s.ack.Observe(d.Seconds())
}

// Claimed counts n claimed tasks.
func (s *Slave) Claimed(n int) {
	if s == nil || n <= 0 {
		return
	}
	s.claimed.Add(float64(n))
}

// LeasesLost counts n acknowledgements refused because the lease was lost.
func (s *Slave) LeasesLost(n int) {
	if s == nil || n <= 0 {
		return
	}
	s.leasesLost.Add(float64(n))
}

// Gatherer returns the slave's registry for reading (tests, pushing).
func (s *Slave) Gatherer() prometheus.Gatherer { return s.reg }

// Handler serves the slave's registry in the Prometheus exposition formats.
func (s *Slave) Handler() http.Handler { return handlerFor(s.reg) }

// handlerFor serves a registry; scrape errors of one collector still serve
// the rest, and the handler's own counters go into the registry.
func handlerFor(reg *prometheus.Registry) http.Handler {
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
}
