// Package masterd is the redcrawl master: it applies the MySQL migrations,
// takes back leases that expired or belonged to dead slaves, watches slave
// heartbeats, drains the crawl's event stream into MySQL and decides when
// the crawl is finished.
//
// Components (each a small type run with a context): recoverer, monitor,
// sink, finisher, rules watcher, scheduler (recrawls) and the admin HTTP
// server (dashboard, JSON API, /metrics). Stop order (Run): a master that
// exits when the crawl is finished first keeps the work API up until its
// slaves have been told (lingerForAPISlaves, bounded); then the admin and work
// API servers (the API's watches answered first), finisher, recoverer,
// monitor, rules watcher and scheduler stop; the sink then drains what is
// left in the stream (bounded); MySQL and Redis connections close last.
package masterd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/secret"
)

// Options tune a master beyond the config file.
type Options struct {
	// ExitWhenDone makes Run return nil once the crawl is finished and
	// every event is in MySQL.
	ExitWhenDone bool
	Logger       *slog.Logger
	// ProgressEvery is how often Run logs a progress line; 0 = 10s.
	ProgressEvery time.Duration
	// Redis, when set, is used instead of a client dialled from redis.url
	// (embedding, instrumentation, a Redis Cluster client); the caller
	// closes it.
	Redis redis.UniversalClient
	// APIReady, when set, is called with the work API's address once it
	// listens.
	APIReady func(addr string)
	// APIServed, when set, is told of every work API request answered
	// (but the watches): its path and the time taken (the bench, bin/bench).
	APIServed func(path string, d time.Duration)
	// Finished, when set, is called once the crawl is declared finished,
	// before a master that exits when done keeps its work API up for the
	// slaves (the bench reads its CPU figures there and stops its
	// slaves).
	Finished func()
	// AdminReady, when set, is called with the admin server's address once
	// it listens (admin.listen may pick a free port with :0).
	AdminReady func(addr string)
	// ID names this master among the crawl's masters (its share of the
	// shards, its stream consumer); "" = master-<host name>.
	ID string
	// Summary, when set, is written the crawl's stats (CrawlStats) when
	// Run ends with the crawl finished and every event stored.
	Summary io.Writer
}

// Master is the crawl's supervisor.
type Master struct {
	cfg   *config.Config
	opt   Options
	log   *slog.Logger
	rl    *ratelog.Logger
	rdb   redis.UniversalClient
	front *frontier.Redis
	store *store.Store
	id    string // Options.ID
	// sdAllow is admin.sd_allow: where service discovery may point
	// Prometheus
	sdAllow []netip.Prefix
}

// New builds a master from a validated config. It does not connect yet.
func New(cfg *config.Config, opt Options) *Master {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.ProgressEvery == 0 {
		opt.ProgressEvery = 10 * time.Second
	}
	log := opt.Logger.With("crawl", cfg.Crawl.Name)
	id := opt.ID
	if id == "" {
		id = consumerName()
	}
	return &Master{cfg: cfg, opt: opt, log: log, rl: ratelog.New(log, 30*time.Second), id: id,
		sdAllow: cfg.SDAllowPrefixes()}
}

