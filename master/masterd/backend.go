package masterd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// backend is the master's side of the admin server (admin.Backend): Redis
// for live state and actions, MySQL for logs.
type backend struct {
	cfg   *config.Config
	front *frontier.Redis
	store *store.Store
	// rules returns the rule files' state (nil: no rules.dir).
	rules func() rulesState
	// schedules lists the recrawl schedules with their runs (nil: none).
	schedules func() []admin.ScheduleView
	// rdb, when set, lists the other crawls of the Redis for the
	// dashboard, whose names are cached for crawlsTTL (a SCAN of the
	// keyspace)
	rdb      redis.UniversalClient
	crawlsMu sync.Mutex
	crawls   []string
	crawlsAt time.Time
}

// crawlsTTL is how long the dashboard reuses the list of crawls.
const crawlsTTL = 30 * time.Second

// crawlNames lists the crawls of the Redis, cached for crawlsTTL.
func (b *backend) crawlNames(ctx context.Context) ([]string, error) {
	b.crawlsMu.Lock()
	defer b.crawlsMu.Unlock()
	if b.crawls != nil && time.Since(b.crawlsAt) < crawlsTTL {
		return b.crawls, nil
	}
	names, err := frontier.Crawls(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	b.crawls, b.crawlsAt = names, time.Now()
	return names, nil
}

var _ admin.Backend = (*backend)(nil)

// Overview implements admin.Backend.
func (b *backend) Overview(ctx context.Context) (admin.Overview, error) {
	snap, err := b.front.Snapshot(ctx)
	if err != nil {
		return admin.Overview{}, fmt.Errorf("overview: %w", err)
	}
	cv := admin.CrawlView{Stats: snap.Stats, Paused: snap.Paused, Schedules: []admin.ScheduleView{}}
	if b.schedules != nil {
		cv.Schedules = b.schedules()
	}
	if rs, err := recrawlStatus(ctx, b.store, snap.Stats); err == nil && rs != nil {
		cv.Recrawl = &admin.RecrawlView{Run: rs.Run, Started: rs.Started,
			Unchanged: rs.Unchanged, Changed: rs.Changed, New: rs.New}
	}
	ov := admin.Overview{Now: snap.Now, Crawls: []admin.CrawlView{cv}, Slaves: []admin.SlaveView{}}
	ov.Crawls = append(ov.Crawls, b.otherCrawls(ctx)...)
	for _, s := range snap.Slaves {
		ov.Slaves = append(ov.Slaves, admin.SlaveView{Heartbeat: s.Heartbeat, LastSeen: s.LastSeen,
			Alive: snap.Now.Sub(s.LastSeen) < b.cfg.Master.DeadAfter, Draining: snap.Draining[s.Slave]})
	}
	ov.Rules.Dir = b.cfg.Rules.Dir
	if b.rules != nil {
		rs := b.rules()
		if rs.set != nil {
			ov.Rules.Version, ov.Rules.RuleSets, ov.Rules.LoadedAt = rs.set.Version, len(rs.set.Sets), rs.loadedAt
		}
		ov.Rules.LastError, ov.Rules.LastErrorAt = rs.lastErr, rs.lastErrAt
	}
	if ov.Rules.Version == "" {
		if v, _, _, err := b.front.GetRules(ctx); err == nil {
			ov.Rules.Version = v
		}
	}
	return ov, nil
}

// maxOtherCrawls bounds the other crawls the dashboard lists.
const maxOtherCrawls = 200

// otherCrawls are the crawls of this Redis but this master's, read without
// opening them (frontier.PeekSnapshot), at most maxOtherCrawls; none when
// they cannot be listed (a Redis user may not SCAN).
func (b *backend) otherCrawls(ctx context.Context) []admin.CrawlView {
	if b.rdb == nil {
		return nil
	}
	names, err := b.crawlNames(ctx)
	if err != nil {
		return nil
	}
	var out []admin.CrawlView
	for _, n := range names {
		if n == b.cfg.Crawl.Name {
			continue
		}
		if len(out) == maxOtherCrawls {
			break
		}
		snap, err := frontier.PeekSnapshot(ctx, b.rdb, n)
		if err != nil {
			continue
		}
		out = append(out, admin.CrawlView{Stats: snap.Stats, Paused: snap.Paused, Other: true, Schedules: []admin.ScheduleView{}})
	}
	return out
}

// Series implements admin.Backend from the pages stored in MySQL, so it
// survives a master restart.
func (b *backend) Series(ctx context.Context, crawl string, span, step time.Duration) ([]admin.Point, error) {
	if err := b.checkCrawl(crawl); err != nil {
		return nil, err
	}
	step = max(step.Truncate(time.Second), time.Second)
	n := max(int(span/step), 1)
	now, err := b.front.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("series: %w", err)
	}
	start := now.Truncate(step).Add(-time.Duration(n-1) * step)
	counts, err := b.store.PageCounts(ctx, b.cfg.Crawl.Name, start, step, n)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Point, n)
	for i, c := range counts {
		at := start.Add(time.Duration(i) * step)
		secs := step.Seconds()
		if i == n-1 { // the current bucket is partial
			secs = max(now.Sub(at).Seconds(), 1)
		}
		out[i] = admin.Point{At: at, PagesPerSec: float64(c) / secs}
	}
	return out, nil
}

