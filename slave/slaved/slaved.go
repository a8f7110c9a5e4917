// Package slaved is a redcrawl slave: it joins a crawl, claims leased tasks
// from the shared frontier first-come-first-served, fetches them politely
// and reports pages, links and exceptions back in one round trip per batch.
//
// Components and their stop order (Run): the claimer stops claiming; the
// fetch pool finishes in-flight fetches within slave.shutdown_timeout and
// gives back the leases of the rest; the acker flushes every completion;
// the lease extender stops; the event publisher flushes the proxy events;
// the heartbeater stops; the slave deregisters (a graceful leave); then the
// session pool's watchers, the DNS cache's resolvers and the WARC writer
// close.
//
// The fetch pipeline of one task: robots.txt (shared through Redis), a
// session from the pool (proxy, user agent, cookie jar; bans detected and
// proxies cooled down or retired), a dial through the caching resolver and
// the private-network guard, the body into a document input stream
// (memory, then a temporary file; decompressed size capped), the exchange
// into WARC, the content handler of the media type (HTML: charset decoding
// and link extraction), content dedup by a 64-bit checksum, trap filters
// and scope on the links, and one completion back to the frontier.
package slaved

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
	"github.com/redcrawl/redcrawl/shared/plan"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/slave/banker"
	"github.com/redcrawl/redcrawl/slave/dnscache"
	"github.com/redcrawl/redcrawl/slave/render"
	"github.com/redcrawl/redcrawl/slave/warc"
)

const (
	levelWarn = slog.LevelWarn
	levelInfo = slog.LevelInfo
)

// Backend is the frontier as a slave uses it.
type Backend interface {
	frontier.Frontier
	frontier.Registry
	frontier.Publisher
	frontier.RulesStore
	robotsStore
	// SubscribeRules delivers the versions of rule sets as the master
	// publishes them.
	SubscribeRules(ctx context.Context) (<-chan string, func(), error)
}

// Options tune a slave beyond the config file.
type Options struct {
	ID     string       // slave id; default host-pid-random
	Logger *slog.Logger // default slog.Default()
	// Fetcher replaces the colly fetcher (tests).
	Fetcher Fetcher
	// Backend replaces the Redis frontier built from the config (tests).
	Backend Backend
	// Redis, when set, is used instead of a client dialled from redis.url
	// (embedding, instrumentation); the caller closes it.
	Redis redis.UniversalClient
	// SkipItemStore keeps items out of MySQL: they go only through the
	// OnItem hooks (a slave whose sinks send them elsewhere).
	SkipItemStore bool
	// ExitWhenDone makes Run leave gracefully (and return nil) once the
	// crawl is finished, as its heartbeat tells it: a slave run for one
	// crawl.
	ExitWhenDone bool
	// Clock is the slave's wall clock, what it dates its records with and
	// reads robots.txt records by; nil = time.Now. Tests set one minutes
	// off, as a machine's may be: leases are judged by Redis's clock.
	Clock func() time.Time
}

// now is the slave's wall clock (Options.Clock).
func (s *Slave) now() time.Time {
	if s.opt.Clock != nil {
		return s.opt.Clock()
	}
	return time.Now()
}