// Run supervises the crawl until ctx is cancelled or, with ExitWhenDone,
// until the crawl is finished.
func (m *Master) Run(ctx context.Context) error {
	if err := m.connect(ctx); err != nil {
		m.close() // what connected before the error
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer m.close()

	compCtx, stopComps := context.WithCancel(ctx)
	defer stopComps()
	sinkCtx, stopSink := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSink()

	own := &owner{front: m.front, id: m.id, lease: m.cfg.Master.ShardLease, log: m.log, rl: m.rl}
	if err := retry.Until(ctx, m.rl, "redis", func() error { return own.once(ctx) }); err != nil {
		return nil
	}
	defer func() {
		if err := m.front.Disown(context.WithoutCancel(ctx), m.id); err != nil {
			m.log.Warn("give back shards", "err", err)
		}
	}()
	snk := &sink{stream: m.front.Stream("master"), crawl: m.cfg.Crawl.Name, store: m.store,
		batch: m.cfg.Master.SinkBatch, consumer: m.id, log: m.log, rl: m.rl}
	snk.stream.SetOwned(own.owned)
	if err := retry.Until(ctx, m.rl, "redis", func() error { return snk.stream.EnsureGroup(ctx) }); err != nil {
		return nil
	}
	if err := retry.Until(ctx, m.rl, "redis", func() error { return m.applyLimits(ctx) }); err != nil {
		return nil
	}
	rec := &recoverer{front: m.front, owned: own.owned, every: m.cfg.Master.RecoverInterval, log: m.log, rl: m.rl}
	mon := &monitor{front: m.front, owned: own.owned, stream: snk.stream, crawl: m.cfg.Crawl.Name,
		deadAfter: m.cfg.Master.DeadAfter, sampleEvery: m.cfg.Master.HeartbeatSample, log: m.log, rl: m.rl}
	fin := &finisher{front: m.front, owned: own.owned, quiescence: m.cfg.Master.Quiescence, log: m.log, rl: m.rl,
		progressEvery: m.opt.ProgressEvery, finished: make(chan struct{}),
		limited: LimitsOf(m.cfg) != (frontier.Limits{}), maxDuration: m.cfg.Crawl.MaxDuration, start: time.Now()}

	met := metrics.NewMaster(m.cfg.Crawl.Name, m.front.Stats)
	rec.recovered, mon.recovered = met.LeasesRecovered, met.LeasesRecovered
	snk.forged = met.ForgedEvent
	snk.stored = func(batch []events.Envelope) {
		n := map[events.Type]int{}
		for _, e := range batch {
			n[e.Type]++
		}
		for t, c := range n {
			met.EventsStored(string(t), c)
		}
	}

	lib := &librarian{rdb: m.rdb, every: libraryCheck, log: m.log, rl: m.rl}
	comps := []interface{ run(context.Context) }{own, rec, mon, fin, lib}
	var rw *rulesWatcher
	if m.cfg.Rules.Dir != "" {
		rw = &rulesWatcher{dir: m.cfg.Rules.Dir, every: m.cfg.Rules.Poll, crawl: m.cfg.Crawl.Name,
			opt: rules.LoadOptions{ProxyPools: m.cfg.ProxyPoolNames()}, front: m.front, log: m.log, rl: m.rl}
		rw.check(ctx) // publish before the slaves claim much
		comps = append(comps, rw)
	}
	sched := &scheduler{crawl: m.cfg.Crawl.Name, master: m.id, schedules: m.schedulesFunc(rw),
		store: m.store, seed: reseederFunc(func(ctx context.Context, name string) (int, error) {
			var set *rules.Set
			if rw != nil {
				set = rw.snapshot().set
			}
			return recrawl(ctx, m.cfg, m.front, m.store, set, name)
		}), now: time.Now, log: m.log, rl: m.rl, onFire: met.ScheduledRun}
	comps = append(comps, sched)
	if m.cfg.Admin.Listen != "" {
		be := &backend{cfg: m.cfg, front: m.front, store: m.store, rdb: m.rdb, schedules: func() []admin.ScheduleView {
			vs := sched.Views()
			out := make([]admin.ScheduleView, len(vs))
			for i, v := range vs {
				out[i] = admin.ScheduleView(v)
			}
			return out
		}}
		if rw != nil {
			be.rules = rw.snapshot
		}
		srv, err := m.adminServer(be, met)
		if err != nil {
			return err
		}
		comps = append(comps, srv)
	}

	var apiSrv *workapi.Server
	if m.cfg.API.Listen != "" {
		match := func() *rules.Set { return nil }
		if rw != nil {
			match = func() *rules.Set { return rw.snapshot().set }
		}
		a, err := m.apiServer(match, met)
		if err != nil {
			return err
		}
		comps = append(comps, a)
		apiSrv = a.api
	}

	var compWG, sinkWG sync.WaitGroup
	sinkWG.Add(1)
	go func() { defer sinkWG.Done(); snk.run(sinkCtx) }()
	for _, c := range comps {
		compWG.Add(1)
		go func() { defer compWG.Done(); c.run(compCtx) }()
	}
	m.log.Info("master running", "redis", secret.URL(m.cfg.Redis.URL), "exit_when_done", m.opt.ExitWhenDone)

	select {
	case <-ctx.Done():
	case <-fin.finished:
		if m.opt.Finished != nil {
			m.opt.Finished()
		}
		if !m.opt.ExitWhenDone {
			<-ctx.Done()
		} else if apiSrv != nil {
			m.lingerForAPISlaves(ctx, apiSrv)
		}
	}
	stopComps()
	compWG.Wait()
	// let the sink store what is left, then stop it
	if err := snk.drain(ctx, 30*time.Second); err != nil {
		m.log.Warn("event stream not fully drained; the next master run stores the rest", "err", err)
	}
	stopSink()
	sinkWG.Wait()
	if st, err := m.front.Stats(context.WithoutCancel(ctx)); err == nil {
		m.log.Info("master stopped", "done", st.Done, "failed", st.Failed, "queued", st.Queued,
			"in_flight", st.InFlight, "lost", st.Lost, "finished", st.Finished)
		m.writeSummary(context.WithoutCancel(ctx), st)
	}
	return nil
}

// applyLimits writes the config's limits (ApplyLimits) and says what
// they do to the crawl.
func (m *Master) applyLimits(ctx context.Context) error {
	reached, reopened, err := ApplyLimits(ctx, m.cfg, m.front, m.store)
	if err != nil {
		return err
	}
	if reopened {
		m.log.Info("crawl reopened: its new limits no longer end it")
	}
	if reached != "" {
		m.log.Info("the crawl is at a limit already: it finishes once no page is in flight", "limit", reached)
	}
	return nil
}

// lingerForAPISlaves keeps a finished master (ExitWhenDone) serving the
// work API until every slave of it still beating has been answered that
// the crawl is finished (api.Untold), or none is left, for at most
// master.dead_after: a slave of the API learns it from a heartbeat's
// answer (and leaves, with --exit-when-done), which it could not get
// from a master already gone, and its heartbeats follow its own config's
// slave.heartbeat_interval, not this master's; a direct slave reads it in
// Redis whenever it looks.
func (m *Master) lingerForAPISlaves(ctx context.Context, api *workapi.Server) {
	grace := m.cfg.Master.DeadAfter
	m.log.Info("crawl finished: the work API stays up until its slaves are told", "at_most", grace)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if api.Untold(grace) == 0 {
			return
		}
		if st, err := m.front.Stats(ctx); err == nil && st.SlavesAlive == 0 {
			return
		}
		if !retry.Sleep(ctx, min(lingerPoll, time.Until(deadline))) {
			return
		}
	}
}