// Exceptions implements admin.Backend.
func (b *backend) Exceptions(ctx context.Context, q admin.ExceptionQuery) (admin.ExceptionPage, error) {
	if err := b.checkCrawl(q.Crawl); err != nil {
		return admin.ExceptionPage{}, err
	}
	f := store.ExceptionFilter{Crawl: b.cfg.Crawl.Name, Kind: q.Kind, Host: q.Host, Slave: q.Slave,
		Since: q.Since, Until: q.Until, Limit: q.Limit, Offset: q.Offset, NewestFirst: true}
	total, err := b.store.CountExceptions(ctx, f)
	if err != nil {
		return admin.ExceptionPage{}, err
	}
	items, err := b.store.Exceptions(ctx, f)
	return admin.ExceptionPage{Total: total, Items: items}, err
}

// Lost implements admin.Backend.
func (b *backend) Lost(ctx context.Context, crawl string, limit, offset int) ([]events.Lost, error) {
	if err := b.checkCrawl(crawl); err != nil {
		return nil, err
	}
	return b.store.LostTasksPage(ctx, b.cfg.Crawl.Name, limit, offset)
}

// Proxies implements admin.Backend: each proxy's latest event; a proxy an
// admin retired shows as retired even before a slave reports it.
func (b *backend) Proxies(ctx context.Context, crawl string) ([]admin.ProxyHealth, error) {
	if err := b.checkCrawl(crawl); err != nil {
		return nil, err
	}
	ps, err := b.store.ProxyStates(ctx, b.cfg.Crawl.Name)
	if err != nil {
		return nil, err
	}
	retired, err := b.front.RetiredProxies(ctx)
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, p := range retired {
		asked[p] = true
	}
	out := make([]admin.ProxyHealth, 0, len(ps))
	for _, p := range ps {
		h := admin.ProxyHealth{Proxy: p.Proxy.Proxy, State: p.State, Slave: p.Slave, Reason: p.Reason,
			At: time.UnixMilli(p.At), Bans: p.Bans}
		if asked[h.Proxy] && h.State != events.ProxyRetired && h.State != events.ProxyRemoved {
			h.State, h.Reason = events.ProxyRetired, "retired by an admin"
		}
		out = append(out, h)
	}
	return out, nil
}