// Slave is one crawling process.
type Slave struct {
	cfg       *config.Config
	opt       Options
	id        string
	host      string
	log       *slog.Logger
	rl        *ratelog.Logger
	idGiven   bool          // Options.ID was set: a work API token must be this id's
	plan      *plan.Planner // the crawl's scope, traps and task planning
	canon     *urlx.Canonicalizer
	scope     *urlx.Scope
	traps     *urlx.Traps
	handlers  *Handlers
	hooks     hooks       // OnRequest, OnResponse, OnItem (hooks.go)
	running   atomic.Bool // Run, FetchOne or Parse started: no more hooks
	oneMu     sync.Mutex  // serialises FetchOne and Parse
	throttle  *throttle   // nil unless politeness.autothrottle
	dups      *dupCache
	fetcher   Fetcher
	robots    *robotsCache
	overload  *overload // hosts answering 503 to most requests (overload.go)
	front     Backend
	rdb       redis.UniversalClient
	dns       *dnscache.Resolver // nil with Options.Fetcher
	warc      *warc.Writer       // nil unless storage.warc_dir
	canRender atomic.Bool        // rendering on and Chromium present: render tasks are claimed
	renderMu  sync.Mutex
	renderer  *render.Renderer // started with the first render task
	governor  *banker.Governor // grants connections, tabs and memory (banker's algorithm)

	ruleSet     atomic.Pointer[rules.Set] // the rule set in force, nil = none
	trace       atomic.Pointer[pageTrace] // Parse's note of what the pipeline decided; nil in a crawl
	rulesReload chan struct{}
	acked       chan struct{} // signalled after each acknowledged batch: host slots were freed
	wake        chan struct{} // signalled when the master announces queued work (frontier.WorkMessage)
	// token is the crawler's name in robots meta tags and X-Robots-Tag
	// headers (robots.ProductToken of fetch.user_agent); linkOpt, the HTML
	// handler's link extraction options: both fixed by the config
	token   string
	linkOpt urlx.LinkOptions
	done    chan struct{} // signalled when a completion is queued for the acker (wait)
	// claiming is true while the claim loop runs and is not parked with
	// no room for a lease: it takes the acks with its next claim soon
	// (the acker holds them: newAcker)
	claiming      atomic.Bool
	rulesRejected atomic.Value // version that could not be loaded (string)
	dyn           dynLearner   // "maybe dynamic" outcomes per URL pattern
	pub           *batcher[frontier.Event]

	started  time.Time
	pages    atomic.Int64
	errors   atomic.Int64
	bytes    atomic.Int64
	lostAcks atomic.Int64
	draining atomic.Bool
	// fetchAvg is a moving average of fetch durations (ns), which paces
	// claims while every host with queued work is at its concurrency
	fetchAvg atomic.Int64
	// drain ends the claim loop for a graceful leave an admin asked for
	// (frontier.Control.Drain); set by Run before the heartbeater starts.
	drain      context.CancelFunc
	drainAsked atomic.Bool
	finishSeen atomic.Bool  // the heartbeat said the crawl is finished (ExitWhenDone)
	httpf      *httpFetcher // nil with Options.Fetcher
	// dnsLive is s.dns while Run's fetcher is up, for HostsKnown (read
	// from the memory limit's goroutine)
	dnsLive atomic.Pointer[dnscache.Resolver]

	met         *metrics.Slave // Prometheus metrics, served at slave.metrics_listen
	metricsAddr atomic.Value   // bound host:port of /metrics (string), sent in heartbeats

	// beatSent is when the last heartbeat that went through was sent
	// (monotonic; nil before the first): mayFetch
	beatSent atomic.Pointer[time.Time]
	// beatResumed is when the last heartbeat that went through after a
	// silence of three quarters of master.dead_after or more came back
	// (monotonic; nil before any): the master may have declared the slave
	// dead in that silence and taken back every lease claimed before
	// (mayFetch, beatWent)
	beatResumed atomic.Pointer[time.Time]

	mu     sync.Mutex
	leases map[string]heldLease // in flight, by URL; its size is the slave's in-flight count
}

// HostsKnown returns how many hosts the slave's DNS cache holds now, the
// hosts it met lately (answers and errors): 0 before Run started its
// fetcher or with Options.Fetcher. What a slave keeps per host (a DNS
// entry, a session, connections) grows with them: its memory limit gives
// a broad crawl's slave more room by it (memlimit.Options.Hosts).
func (s *Slave) HostsKnown() int {
	r := s.dnsLive.Load()
	if r == nil {
		return 0
	}
	st := r.Stats()
	return st.Positive + st.Negative
}

