package soak

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/tcpproxy"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// The crawls' settings: a lease the partitions outlast, slaves declared
// dead soon after their heartbeats stop, a delay every host's requests
// must keep.
const (
	leaseDuration = 4 * time.Second
	politeDelay   = 100 * time.Millisecond
	shards        = 6 // a Cluster crawl's
	directSlaves  = 3
	// faultsUntil is the share of a crawl's pages after which no fault
	// starts: the rest of the crawl shows that it finishes by itself.
	faultsUntil = 0.85
	// finishWithin bounds a crawl's end once its faults stopped.
	finishWithin = 4 * time.Minute
	// roundLimit bounds a whole crawl.
	roundLimit = 12 * time.Minute
)

// Round is one crawl of a soak.
type Round struct {
	s    *Soak
	t    testing.TB
	n    int
	topo Topology
	rng  *rand.Rand
	dir  string
	log  *slog.Logger

	site   *testsite.Site
	cfg    *config.Config // the test's: root's MySQL DSN, Redis direct
	dbName string
	front  *frontier.Redis

	master *proc
	slaves []*proc // direct slaves
	api    *proc   // the work API's slave
	clock  *clockSlave

	redisProxies []*tcpproxy.Proxy // a direct slave's way to a Single Redis
	apiProxy     *tcpproxy.Proxy   // the API slave's way to the master
	mysqlProxy   *tcpproxy.Proxy   // the master's way to MySQL

	// failedBefore: the test had failed before this crawl (its logs are
	// not dumped for that)
	failedBefore bool
	masterExit   time.Time // when the master exited by itself

	mu     sync.Mutex
	faults []fault

	closers []func() // what teardown undoes, in reverse
	ended   sync.Once
}

// onEnd has teardown call f.
func (r *Round) onEnd(f func()) { r.closers = append(r.closers, f) }

// round runs crawl n on topo and checks it.
func (s *Soak) round(n int, topo Topology) {
	t := s.t
	t.Helper()
	r := &Round{s: s, t: t, n: n, topo: topo, rng: s.rng(n), dir: t.TempDir(), failedBefore: t.Failed()}
	t.Cleanup(r.teardown) // a crawl cut short by t.Fatal
	r.log = s.log.With("crawl", n, "redis", topo.String())
	r.setup()
	start := time.Now()
	r.log.Info("crawl started", "pages", len(r.site.Expected()))

	stop := make(chan struct{})
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); r.inject(stop) }()
	finished := r.watch(stop, start)
	<-faultsDone
	if finished {
		finished = r.finish()
	}
	took := time.Since(start)
	res := r.check(finished)
	r.log.Info("crawl ended", "took", took.Round(time.Second), "pages", res.pages, "refetches", res.refetches,
		"lost_leases", res.lost, "gaps", res.gaps, "gaps_after_loss", res.gapsAfterLoss,
		"gaps_as_woke", res.gapsAfterFreeze, "faults", len(r.faults))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fig.Rounds == nil {
		s.fig.Rounds = map[Topology]int{}
	}
	s.fig.Rounds[topo]++
	for _, f := range r.faults {
		s.fig.add(f.kind)
	}
	s.fig.Pages += res.pages
	s.fig.Fetches += res.fetches
	s.fig.Refetches += res.refetches
	s.fig.LostLeases += res.lost
	s.fig.AfterLoss += res.afterLoss
	s.fig.Gaps += res.gaps
	s.fig.GapsAfterLoss += res.gapsAfterLoss
	s.fig.GapsAfterFreeze += res.gapsAfterFreeze
	r.teardown()
}

