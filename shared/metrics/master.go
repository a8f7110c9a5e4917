package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// statsTimeout bounds the stats call of one scrape.
const statsTimeout = 2 * time.Second

// Reasons of redcrawl_leases_recovered_total.
const (
	ReasonExpired   = "expired"
	ReasonSlaveDead = "slave_dead"
)

// Master is the master's metric set, in a registry of its own: the crawl's
// state read at scrape time and counters of what the master does. Its
// methods are safe for concurrent use; a nil *Master discards every
// update.
type Master struct {
	reg *prometheus.Registry

	recovered        *prometheus.CounterVec
	recoveredExpired prometheus.Counter
	recoveredDead    prometheus.Counter
	stored           *prometheus.CounterVec
	storedTypes      sync.Map // type string -> prometheus.Counter
	forged           *prometheus.CounterVec
	scheduled        prometheus.Counter
	apiLimited       *prometheus.CounterVec
	apiInvalid       *prometheus.CounterVec
	apiServed        *prometheus.HistogramVec
}

// NewMaster builds the master's metric set for a crawl; every series
// carries the constant label crawl. stats is called at each scrape with a
// 2s timeout; when it fails, redcrawl_up is 0 and the state gauges are
// left out.
func NewMaster(crawl string, stats func(ctx context.Context) (frontier.Stats, error)) *Master {
	cl := prometheus.Labels{"crawl": crawl}
	m := &Master{
		reg: prometheus.NewRegistry(),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redcrawl_leases_recovered_total",
			Help: "Leases taken back from slaves and requeued, by reason.", ConstLabels: cl}, []string{"reason"}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redcrawl_events_stored_total",
			Help: "Events stored in the database, by type.", ConstLabels: cl}, []string{"type"}),
		forged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redcrawl_forged_events_total",
			Help:        "Events the sink refused to store because their body disagreed with the slave stream they came from, by slave and field.",
			ConstLabels: cl}, []string{"slave", "field"}),
		scheduled: prometheus.NewCounter(prometheus.CounterOpts{Name: "redcrawl_scheduled_runs_total",
			Help: "Scheduled crawl runs started.", ConstLabels: cl}),
		apiLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redcrawl_api_limited_total",
			Help:        "Work API requests slowed or refused by a token's limit, by slave (the token's) and limit (rate, size).",
			ConstLabels: cl}, []string{"slave", "limit"}),
		apiInvalid: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redcrawl_api_invalid_total",
			Help: "Records of work API slaves refused as not about a lease the token held (an event for another URL, " +
				"a page event outside a completion, a metrics address not the slave's own), by slave (the token's) and what.",
			ConstLabels: cl}, []string{"slave", "what"}),
		apiServed: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "redcrawl_api_request_seconds",
			Help:        "Work API requests (all but the watches), by path, and the time the master took to answer them.",
			ConstLabels: cl, Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1, 5}}, []string{"path"}),
	}
	m.recoveredExpired = m.recovered.WithLabelValues(ReasonExpired)
	m.recoveredDead = m.recovered.WithLabelValues(ReasonSlaveDead)
	m.reg.MustRegister(m.recovered, m.stored, m.forged, m.scheduled, m.apiLimited, m.apiInvalid, m.apiServed, newStateCollector(cl, stats),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// LeasesRecovered counts n leases taken back for a reason (ReasonExpired,
// ReasonSlaveDead).
func (m *Master) LeasesRecovered(reason string, n int) {
	if m == nil || n <= 0 {
		return
	}
	switch reason {
	case ReasonExpired:
		m.recoveredExpired.Add(float64(n))
	case ReasonSlaveDead:
		m.recoveredDead.Add(float64(n))
	default:
		m.recovered.WithLabelValues(reason).Add(float64(n))
	}
}

// EventsStored counts n stored events of a type (page, exception, ...).
func (m *Master) EventsStored(typ string, n int) {
	if m == nil || n <= 0 {
		return
	}
	c, ok := m.storedTypes.Load(typ)
	if !ok {
		c, _ = m.storedTypes.LoadOrStore(typ, m.stored.WithLabelValues(typ))
	}
	c.(prometheus.Counter).Add(float64(n))
}

// ForgedEvent counts an event the sink refused: its body named another
// crawl or slave than its stream's, or a time ahead (field says which).
// slave is the stream's slave, which the registry and the Redis users
// bound, never a value from the event's body.
func (m *Master) ForgedEvent(slave, field string) {
	if m == nil {
		return
	}
	m.forged.WithLabelValues(slave, field).Inc()
}

// APIServed times a work API request answered for path.
func (m *Master) APIServed(path string, d time.Duration) {
	if m == nil {
		return
	}
	m.apiServed.WithLabelValues(path).Observe(d.Seconds())
}

// APILimited counts a work API request slowed or refused by a token's
// limit; slave is the token's, never a value from the request.
func (m *Master) APILimited(slave, limit string) {
	if m == nil {
		return
	}
	m.apiLimited.WithLabelValues(slave, limit).Inc()
}

// APIInvalid counts a record of a work API slave refused as not about
// a lease its token held (what: page, item, exception, ..., metrics_addr);
// slave is the token's, never a value from the request.
func (m *Master) APIInvalid(slave, what string) {
	if m == nil {
		return
	}
	m.apiInvalid.WithLabelValues(slave, what).Inc()
}

// ScheduledRun counts a scheduled crawl run.
func (m *Master) ScheduledRun() {
	if m == nil {
		return
	}
	m.scheduled.Inc()
}

// Gatherer returns the master's registry for reading (tests, pushing).
func (m *Master) Gatherer() prometheus.Gatherer { return m.reg }

// Handler serves the master's registry in the Prometheus exposition
// formats.
func (m *Master) Handler() http.Handler { return handlerFor(m.reg) }

// stateCollector exports the frontier's Stats read at scrape time.
type stateCollector struct {
	stats func(ctx context.Context) (frontier.Stats, error)

	up, queue, done, seen, alive, rate, dups, lost *prometheus.Desc
	shard                                          *prometheus.Desc
}

func newStateCollector(cl prometheus.Labels, stats func(ctx context.Context) (frontier.Stats, error)) *stateCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	return &stateCollector{
		stats: stats,
		up:    desc("redcrawl_up", "Whether the crawl's state could be read at this scrape (1) or not (0)."),
		queue: desc("redcrawl_queue_depth", "Tasks in a frontier queue.", "queue"),
		done:  desc("redcrawl_pages_done", "Pages done."),
		seen:  desc("redcrawl_seen_urls", "URLs ever seen by the frontier."),
		alive: desc("redcrawl_slaves_alive", "Slaves with a recent heartbeat."),
		rate:  desc("redcrawl_pages_per_second", "Pages per second over the live slaves."),
		dups:  desc("redcrawl_duplicates", "Pages found to be duplicates."),
		lost:  desc("redcrawl_lost_tasks", "Tasks lost."),
		shard: desc("redcrawl_shard_queue_depth", "Tasks in a frontier queue of one shard (a crawl of several shards).", "shard", "queue"),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.queue, c.done, c.seen, c.alive, c.rate, c.dups, c.lost, c.shard} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	if c.stats == nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	snap, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.up, 1)
	for _, q := range []struct {
		name string
		n    int64
	}{
		{"queued", snap.Queued}, {"in_flight", snap.InFlight}, {"retry", snap.Retry},
		{"render_queued", snap.RenderQueued}, {"failed", snap.Failed},
	} {
		gauge(c.queue, float64(q.n), q.name)
	}
	gauge(c.done, float64(snap.Done))
	gauge(c.seen, float64(snap.Seen))
	gauge(c.alive, float64(snap.SlavesAlive))
	gauge(c.rate, snap.PagesPerSec)
	gauge(c.dups, float64(snap.Duplicates))
	gauge(c.lost, float64(snap.Lost))
	for _, s := range snap.Shards {
		k := strconv.Itoa(s.Shard)
		gauge(c.shard, float64(s.Queued), k, "queued")
		gauge(c.shard, float64(s.InFlight), k, "in_flight")
		gauge(c.shard, float64(s.Retry), k, "retry")
	}
}