// Act implements admin.Backend.
func (b *backend) Act(ctx context.Context, a admin.Action) (admin.ActionResult, error) {
	if a.Kind != admin.ActDrain {
		if err := b.checkCrawl(a.Crawl); err != nil {
			return admin.ActionResult{}, err
		}
	}
	switch a.Kind {
	case admin.ActPause:
		changed, err := b.front.Pause(ctx)
		return result(changed, 0, "crawl paused", "crawl was already paused"), err
	case admin.ActResume:
		changed, err := b.front.Resume(ctx)
		return result(changed, 0, "crawl resumed", "crawl was not paused"), err
	case admin.ActSeed:
		if len(a.URLs) == 0 {
			return admin.ActionResult{}, fmt.Errorf("%w: seed needs urls", admin.ErrBadAction)
		}
		set := b.currentRules()
		res, err := seedWith(ctx, b.cfg, b.front, b.store, set, a.URLs)
		if err != nil {
			return admin.ActionResult{}, err
		}
		msg := fmt.Sprintf("%d added, %d already seen, %d rejected", res.Added, res.Seen, len(res.Rejected))
		for _, r := range res.Rejected {
			msg += "; " + r
		}
		return admin.ActionResult{OK: true, Count: res.Added, Message: msg}, nil
	case admin.ActRequeue:
		n, err := b.front.RequeueFailed(ctx, 0)
		return admin.ActionResult{OK: err == nil, Count: n, Message: fmt.Sprintf("%d failed tasks requeued", n)}, err
	case admin.ActDrain:
		if a.Slave == "" {
			return admin.ActionResult{}, fmt.Errorf("%w: drain needs a slave", admin.ErrBadAction)
		}
		ok, err := b.front.Drain(ctx, a.Slave)
		if err == nil && !ok {
			return admin.ActionResult{}, fmt.Errorf("%w: no registered slave %q", admin.ErrBadAction, a.Slave)
		}
		return admin.ActionResult{OK: ok, Count: 1, Message: "slave " + a.Slave + " draining: it finishes its tasks and leaves"}, err
	case admin.ActRetireProxy:
		if a.Proxy == "" {
			return admin.ActionResult{}, fmt.Errorf("%w: retire_proxy needs a proxy", admin.ErrBadAction)
		}
		changed, err := b.front.RetireProxy(ctx, a.Proxy)
		return result(changed, 1, "proxy retired on every slave", "proxy was already retired"), err
	}
	return admin.ActionResult{}, fmt.Errorf("%w: unknown action %q", admin.ErrBadAction, a.Kind)
}

func result(changed bool, n int, did, already string) admin.ActionResult {
	if changed {
		return admin.ActionResult{OK: true, Count: n, Message: did}
	}
	return admin.ActionResult{OK: true, Message: already}
}

// currentRules is the rule set in force (nil: none).
func (b *backend) currentRules() *rules.Set {
	if b.rules == nil {
		return nil
	}
	return b.rules().set
}

// checkCrawl accepts the master's crawl, or "" for it.
func (b *backend) checkCrawl(crawl string) error {
	if crawl != "" && crawl != b.cfg.Crawl.Name {
		return fmt.Errorf("%w: this master runs crawl %q, not %q", admin.ErrBadAction, b.cfg.Crawl.Name, crawl)
	}
	return nil
}

// OpenBackend connects to Redis and MySQL as the master does and returns
// the admin backend over them (the CLI's admin commands); close releases
// the connections. The rule files are read from rules.dir for seeding.
func OpenBackend(ctx context.Context, cfg *config.Config) (admin.Backend, func(), error) {
	st, err := openStoreOnce(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	f, closeFront, err := openExisting(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	b := &backend{cfg: cfg, front: f, store: st}
	if set, err := LoadRules(cfg); err == nil && set != nil {
		b.rules = func() rulesState { return rulesState{set: set} }
	}
	return b, func() { st.Close(); closeFront() }, nil
}

// OpenStore opens the MySQL store of mysql.dsn with the mysql.tls_*
// settings.
func OpenStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	mc, err := cfg.MySQLConfig()
	if err != nil {
		return nil, err
	}
	mm, err := cfg.MigrateMySQLConfig()
	if err != nil {
		return nil, err
	}
	return store.OpenMigratedConfig(ctx, mc, mm)
}