// setup starts the round's site, services and programs and seeds the
// crawl.
func (r *Round) setup() {
	t := r.t
	t.Helper()
	site, err := testsite.Start(testsite.Options{Hosts: 8, PagesPerHost: 280, LinksPerPage: 5, PageBytes: 1500,
		Robots: true, Specials: true, Leaves: true, Seed: r.rng.Int64(), Latency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.site = site
	r.onEnd(site.Close)

	// the crawl tests' config (its own crawl and database, short leases,
	// heartbeats and quiescence), with the soak's Redis, delay and lease
	cfg := crawltest.Config(t)
	cfg.Crawl.Name = testutil.CrawlName(fmt.Sprintf("soak%d", r.n))
	r.dbName = r.s.mysql.grant(t, cfg.MySQL.DSN)
	switch r.topo {
	case Single:
		cfg.Redis.URL = "redis://" + r.s.redis.Addr + "/0"
	case Cluster:
		rc := r.s.cluster()
		cfg.Redis.URL, cfg.Redis.Cluster = rc.URL, true
		cfg.Crawl.Shards = shards
	}
	cfg.Crawl.AllowHosts = crawltest.SiteHosts(site)
	cfg.Politeness.Delay = politeDelay
	cfg.Lease.Duration = leaseDuration
	cfg.Master.ShardLease = 3 * time.Second
	cfg.Render.Enabled = false
	cfg.Rules.Dir = filepath.Join(r.dir, "rules")
	if err := os.Mkdir(cfg.Rules.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	apiSlaves := crawltest.WithAPI(t, cfg) // validates cfg
	r.cfg = cfg
	r.onEnd(r.deleteCrawl)

	ctx, cancel := ctxFor(60 * time.Second)
	defer cancel()
	if res, err := masterd.Seed(ctx, r.cfg, site.Seeds()); err != nil || res.Added != len(site.Seeds()) {
		t.Fatalf("seed: %+v %v", res, err)
	}
	rdb, err := redisconn.New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.onEnd(func() { rdb.Close() })
	if r.front, err = frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(r.cfg)); err != nil {
		t.Fatal(err)
	}

	// the master, its MySQL through a proxy
	r.mysqlProxy = r.proxy(r.s.mysql.addr)
	mc := *r.cfg
	mc.MySQL.DSN = r.s.mysql.dsn(r.mysqlProxy.Addr(), r.dbName)
	r.master = r.program("master", "master", r.s.bins.master, &mc, "run")

	// the direct slaves, each through a proxy of its own to a Single Redis
	for i := range directSlaves {
		sc := r.slaveConfig()
		if r.topo == Single {
			p := r.proxy(r.s.redis.Addr)
			r.redisProxies = append(r.redisProxies, p)
			sc.Redis.URL = "redis://" + p.Addr() + "/0"
		}
		id := fmt.Sprintf("d%d", i+1)
		sc.Fetch.UserAgent = userAgent(id)
		r.slaves = append(r.slaves, r.program(id, "slave", r.s.bins.slave, sc, "run", "--id", id))
	}

	// the work API's slave, through a proxy to the master
	r.apiProxy = r.proxy(r.cfg.API.Listen)
	ac := apiSlaves.Config("a1") // its token, the masters' CA, no Redis or MySQL it could reach
	ac.Slave.API.URLs = []string{"https://" + r.apiProxy.Addr()}
	ac.Fetch.UserAgent = userAgent("a1")
	r.api = r.program("a1", "api_slave", r.s.bins.slave, ac, "run", "--id", "a1")

	for _, p := range append([]*proc{r.master, r.api}, r.slaves...) {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	r.clock = startClockSlave(r)
}

// userAgent names slave id in its requests, so that the site's log says
// who fetched what; robots.txt's product token stays redcrawl.
func userAgent(id string) string { return "redcrawl/0.1 (soak " + id + ")" }

// slaveConfig is a direct slave's config.
func (r *Round) slaveConfig() *config.Config {
	c := *r.cfg
	c.API = config.Default().API
	c.MySQL.DSN = "nobody:x@tcp(127.0.0.1:1)/none" // a slave has no use for MySQL
	return &c
}

// program makes the proc of a binary run with cfg written to a file.
func (r *Round) program(name, role, bin string, cfg *config.Config, args ...string) *proc {
	t := r.t
	path, err := slaveproc.WriteConfig(r.dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--config", path, "--exit-when-done")
	p := newProc(name, role, bin, filepath.Join(r.dir, name+".log"), r.s.mem, args...)
	r.onEnd(p.kill)
	return p
}

func (r *Round) proxy(target string) *tcpproxy.Proxy {
	p, err := tcpproxy.Start(target, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	r.onEnd(func() { p.Close() })
	return p
}

// watch waits until the crawl has done faultsUntil of its pages (then
// closes stop) and until the master exits; it reports whether the master
// exited by itself, with the crawl finished, within the limits.
func (r *Round) watch(stop chan struct{}, start time.Time) bool {
	want := int64(float64(len(r.site.Expected())) * faultsUntil)
	stopped := false
	var stoppedAt time.Time
	halt := func() {
		if !stopped {
			close(stop)
			stopped, stoppedAt = true, time.Now()
		}
	}
	defer halt()
	for {
		if !stopped {
			ctx, cancel := ctxFor(2 * time.Second)
			st, err := r.front.Stats(ctx)
			cancel()
			if err == nil && st.Done >= want {
				r.log.Info("faults stop", "done", st.Done, "after", time.Since(start).Round(100*time.Millisecond))
				halt()
			}
			if time.Since(start) > roundLimit-finishWithin {
				r.t.Errorf("crawl %d (%s): %d of %d pages done after %v: the faults stop", r.n, r.topo, st.Done, want,
					time.Since(start).Round(time.Second))
				halt()
			}
		}
		if r.master.endedByItself() {
			r.masterExit = time.Now()
			r.log.Info("master exited", "after", time.Since(start).Round(100*time.Millisecond))
			if !stopped {
				// the master's end during faults: a crash (check says so)
				// or a crawl finished early (check finds the missing pages)
				halt()
			}
			return true
		}
		if stopped && time.Since(stoppedAt) > finishWithin {
			r.t.Errorf("crawl %d (%s): not finished %v after the last fault", r.n, r.topo, finishWithin)
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// finish waits for the slaves to leave once the master exited. The work
// API's slave learns the crawl's end from the master, which waits for it
// a moment only: one that was cut off or down then cannot learn it, and
// is stopped.
func (r *Round) finish() bool {
	ok := true
	if r.apiAway(r.masterExit.Add(-3*time.Second), r.masterExit) && !r.api.wait(5*time.Second) {
		r.log.Info("the work API's slave was away when the master exited: stopped")
		r.api.kill()
	}
	for _, p := range append([]*proc{r.api}, r.slaves...) {
		if !p.wait(30 * time.Second) {
			r.t.Errorf("crawl %d (%s): slave %s still runs 30s after the master exited", r.n, r.topo, p.name)
			ok = false
		}
	}
	if !r.clock.wait(30 * time.Second) {
		r.t.Errorf("crawl %d (%s): the clock slave still runs 30s after the master exited", r.n, r.topo)
		ok = false
	}
	return ok
}

// apiAway reports whether a fault kept the work API's slave from the
// master at some time between from and to.
func (r *Round) apiAway(from, to time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.faults {
		if (f.kind == faultAPIRestart || f.kind == faultPartition && f.target == apiPartition) &&
			!f.from.After(to) && !f.to.Before(from) {
			return true
		}
	}
	return false
}

// teardown stops what still runs (after a failure: the crawl's end
// stopped the rest), deletes the crawl's Redis keys and frees the round's
// ports and clients, once; the crawl's database goes at the test's end.
func (r *Round) teardown() {
	r.ended.Do(func() {
		for i := len(r.closers) - 1; i >= 0; i-- {
			r.closers[i]()
		}
		r.closers = nil
		if r.site != nil {
			r.site.ResetHits() // the test's cleanup keeps the round to its end, not its log
		}
	})
}

// deleteCrawl deletes the crawl's keys from every master of its Redis.
func (r *Round) deleteCrawl() {
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	if r.topo == Single {
		c := redis.NewClient(&redis.Options{Addr: r.s.redis.Addr})
		defer c.Close()
		testutil.DeleteCrawl(ctx, c, r.cfg.Crawl.Name)
		return
	}
	masters, err := r.s.rc.Masters(ctx)
	if err != nil {
		return
	}
	for _, m := range masters {
		testutil.DeleteCrawl(ctx, r.s.rc.Node(m).Client, r.cfg.Crawl.Name)
	}
}

// clockSlave is a direct slave in this process whose clock is minutes
// off Redis's (slaved.Options.Clock), stepped by the clock fault.
type clockSlave struct {
	off    atomic.Int64 // ns
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func startClockSlave(r *Round) *clockSlave {
	c := &clockSlave{done: make(chan struct{})}
	c.off.Store(int64(clockOffset(r.rng)))
	r.record(fault{kind: faultClock, target: "clock", from: time.Now(), to: time.Now(),
		detail: time.Duration(c.off.Load()).String()})
	cfg := r.slaveConfig()
	cfg.Fetch.UserAgent = userAgent("clock")
	logf, err := os.Create(filepath.Join(r.dir, "clock.log"))
	if err != nil {
		r.t.Fatal(err)
	}
	s, err := slaved.New(cfg, slaved.Options{ID: "clock", ExitWhenDone: true,
		Logger: slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Clock:  func() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		defer logf.Close()
		c.err = s.Run(ctx)
	}()
	r.onEnd(c.stop)
	return c
}

func (c *clockSlave) wait(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (c *clockSlave) stop() {
	c.cancel()
	<-c.done
}

// clockOffset is 2 to 15 minutes, ahead or behind.
func clockOffset(rng *rand.Rand) time.Duration {
	d := between(rng, 2*time.Minute, 15*time.Minute)
	if rng.IntN(2) == 0 {
		return -d
	}
	return d
}
