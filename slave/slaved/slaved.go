// Package slaved is a redcrawl slave: it joins a crawl, claims leased tasks
// from the shared frontier first-come-first-served, fetches them politely
// and reports pages, links and exceptions back in one round trip per batch.
//
// Components and their stop order (Run): the claimer stops claiming; the
// fetch pool finishes in-flight fetches within slave.shutdown_timeout and
// gives back the leases of the rest; the acker flushes every completion;
// the lease extender stops; the event publisher flushes the proxy events;
// the slave deregisters (a graceful leave); the heartbeater stops; then the
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
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/banker"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/dnscache"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/render"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/shared/warc"
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
	frontier.RenderClaimer
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
}

// Slave is one crawling process.
type Slave struct {
	cfg       *config.Config
	opt       Options
	id        string
	host      string
	log       *slog.Logger
	rl        *ratelog.Logger
	canon     *urlx.Canonicalizer
	scope     *urlx.Scope
	traps     *urlx.Traps
	handlers  *Handlers
	hooks     hooks       // OnRequest, OnResponse, OnItem (hooks.go)
	running   atomic.Bool // Run or FetchOne started: no more hooks
	oneMu     sync.Mutex  // serialises FetchOne
	throttle  *throttle   // nil unless politeness.autothrottle
	dups      *dupCache
	fetcher   Fetcher
	robots    *robotsCache
	front     Backend
	rdb       redis.UniversalClient
	dns       *dnscache.Resolver // nil with Options.Fetcher
	warc      *warc.Writer       // nil unless storage.warc_dir
	canRender atomic.Bool        // rendering on and Chromium present: render tasks are claimed
	renderMu  sync.Mutex
	renderer  *render.Renderer // started with the first render task
	governor  *banker.Governor // grants connections, tabs and memory (banker's algorithm)

	ruleSet     atomic.Pointer[rules.Set] // the rule set in force, nil = none
	rulesReload chan struct{}
	acked       chan struct{} // signalled after each acknowledged batch: host slots were freed
	wake        chan struct{} // signalled when the master announces queued work (frontier.WorkMessage)
	// token is the crawler's name in robots meta tags and X-Robots-Tag
	// headers (robots.ProductToken of fetch.user_agent); linkOpt, the HTML
	// handler's link extraction options: both fixed by the config
	token         string
	linkOpt       urlx.LinkOptions
	done          chan struct{} // signalled when a completion is queued for the acker (wait)
	rulesRejected atomic.Value  // version that could not be loaded (string)
	dyn           dynLearner    // "maybe dynamic" outcomes per URL pattern
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
	httpf      *httpFetcher // nil with Options.Fetcher

	met         *metrics.Slave // Prometheus metrics, served at slave.metrics_listen
	metricsAddr atomic.Value   // bound host:port of /metrics (string), sent in heartbeats

	mu     sync.Mutex
	leases map[string]frontier.Lease // in flight, by URL; its size is the slave's in-flight count
}