// New builds a slave from a validated config. It does not connect yet.
func New(cfg *config.Config, opt Options) (*Slave, error) {
	cfg = cfg.SlaveProfile()
	planner, err := plan.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("new slave: %w", err)
	}
	host, _ := os.Hostname()
	idGiven := opt.ID != ""
	if opt.ID == "" {
		opt.ID = defaultID(host, os.Getpid(), rand.IntN(1<<16))
	}
	if err := config.CheckSlaveID(opt.ID); err != nil {
		return nil, fmt.Errorf("new slave: %w", err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	log := opt.Logger.With("slave", opt.ID)
	s := &Slave{cfg: cfg, opt: opt, id: opt.ID, idGiven: idGiven, host: host, log: log,
		rl: ratelog.New(log, 30*time.Second), plan: planner, canon: planner.Canonicalizer(), scope: planner.Scope(),
		traps:    planner.Traps(),
		handlers: NewHandlers(), dups: newDupCache(1 << 16), overload: newOverload(),
		leases: map[string]heldLease{}, rulesReload: make(chan struct{}, 1), acked: make(chan struct{}, 1),
		wake: make(chan struct{}, 1), done: make(chan struct{}, 1),
		token: robots.ProductToken(cfg.Fetch.UserAgent), linkOpt: linkOptions(cfg)}
	s.rulesRejected.Store("")
	s.met = metrics.NewSlave(cfg.Crawl.Name, s.id)
	if s.governor, err = newGovernor(cfg.Slave.Concurrency, cfg.Render.Tabs, cfg.Render.MemoryBytes); err != nil {
		return nil, fmt.Errorf("new slave: %w", err)
	}
	s.pub = newPublisher(s)
	html := htmlHandler{s: s}
	for _, mt := range []string{"text/html", "application/xhtml+xml"} {
		if err := s.handlers.Register(mt, html); err != nil {
			return nil, err
		}
	}
	if cfg.Politeness.AutoThrottle {
		s.throttle = newThrottle(cfg.Politeness.Delay, cfg.Politeness.AutoThrottleMaxDelay, cfg.Politeness.AutoThrottleTarget)
	}
	return s, nil
}

// Handlers is the slave's registry of content handlers by media type
// (the fallback "*/*" stores documents unparsed); register more before
// Run.
func (s *Slave) Handlers() *Handlers { return s.handlers }

// ID returns the slave's id.
func (s *Slave) ID() string { return s.id }

// Run crawls until ctx is cancelled, then leaves gracefully. It returns
// nil after a graceful leave.
func (s *Slave) Run(ctx context.Context) error {
	s.running.Store(true) // no more hooks
	s.started = time.Now()
	// an admin's drain ends the claim loop as a signal would
	ctx, s.drain = context.WithCancel(ctx)
	defer s.drain()
	// fetchCtx outlives ctx by up to the shutdown timeout: in-flight fetches
	// may finish after the signal.
	fetchCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	// bg carries the components that must outlive the fetches (acker,
	// extender, heartbeater); it is cancelled last.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()

	closeBackend, err := s.openBackend(ctx)
	if err != nil {
		return err
	}
	if closeBackend == nil {
		return nil // cancelled before the frontier came up: nothing to leave
	}
	defer closeBackend()
	stopMetrics := s.serveMetrics(context.WithoutCancel(ctx))
	defer stopMetrics()
	s.fetcher = s.opt.Fetcher
	var hf *httpFetcher
	if s.fetcher == nil {
		var err error
		s.dns, err = dnscache.New(dnscache.Options{Server: s.cfg.DNS.Server, MinTTL: s.cfg.DNS.MinTTL,
			MaxTTL: s.cfg.DNS.MaxTTL, NegativeTTL: s.cfg.DNS.NegativeTTL, SlowThreshold: s.cfg.DNS.SlowThreshold,
			Timeout: s.cfg.DNS.Timeout, MaxEntries: s.cfg.DNS.CacheSize, MaxWorkers: s.cfg.DNS.PrefetchWorkers,
			Logger: s.log})
		if err != nil {
			return fmt.Errorf("slave: dns cache: %w", err)
		}
		defer s.dns.Close()
		s.dnsLive.Store(s.dns)
		defer s.dnsLive.Store(nil)
		sessCtx, stopSessions := context.WithCancel(bg)
		defer stopSessions()
		if hf, err = s.newHTTPFetcher(sessCtx, s.dns); err != nil {
			return fmt.Errorf("slave: %w", err)
		}
		s.fetcher, s.httpf = hf, hf
		defer func() { stopSessions(); hf.close() }()
	}
	s.checkRenderer()
	defer s.closeRenderer()
	if err := s.loadRules(ctx); err != nil {
		s.log.Warn("load rules", "err", err)
	}
	rulesCtx, stopRules := context.WithCancel(bg)
	var rulesWG sync.WaitGroup
	rulesWG.Add(1)
	go func() { defer rulesWG.Done(); s.rulesLoop(rulesCtx) }()
	defer func() { stopRules(); rulesWG.Wait() }()
	if s.cfg.Storage.WARCDir != "" {
		w, err := warc.NewWriter(warc.Options{Dir: s.cfg.Storage.WARCDir, Prefix: s.id,
			MaxFileBytes: s.cfg.Storage.WARCMaxFileBytes, Software: "redcrawl"})
		if err != nil {
			return fmt.Errorf("slave: storage.warc_dir: %w", err)
		}
		s.warc = w
		defer func() {
			if err := w.Close(); err != nil {
				s.log.Error("close warc file", "err", err)
			}
		}()
	}
	s.robots = newRobotsCache(s.front, s.cfg.Politeness.RobotsTTL, s.now)

	pubCtx, stopPub := context.WithCancel(bg)
	defer stopPub()
	var pubWG sync.WaitGroup
	pubWG.Add(1)
	go func() { defer pubWG.Done(); s.pub.run(pubCtx) }()

	s.log.Info("slave joining", "crawl", s.cfg.Crawl.Name, "concurrency", s.cfg.Slave.Concurrency)
	// the heartbeater stops before the leave: a heartbeat after it would
	// register the slave again (and record a second join)
	hbCtx, stopHB := context.WithCancel(bg)
	defer stopHB()
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() { defer hbWG.Done(); s.heartbeater(hbCtx) }()
	hbWG.Add(1)
	go func() { defer hbWG.Done(); s.progress(hbCtx) }()

	ackCtx, stopAcks := context.WithCancel(bg)
	defer stopAcks()
	acks := newAcker(s)
	var ackWG sync.WaitGroup
	ackWG.Add(1)
	go func() { defer ackWG.Done(); acks.run(ackCtx) }()

	extCtx, stopExt := context.WithCancel(bg)
	defer stopExt()
	var extWG sync.WaitGroup
	extWG.Add(1)
	go func() { defer extWG.Done(); s.extender(extCtx) }()

	// claimer + fetch pool
	var pool sync.WaitGroup
	s.claimLoop(ctx, fetchCtx, &pool, acks)

	// graceful leave: finish in-flight fetches within the bound
	s.draining.Store(true)
	s.log.Info("slave leaving", "in_flight", s.inFlight())
	done := make(chan struct{})
	go func() { pool.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.Slave.ShutdownTimeout):
		s.log.Warn("shutdown timeout: giving back unfinished leases", "in_flight", s.inFlight())
		hardStop()
		<-done
	}
	// flush completions; if Redis stays down their leases expire and the
	// master requeues them
	acks.close()
	flushed := make(chan struct{})
	go func() { ackWG.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(s.cfg.Slave.ShutdownTimeout + 5*time.Second):
		s.log.Warn("could not flush completions; their leases will expire")
		stopAcks()
		<-flushed
	}
	stopExt()
	extWG.Wait()
	s.pub.close()
	pubDone := make(chan struct{})
	go func() { pubWG.Wait(); close(pubDone) }()
	select {
	case <-pubDone:
	case <-time.After(5 * time.Second):
		s.log.Warn("could not publish every proxy event", "pending", s.pub.pending())
		stopPub()
		<-pubDone
	}
	// no heartbeat in flight when the leave deregisters the slave
	stopHB()
	hbWG.Wait()
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.front.Leave(leaveCtx, s.id, "graceful leave"); err != nil {
		s.log.Warn("deregister", "err", err)
	}
	stopBG()
	stopRules()
	s.log.Info("slave left", "pages", s.pages.Load(), "errors", s.errors.Load(), "lost_acks", s.lostAcks.Load())
	return nil
}

// defaultID is the slave id when none is given: host-pid-random, with the
// host name cut to what a slave id may hold (config.CheckSlaveID).
func defaultID(host string, pid, random int) string {
	suffix := fmt.Sprintf("-%d-%04x", pid, random)
	clean := []byte(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '_'
	}, host))
	if n := 64 - len(suffix); len(clean) > n {
		clean = clean[:n]
	}
	if len(clean) == 0 {
		clean = []byte("slave")
	}
	return string(clean) + suffix
}