// lingerPoll is how often lingerForAPISlaves looks for slaves still there.
const lingerPoll = 200 * time.Millisecond

// schedulesFunc lists the recrawl schedules in force: crawl.schedule
// (name "") and each rule set's of the rule files in force.
func (m *Master) schedulesFunc(rw *rulesWatcher) func() []Schedule {
	var cfgSched []Schedule
	if spec := m.cfg.Crawl.Schedule; spec != "" {
		if sc, err := rules.ParseSchedule(spec); err == nil { // validated with the config
			cfgSched = []Schedule{{Name: "", Spec: spec, Sched: sc}}
		}
	}
	var mu sync.Mutex
	var cachedSet *rules.Set // the rule set cached was built from
	cached := cfgSched
	return func() []Schedule {
		if rw == nil {
			return cfgSched
		}
		set := rw.snapshot().set
		mu.Lock()
		defer mu.Unlock()
		if set != cachedSet {
			cachedSet, cached = set, append([]Schedule(nil), cfgSched...)
			if set != nil {
				for _, rs := range set.Sets {
					if rs.Schedule == "" {
						continue
					}
					if sc, err := rules.ParseSchedule(rs.Schedule); err == nil {
						cached = append(cached, Schedule{Name: rs.Name, Spec: rs.Schedule, Sched: sc})
					}
				}
			}
		}
		return cached
	}
}

// reseederFunc adapts a function to the scheduler's reseeder.
type reseederFunc func(ctx context.Context, name string) (int, error)

func (f reseederFunc) Reseed(ctx context.Context, name string) (int, error) { return f(ctx, name) }

// adminComponent runs the admin HTTP server as a component.
type adminComponent struct {
	srv *admin.Server
	ln  net.Listener
	log *slog.Logger
}

func (a *adminComponent) run(ctx context.Context) {
	if err := a.srv.Serve(ctx, a.ln); err != nil && ctx.Err() == nil {
		a.log.Error("admin server stopped", "err", err)
	}
}