// New builds a slave from a validated config. It does not connect yet.
func New(cfg *config.Config, opt Options) (*Slave, error) {
	cfg = cfg.SlaveProfile()
	canon, err := cfg.Canonicalizer()
	if err != nil {
		return nil, fmt.Errorf("new slave: %w", err)
	}
	scope, err := urlx.NewScope(cfg.Crawl.AllowHosts, cfg.Crawl.Allow, cfg.Crawl.Deny, cfg.Crawl.MaxDepth)
	if err != nil {
		return nil, fmt.Errorf("new slave: %w", err)
	}
	traps, err := urlx.NewTraps(urlx.TrapOptions{MaxURLLength: cfg.Crawl.MaxURLLength,
		MaxPathRepeat: cfg.Crawl.MaxPathRepeat, MaxPathSegments: cfg.Crawl.MaxPathSegments,
		MaxQueryParams: cfg.Crawl.MaxQueryParams})
	if err != nil {
		return nil, fmt.Errorf("new slave: %w", err)
	}
	host, _ := os.Hostname()
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
	s := &Slave{cfg: cfg, opt: opt, id: opt.ID, host: host, log: log,
		rl: ratelog.New(log, 30*time.Second), canon: canon, scope: scope, traps: traps,
		handlers: NewHandlers(), dups: newDupCache(1 << 16),
		leases: map[string]frontier.Lease{}, rulesReload: make(chan struct{}, 1), acked: make(chan struct{}, 1),
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

	if s.opt.Backend != nil {
		s.front = s.opt.Backend
	} else {
		if s.opt.Redis != nil {
			s.rdb = s.opt.Redis
		} else {
			rdb, err := s.cfg.NewRedisClient()
			if err != nil {
				return fmt.Errorf("slave: %w", err)
			}
			s.rdb = rdb
			defer s.rdb.Close()
		}
		var f *frontier.Redis
		err := retry.Until(ctx, s.rl, "redis", func() error {
			var err error
			opt := frontier.OptionsFromConfig(s.cfg)
			opt.Slave = s.id
			f, err = frontier.NewRedis(ctx, s.rdb, opt)
			return err
		})
		if err != nil {
			return nil // cancelled before Redis came up: nothing to leave
		}
		if d := f.SettingsDiffer(); len(d) > 0 {
			s.log.Warn("this slave's config differs from the crawl's settings, which its master wrote; the crawl's apply",
				"settings", strings.Join(d, ","))
		}
		s.front = f
	}
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
	s.robots = newRobotsCache(s.front, s.cfg.Politeness.RobotsTTL)

	pubCtx, stopPub := context.WithCancel(bg)
	defer stopPub()
	var pubWG sync.WaitGroup
	pubWG.Add(1)
	go func() { defer pubWG.Done(); s.pub.run(pubCtx) }()

	s.log.Info("slave joining", "crawl", s.cfg.Crawl.Name, "concurrency", s.cfg.Slave.Concurrency)
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() { defer hbWG.Done(); s.heartbeater(bg) }()
	hbWG.Add(1)
	go func() { defer hbWG.Done(); s.progress(bg) }()

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
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.front.Leave(leaveCtx, s.id, "graceful leave"); err != nil {
		s.log.Warn("deregister", "err", err)
	}
	stopBG()
	hbWG.Wait()
	stopRules()
	s.log.Info("slave left", "pages", s.pages.Load(), "errors", s.errors.Load(), "lost_acks", s.lostAcks.Load())
	return nil
}

// claimLoop claims as many tasks as there are free workers and starts a
// fetch for each, until ctx is cancelled.
func (s *Slave) claimLoop(ctx, fetchCtx context.Context, pool *sync.WaitGroup, acks *batcher[frontier.Completion]) {
	conc := s.cfg.Slave.Concurrency
	free := make(chan struct{}, conc)
	for range conc {
		free <- struct{}{}
	}
	fail := 0
	// acks go with the claims (CompleteClaim) when the frontier can
	cc, _ := s.front.(frontier.CompleteClaimer)
	for ctx.Err() == nil {
		// wait for at least one free worker
		select {
		case <-ctx.Done():
			return
		case <-free:
		}
		n := 1 + takeFree(free, conc-1)
		if n < max(2, conc/4) {
			if cc != nil {
				// few workers are free: give others a moment to finish,
				// so that one script acks and claims for several
				retry.Sleep(ctx, claimGather)
			} else {
				// their pages' host slots open in Redis only when their
				// acks land: wait for the next ack (at most claimGather)
				drainSignal(s.acked)
				s.wait(ctx, claimGather, nil)
			}
			n += takeFree(free, conc-n)
		}
		claimStart := time.Now()
		res, err := s.claim(ctx, cc, acks, n)
		s.met.ObserveClaim(time.Since(claimStart))
		leases, wait, busy := res.Leases, res.Wait, res.Busy
		s.met.Claimed(len(leases))
		if err != nil {
			for range n {
				free <- struct{}{}
			}
			if ctx.Err() != nil {
				return
			}
			fail++
			s.rl.Log(ctx, levelWarn, "claim", "claim failed; pausing", "err", err)
			retry.Sleep(ctx, retry.Backoff(fail))
			continue
		}
		if fail > 0 {
			s.log.Info("claiming again", "after_failures", fail)
			s.rl.Reset("claim")
			fail = 0
		}
		if res.RulesVersion != "" {
			s.rulesSeen(res.RulesVersion)
		}
		for range n - len(leases) {
			free <- struct{}{}
		}
		if s.dns != nil && len(leases) > 1 {
			// resolve the other tasks' hosts while the first ones fetch
			hosts := make([]string, 0, len(leases))
			for _, l := range leases {
				if u, err := url.Parse(l.URL); err == nil {
					hosts = append(hosts, u.Hostname())
				}
			}
			s.dns.Prefetch(hosts)
		}
		for _, l := range leases {
			s.track(l, true)
			pool.Add(1)
			go func() {
				defer pool.Done()
				defer func() { free <- struct{}{} }()
				c := s.process(fetchCtx, l)
				if c.Outcome == frontier.Done || c.Outcome == frontier.Fail {
					s.pages.Add(1)
					s.met.Page(c.Outcome == frontier.Done)
				}
				acks.add(c)
			}()
		}
		if len(leases) == 0 || (len(leases) < n && wait != 0) {
			// nothing (more) ready: the claim took every host it could, so
			// claiming again at once would find none (an empty script
			// call); sleep until the earliest host's time, spread a little
			// so slaves do not all wake at once
			d := s.cfg.Slave.IdlePoll
			if wait >= 0 && wait < d {
				d = wait
			}
			if busy {
				// every host with queued work is at its concurrency, or
				// requests are in flight whose acks bring links: a slot
				// frees, or work comes, when any slave's lease ends, about
				// one fetch time from now; look again after half of one
				// (busyPollFirst before this slave has timed a fetch)
				half := time.Duration(s.fetchAvg.Load() / 2)
				if half <= 0 {
					half = busyPollFirst
				}
				d = min(d, max(2*time.Millisecond, half))
			}
			d += time.Duration(rand.Int64N(int64(d)/4 + int64(time.Millisecond)))
			if cc != nil {
				// ... or until one of this slave's pages is done: its ack
				// goes with the next claim (one script for both)
				s.wait(ctx, d, s.done)
			} else {
				// ... or until one of this slave's acks frees a host slot
				s.wait(ctx, d, nil)
			}
		}
	}
}

// claim leases up to n tasks. With cc, the finished pages' completions
// waiting for the acker go with the claim: the host slots they free are
// this slave's to claim in the same script, before another slave's claim
// finds them, and one script serves both; on an error they go back to the
// acker.
func (s *Slave) claim(ctx context.Context, cc frontier.CompleteClaimer, acks *batcher[frontier.Completion], n int) (frontier.ClaimResult, error) {
	opts := frontier.ClaimOptions{Render: s.canRender.Load()}
	var cs []frontier.Completion
	if cc != nil {
		cs = acks.take(maxAckBatch)
	}
	if len(cs) == 0 {
		return s.front.ClaimWaitOpts(ctx, s.id, n, opts)
	}
	start := time.Now()
	// not cut short by a shutdown: the acks would be sent twice
	acked, res, err := cc.CompleteClaim(context.WithoutCancel(ctx), s.id, cs, n, opts)
	if err != nil {
		acks.putBack(cs)
		return res, err
	}
	s.met.ObserveAck(time.Since(start))
	s.acksDone(cs, acked)
	return res, nil
}

// busyPollFirst is how soon a slave looks again when work may come from
// leases in flight (ClaimResult.Busy) before it has timed a fetch of its own.
const busyPollFirst = 20 * time.Millisecond

// claimGather bounds how long the claim loop waits, when few workers are
// free, for more to finish (acks and claim in one script) or, with a
// frontier that cannot do both at once, for the next ack (claimLoop).
const claimGather = time.Millisecond

// busyGather bounds how long a claim loop that found no free host slot
// gathers its pages' acks before it acks and claims (wait); the acker
// holds a small batch longer (ackHold), so the claim carries them.
const busyGather = 10 * time.Millisecond

// takeFree takes up to n more tokens from free without waiting and returns
// how many it took.
func takeFree(free chan struct{}, n int) int {
	for k := range n {
		select {
		case <-free:
		default:
			return k
		}
	}
	return n
}

// wakeAll makes the next claim ask every shard (frontier.Redis.WakeAll).
func (s *Slave) wakeAll() {
	if w, ok := s.front.(interface{ WakeAll() }); ok {
		w.WakeAll()
	}
}

// signal sets a signal channel of capacity one, if not set already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// wait waits up to d for one of this slave's acks to land (s.acked), for
// the master to announce queued work (s.wake), for done (nil: never), or
// for ctx to end. The claim loop passes s.done, signalled when one of its
// pages is done (its completion queued), when its acks go with its claims:
// a page done ends the wait after a gather time, a quarter of the average
// fetch (busyGather bounds it), so that the claim that follows acks the
// pages done meanwhile too: while every host with work is at its
// concurrency, only acks free slots, and one script per gather time acks
// and claims them, instead of a complete script per ack batch and claims
// that find nothing.
func (s *Slave) wait(ctx context.Context, d time.Duration, done <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
		return
	case <-s.acked:
		return
	case <-s.wake:
		// work was announced: the next claim asks every shard, also one
		// that a claim under way at the announcement marked quiet
		s.wakeAll()
		return
	case <-done:
	}
	g := min(max(claimGather, time.Duration(s.fetchAvg.Load()/4)), busyGather)
	retry.Sleep(ctx, g)
}

