// Package masterd is the redcrawl master: it applies the MySQL migrations,
// takes back leases that expired or belonged to dead slaves, watches slave
// heartbeats, drains the crawl's event stream into MySQL and decides when
// the crawl is finished.
//
// Components (each a small type run with a context): recoverer, monitor,
// sink, finisher, rules watcher. Stop order (Run): the finisher, recoverer,
// monitor and rules watcher stop first; the sink then drains what is left in the stream (bounded);
// MySQL and Redis connections close last.
package masterd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/store"
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
	return &Master{cfg: cfg, opt: opt, log: log, rl: ratelog.New(log, 30*time.Second)}
}

// Run supervises the crawl until ctx is cancelled or, with ExitWhenDone,
// until the crawl is finished.
func (m *Master) Run(ctx context.Context) error {
	if err := m.connect(ctx); err != nil {
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

	snk := &sink{stream: m.front.Stream("master"), store: m.store, batch: m.cfg.Master.SinkBatch,
		consumer: consumerName(), log: m.log, rl: m.rl}
	if err := retry.Until(ctx, m.rl, "redis", func() error { return snk.stream.EnsureGroup(ctx) }); err != nil {
		return nil
	}
	rec := &recoverer{front: m.front, every: m.cfg.Master.RecoverInterval, log: m.log, rl: m.rl}
	mon := &monitor{front: m.front, stream: snk.stream, deadAfter: m.cfg.Master.DeadAfter,
		sampleEvery: m.cfg.Master.HeartbeatSample, log: m.log, rl: m.rl}
	fin := &finisher{front: m.front, quiescence: m.cfg.Master.Quiescence, log: m.log, rl: m.rl,
		progressEvery: m.opt.ProgressEvery, finished: make(chan struct{})}

	comps := []interface{ run(context.Context) }{rec, mon, fin}
	if m.cfg.Rules.Dir != "" {
		rw := &rulesWatcher{dir: m.cfg.Rules.Dir, every: m.cfg.Rules.Poll, crawl: m.cfg.Crawl.Name,
			opt: rules.LoadOptions{ProxyPools: m.cfg.ProxyPoolNames()}, front: m.front, log: m.log, rl: m.rl}
		rw.check(ctx) // publish before the slaves claim much
		comps = append(comps, rw)
	}

	var compWG, sinkWG sync.WaitGroup
	sinkWG.Add(1)
	go func() { defer sinkWG.Done(); snk.run(sinkCtx) }()
	for _, c := range comps {
		compWG.Add(1)
		go func() { defer compWG.Done(); c.run(compCtx) }()
	}
	m.log.Info("master running", "redis", redactURL(m.cfg.Redis.URL), "exit_when_done", m.opt.ExitWhenDone)

	select {
	case <-ctx.Done():
	case <-fin.finished:
		if !m.opt.ExitWhenDone {
			<-ctx.Done()
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
	}
	return nil
}

// connect opens Redis and MySQL, waiting for them to be reachable.
func (m *Master) connect(ctx context.Context) error {
	if m.opt.Redis != nil {
		m.rdb = m.opt.Redis
	} else {
		rdb, err := m.cfg.NewRedisClient()
		if err != nil {
			return fmt.Errorf("master: %w", err)
		}
		m.rdb = rdb
	}
	err := retry.Until(ctx, m.rl, "redis", func() error {
		f, err := frontier.NewRedis(ctx, m.rdb, frontier.OptionsFromConfig(m.cfg))
		m.front = f
		return err
	})
	if err != nil {
		return err
	}
	m.warnEviction(ctx)
	return retry.Until(ctx, m.rl, "mysql", func() error {
		s, err := store.Open(ctx, m.cfg.MySQL.DSN)
		m.store = s
		return err
	})
}

// warnEviction warns when Redis may evict the frontier's keys.
func (m *Master) warnEviction(ctx context.Context) {
	res, err := m.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		m.log.Info("cannot read redis maxmemory-policy; make sure it is noeviction", "err", err)
		return
	}
	if p := res["maxmemory-policy"]; p != "" && p != "noeviction" {
		m.log.Warn("redis maxmemory-policy is not noeviction: Redis may silently drop queued URLs, leases and dedup state", "policy", p)
	}
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