// adminServer listens on admin.listen; a port in use is an error, not a
// master without its dashboard.
func (m *Master) adminServer(be admin.Backend, met *metrics.Master) (*adminComponent, error) {
	ln, err := net.Listen("tcp", m.cfg.Admin.Listen)
	if err != nil {
		return nil, fmt.Errorf("master: admin.listen: %w", err)
	}
	if m.cfg.Admin.Token == "" {
		if m.cfg.Admin.PublicRead {
			m.log.Warn("admin.token is empty: the dashboard is read-only (set CRAWLER_ADMIN_TOKEN to allow actions)")
		} else {
			m.log.Warn("admin.token is empty: the admin server refuses every request (set CRAWLER_ADMIN_TOKEN, or admin.public_read)")
		}
	}
	tlsCfg, err := m.cfg.AdminTLSConfig()
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("master: %w", err)
	}
	srv := admin.New(admin.Options{Backend: be, Token: m.cfg.Admin.Token, PublicRead: m.cfg.Admin.PublicRead,
		Logger: m.log, Metrics: met.Handler(), SD: m.scrapeTargets, TLS: tlsCfg,
		Sessions: frontier.NewSessions(m.rdb, m.cfg.Crawl.Name), SessionTTL: m.cfg.Admin.SessionTTL})
	addr := ln.Addr().String()
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	m.log.Info("admin server listening", "url", scheme+addr+"/", "public_read", m.cfg.Admin.PublicRead)
	if m.opt.AdminReady != nil {
		m.opt.AdminReady(addr)
	}
	return &adminComponent{srv: srv, ln: ln, log: m.log}, nil
}

// scrapeTargets lists the alive slaves' /metrics for Prometheus HTTP
// service discovery: those whose reported address admin.sd_allow allows
// (sdTarget); a slave's refused address is logged, at most every 30s.
func (m *Master) scrapeTargets(ctx context.Context) ([]admin.SDTarget, error) {
	snap, err := m.front.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := []admin.SDTarget{}
	for _, s := range snap.Slaves {
		if s.MetricsAddr == "" || snap.Now.Sub(s.LastSeen) > m.cfg.Master.DeadAfter {
			continue
		}
		target, err := sdTarget(s.MetricsAddr, m.sdAllow)
		if err != nil {
			m.rl.Log(ctx, slog.LevelWarn, "sd:"+s.Slave, "slave metrics address not listed for Prometheus",
				"slave", s.Slave, "metrics_addr", quote(s.MetricsAddr), "why", err)
			continue
		}
		out = append(out, admin.SDTarget{Targets: []string{target},
			Labels: map[string]string{"job": "redcrawl-slave", "crawl": m.cfg.Crawl.Name, "slave": s.Slave}})
	}
	return out, nil
}

// connect opens Redis and MySQL, waiting for them to be reachable: up to
// redis.startup_timeout and mysql.startup_timeout, and not at all when they
// refuse the credentials (a *retry.StartError).
func (m *Master) connect(ctx context.Context) error {
	if m.opt.Redis != nil {
		m.rdb = m.opt.Redis
	} else {
		rdb, err := redisconn.New(m.cfg)
		if err != nil {
			return fmt.Errorf("master: %w", err)
		}
		m.rdb = rdb
	}
	err := retry.Start(ctx, m.rl, frontier.RedisServer(m.cfg), func(wctx context.Context) error {
		f, err := frontier.NewRedis(wctx, m.rdb, frontier.OptionsFromConfig(m.cfg))
		m.front = f
		return err
	})
	if err != nil {
		return err
	}
	m.warnEviction(ctx)
	return retry.Start(ctx, m.rl, MySQLServer(m.cfg), func(wctx context.Context) error {
		s, err := OpenStore(wctx, m.cfg)
		m.store = s
		return err
	})
}

// warnEviction warns when Redis may evict the frontier's keys.
func (m *Master) warnEviction(ctx context.Context) {
	// INFO memory, not CONFIG GET: the master's least-privilege Redis user
	// (bin/master acl --role master) may run INFO but not CONFIG
	info, err := m.rdb.Info(ctx, "memory").Result()
	if err != nil {
		m.log.Info("cannot read redis maxmemory-policy; make sure it is noeviction", "err", err)
		return
	}
	p := ""
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			p = v
		}
	}
	if p != "" && p != "noeviction" {
		m.log.Warn("redis maxmemory-policy is not noeviction: Redis may silently drop queued URLs, leases and dedup state", "policy", p)
	}
}

// writeSummary writes the finished crawl's stats to Options.Summary.
func (m *Master) writeSummary(ctx context.Context, st frontier.Stats) {
	if m.opt.Summary == nil || !st.Finished {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sum, err := crawlStats(ctx, st, m.store, time.Now())
	if err != nil {
		m.log.Warn("crawl stats", "err", err)
		return
	}
	fmt.Fprintln(m.opt.Summary)
	sum.Render(m.opt.Summary)
}

func (m *Master) close() {
	if m.store != nil {
		m.store.Close()
	}
	if m.rdb != nil && m.opt.Redis == nil {
		m.rdb.Close()
	}
}

func consumerName() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("master-%s", h)
}