// drainSignal empties a signal channel of capacity one.
func drainSignal(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

func (s *Slave) track(l frontier.Lease, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		s.leases[l.URL] = l
	} else {
		delete(s.leases, l.URL)
	}
	s.met.SetInFlight(len(s.leases))
}

func (s *Slave) inFlight() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.leases))
}

func (s *Slave) held() []frontier.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]frontier.Lease, 0, len(s.leases))
	for _, l := range s.leases {
		out = append(out, l)
	}
	return out
}

// extender pushes the deadlines of leases held for more than a third of
// the lease duration, so long fetches are not taken back.
func (s *Slave) extender(ctx context.Context) {
	every := s.cfg.Lease.Duration / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var old []frontier.Lease
		for _, l := range s.held() {
			if time.Since(l.LeasedAt) > every {
				old = append(old, l)
			}
		}
		if len(old) == 0 {
			continue
		}
		held, err := s.front.Extend(ctx, s.id, old)
		if err != nil {
			s.rl.Log(ctx, levelWarn, "extend", "extend leases", "err", err)
			continue
		}
		for i, ok := range held {
			if !ok {
				s.log.Debug("lease lost while fetching", "url", old[i].URL)
			}
		}
	}
}

// heartbeater registers the slave and reports its counters.
func (s *Slave) heartbeater(ctx context.Context) {
	t := time.NewTicker(s.cfg.Slave.HeartbeatInterval)
	defer t.Stop()
	var lastPages int64
	lastAt := time.Now()
	rate := 0.0
	failing := false
	for {
		now := time.Now()
		pages := s.pages.Load()
		if dt := now.Sub(lastAt).Seconds(); dt > 0.5 {
			inst := float64(pages-lastPages) / dt
			rate = 0.5*rate + 0.5*inst
			lastPages, lastAt = pages, now
		}
		state := "running"
		if s.draining.Load() {
			state = "draining"
		}
		hb := events.Heartbeat{Crawl: s.cfg.Crawl.Name, Slave: s.id, Host: s.host, PID: os.Getpid(),
			At: now.UnixMilli(), StartedAt: s.started.UnixMilli(), Pages: pages, Errors: s.errors.Load(),
			InFlight: s.inFlight(), Bytes: s.bytes.Load(), RSS: rss(), PagesPerSec: rate,
			Concurrency: s.cfg.Slave.Concurrency, State: state, MetricsAddr: s.metricsAddress(),
			Render: s.canRender.Load(), RulesVersion: s.rulesVersion()}
		if err := s.heartbeat(ctx, hb); err != nil {
			if ctx.Err() != nil {
				return
			}
			failing = true
			s.rl.Log(ctx, levelWarn, "heartbeat", "heartbeat failed", "err", err)
		} else if failing {
			failing = false
			s.rl.Reset("heartbeat")
			s.log.Info("heartbeat back")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// controller is a Backend that tells a slave the admin's requests with
// each heartbeat (frontier.Redis).
type controller interface {
	HeartbeatControl(ctx context.Context, hb events.Heartbeat) (frontier.Control, error)
}

// heartbeat sends one heartbeat and carries out the admin's requests it
// brings back: drain (finish the leases held, then leave) and retired
// proxies.
func (s *Slave) heartbeat(ctx context.Context, hb events.Heartbeat) error {
	c, ok := s.front.(controller)
	if !ok {
		return s.front.Heartbeat(ctx, hb)
	}
	ctl, err := c.HeartbeatControl(ctx, hb)
	if err != nil {
		return err
	}
	if ctl.Drain && !s.drainAsked.Swap(true) {
		s.log.Info("drain asked by an admin: finishing the leases held, then leaving", "in_flight", s.inFlight())
		s.draining.Store(true)
		s.drain()
	}
	if s.httpf != nil && len(ctl.RetiredProxies) > 0 {
		s.httpf.retire(ctl.RetiredProxies)
	}
	return nil
}

// rss returns the resident set size in bytes (Linux), else the Go heap.
func rss() int64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return pages * int64(os.Getpagesize())
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.Sys)
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
