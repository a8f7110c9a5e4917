package benchsuite

// The broad-crawl benchmark (bin/bench --broad): many named hosts with
// a few pages each (internal/harness/broadsite, its DNS server the
// slaves' dns.server), crawled with 1, 4 and 16 slaves of the same total
// concurrency, once with many slaves of low concurrency, and once on 20
// hosts with as many pages for comparison. See BroadRun for what is
// measured.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/broadsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/sitecrawl"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/shared/secret"
)

// Defaults of BroadOptions.
const (
	DefaultBroadHosts     = 50_000
	DefaultBroadPages     = 4
	DefaultNarrowHosts    = 20
	DefaultIdleWindow     = 5 * time.Second
	DefaultManyPerSlave   = 1
	maxBroadSlaves        = 1000
	broadPoll             = 100 * time.Millisecond
	idleSettle            = time.Second
	claimScrapeAttempts   = 50
	claimScrapeAttemptGap = 100 * time.Millisecond
)

// DefaultBroadSlaves are the slave counts of the broad runs.
var DefaultBroadSlaves = []int{1, 4, 16}

// BroadOptions size and tune the broad benchmark. Zero fields take the
// defaults.
type BroadOptions struct {
	Hosts        int // default 50,000
	PagesPerHost int // default 4
	PageBytes    int // default 15 KB
	// Slaves are the slave counts of the broad runs (default 1, 4, 16),
	// each run with Concurrency fetches in flight in total, split evenly.
	Slaves      []int
	Concurrency int // total, default 64
	// Many, when > 0, adds a run of Many slaves of ManyPerSlave fetches
	// each (default 1).
	Many, ManyPerSlave int
	// NarrowHosts is the host count of the comparison run, with as many
	// pages in total as the broad site and one slave of Concurrency;
	// default 20, negative = no comparison run.
	NarrowHosts     int
	HostConcurrency int // politeness.host_concurrency, default 4
	// Colly adds plain colly's crawls of the broad site and of the
	// comparison site (in this process, Concurrency fetches): the nearest
	// peer's broad / narrow ratio of pages/s.
	Colly bool
	// IdleWindow is how long, once every page but the held one is done,
	// the Redis commands of the waiting master and slaves are counted;
	// default 5 s.
	IdleWindow time.Duration
	Config     *config.Config // base config (redis, mysql…); nil = defaults
	// SlaveBinary and InProcess: as Options'.
	SlaveBinary string
	InProcess   func(cfg *config.Config, id string, rdb *redis.Client, log *slog.Logger) (run func(context.Context) error, err error)
	// MasterBinary, when set, runs the master as a process of it
	// ("run --config FILE --exit-when-done") so that its CPU is its own;
	// else the master runs in this process, whose CPU (site and DNS
	// server included) stands for the master's.
	MasterBinary string
	OutDir       string // default "results"; broad-<stamp>.md and broad-latest.md
	Logger       *slog.Logger
	Out          io.Writer
}

func (o BroadOptions) withDefaults() BroadOptions {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Hosts, DefaultBroadHosts)
	def(&o.PagesPerHost, DefaultBroadPages)
	def(&o.PageBytes, DefaultPageBytes)
	def(&o.Concurrency, DefaultConcurrency)
	def(&o.ManyPerSlave, DefaultManyPerSlave)
	def(&o.NarrowHosts, DefaultNarrowHosts)
	def(&o.HostConcurrency, DefaultHostConcurrency)
	if o.IdleWindow <= 0 {
		o.IdleWindow = DefaultIdleWindow
	}
	if len(o.Slaves) == 0 {
		o.Slaves = DefaultBroadSlaves
	}
	fillCommon(&o.OutDir, &o.Config, &o.Logger, &o.Out)
	return o
}

// BroadRun is one crawl of the broad bench. Values not measured are NaN.
type BroadRun struct {
	Label           string
	Hosts, PerHost  int
	Slaves, PerSlav int // slaves and fetches in flight each

	Pages                  int64   // pages done (the held page aside)
	Missing, Extra         int     // pages never fetched, fetches beyond one a page
	Other                  int64   // requests for no page of the site
	Failed                 int64   // tasks failed for good
	SeedSeconds            float64 // seeding every root
	Seconds, PagesPerSec   float64 // from the slaves' start to the last page done (the held page aside)
	RedisCPUPerPageUs      float64 // Redis CPU µs a page, seeding and the idle tail included
	RedisLuaKB             float64 // the function libraries' Lua heap at the idle tail's end, KB (NaN unread)
	RedisBytesPerHost      float64 // (used_memory after seeding − before) / hosts
	SeenBytesPerHost       float64 // the part of it in the seen-URL set
	DNSQueriesPerHost      float64 // queries the site's DNS server answered (A and AAAA each) / hosts
	ConnsPerHost           float64 // HTTP connections the site accepted / hosts
	Claims                 uint64  // claim round trips of the slaves (their claim_seconds histograms)
	ClaimP50Ms, ClaimP99Ms float64
	// IdleCmdsPerSec and IdleScriptsPerSec are the Redis commands
	// (commandstats calls, those run inside scripts included) and
	// function calls a second while the master and the slaves waited
	// on the held page, for IdleSeconds; this suite's own monitoring
	// commands are left out.
	IdleCmdsPerSec, IdleScriptsPerSec, IdleSeconds float64
	// CPU ms a page, to the last page done (the held page aside):
	// slaves, master, Redis, MySQL and their sum. MasterInProcess says the
	// master's figure is this process's (the site and DNS server too).
	SlaveMs, MasterMs, RedisMs, MySQLMs, AllInMs float64
	MasterInProcess                              bool
	// AllInTailMs is the all-in CPU a page to the master's exit: the
	// idle tail (IdleWindow), the held page and the finish included.
	AllInTailMs float64
}

// BroadReport is the broad benchmark.
type BroadReport struct {
	Date         time.Time
	CPUModel     string
	NumCPU       int
	GoVersion    string
	RedisVersion string
	Options      BroadOptions
	Runs         []*BroadRun
	// Narrow is the comparison run (NarrowHosts hosts, one slave) and
	// BroadVsNarrow the pages/s of the broad run of one slave / its.
	Narrow        *BroadRun
	BroadVsNarrow float64
	// CollyBroad and CollyNarrow are plain colly's crawls of the same
	// sites (Options.Colly), CollyBroadVsNarrow the ratio of their pages/s.
	CollyBroad, CollyNarrow  *CollyBroadRun
	CollyBroadVsNarrow       float64
	MarkdownPath, LatestPath string
}

// RunBroad runs the broad benchmark and writes its report.
func RunBroad(ctx context.Context, opt BroadOptions) (*BroadReport, error) {
	opt = opt.withDefaults()
	counts := slices.Clone(opt.Slaves)
	if opt.Many > 0 {
		counts = append(counts, opt.Many)
	}
	for _, n := range counts {
		if n < 1 || n > maxBroadSlaves {
			return nil, fmt.Errorf("benchsuite: slave count %d out of range 1..%d", n, maxBroadSlaves)
		}
	}
	for _, n := range opt.Slaves {
		if opt.Concurrency%n != 0 {
			return nil, fmt.Errorf("benchsuite: total concurrency %d does not split evenly over %d slaves", opt.Concurrency, n)
		}
	}
	for _, p := range []string{opt.SlaveBinary, opt.MasterBinary} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("benchsuite: %w", err)
		}
	}
	if opt.SlaveBinary == "" && opt.InProcess == nil {
		return nil, fmt.Errorf("benchsuite: no slaves: give a slave binary")
	}
	ropt, err := redisconn.Options(opt.Config)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	b := &bench{opt: Options{Config: opt.Config, SlaveBinary: opt.SlaveBinary, InProcess: opt.InProcess,
		Logger: opt.Logger, Out: opt.Out}, mon: redis.NewClient(ropt), monHook: &CountHook{}}
	defer b.mon.Close()
	b.mon.AddHook(b.monHook)
	if b.tmp, err = os.MkdirTemp("", "redcrawl-broad-"); err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	defer os.RemoveAll(b.tmp)
	now := time.Now()
	b.stamp = now.Format("20060102-150405")
	rep := &BroadReport{Date: now, CPUModel: cpuModel(), NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		Options: opt, BroadVsNarrow: math.NaN(), CollyBroadVsNarrow: math.NaN()}
	s, err := b.mon.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("benchsuite: redis at %s: %w", secret.URL(opt.Config.Redis.URL), err)
	}
	rep.RedisVersion = infoField(s, "redis_version")

	site, err := broadsite.Start(broadsite.Options{Hosts: opt.Hosts, PagesPerHost: opt.PagesPerHost,
		PageBytes: opt.PageBytes, Seed: SiteSeed})
	if err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	defer site.Close()
	fmt.Fprintf(opt.Out, "broad: %d hosts × %d pages (%d pages, ~%d bytes each), names answered by the DNS server at %s; slaves %v of %d fetches in total",
		opt.Hosts, opt.PagesPerHost, site.ExpectedPages(), opt.PageBytes, site.DNSAddr(), opt.Slaves, opt.Concurrency)
	if opt.Many > 0 {
		fmt.Fprintf(opt.Out, ", then %d slaves of %d", opt.Many, opt.ManyPerSlave)
	}
	fmt.Fprintln(opt.Out)
	for _, n := range counts {
		per := opt.Concurrency / n
		if n == opt.Many && !slices.Contains(opt.Slaves, n) {
			per = opt.ManyPerSlave
		}
		r, err := b.runBroad(ctx, site, opt, n, per, fmt.Sprintf("%d × %d", n, per))
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, r)
		freeMemory()
	}
	if opt.Colly {
		if rep.CollyBroad, err = b.runCollyBroad(ctx, site, opt.Concurrency, opt.HostConcurrency); err != nil {
			return nil, err
		}
		freeMemory()
	}
	site.Close()
	if opt.NarrowHosts > 0 {
		total := opt.Hosts * opt.PagesPerHost
		narrow, err := broadsite.Start(broadsite.Options{Hosts: opt.NarrowHosts,
			PagesPerHost: max(1, total/opt.NarrowHosts), PageBytes: opt.PageBytes, Seed: SiteSeed})
		if err != nil {
			return nil, fmt.Errorf("benchsuite: %w", err)
		}
		defer narrow.Close()
		r, err := b.runBroad(ctx, narrow, opt, 1, opt.Concurrency, fmt.Sprintf("%d hosts, 1 × %d", opt.NarrowHosts, opt.Concurrency))
		if err != nil {
			return nil, err
		}
		rep.Narrow = r
		for _, br := range rep.Runs {
			if br.Slaves == 1 {
				rep.BroadVsNarrow = ratio(br.PagesPerSec, r.PagesPerSec)
			}
		}
		if opt.Colly {
			freeMemory()
			if rep.CollyNarrow, err = b.runCollyBroad(ctx, narrow, opt.Concurrency, opt.HostConcurrency); err != nil {
				return nil, err
			}
			if rep.CollyBroad != nil {
				rep.CollyBroadVsNarrow = ratio(rep.CollyBroad.PagesPerSec, rep.CollyNarrow.PagesPerSec)
			}
		}
	}
	if err := rep.write(opt.OutDir, b.stamp); err != nil {
		return rep, err
	}
	fmt.Fprintf(opt.Out, "broad: wrote %s and %s\n", rep.MarkdownPath, rep.LatestPath)
	return rep, nil
}

// broadConfig is one broad crawl's config.
func (b *bench) broadConfig(site *broadsite.Site, opt BroadOptions, slaves, per int) (config.Config, error) {
	cfg := *opt.Config
	r := make([]byte, 3)
	rand.Read(r)
	cfg.Crawl.Name = fmt.Sprintf("broad-%s-n%d-%s", b.stamp, slaves, hex.EncodeToString(r))
	cfg.API.Listen = ""
	cfg.Admin.Listen = ""
	cfg.Slave.ProgressEvery = 0
	cfg.Slave.MetricsListen = "127.0.0.1:0"
	cfg.Slave.Concurrency = per
	cfg.Slave.Profile = ""
	cfg.Crawl.AllowHosts = []string{site.AllowHosts()}
	cfg.Crawl.Allow, cfg.Crawl.Deny = nil, nil
	cfg.Crawl.MaxDepth = 0
	cfg.Crawl.Strategy = "bfs"
	cfg.Crawl.ContentDedup = true
	cfg.Crawl.MaxPagesPerHost = max(cfg.Crawl.MaxPagesPerHost, int64(site.Options().PagesPerHost)+100)
	cfg.Crawl.MaxQueryVariants = 0
	cfg.Politeness.Delay = 0
	cfg.Politeness.Jitter = 0
	cfg.Politeness.JitterDist = "none"
	cfg.Politeness.HostConcurrency = opt.HostConcurrency
	cfg.Politeness.ObeyRobots = false
	cfg.Politeness.AutoThrottle = false
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.Proxies, cfg.Fetch.ProxyFile = nil, ""
	cfg.Fetch.Timeout = RunTimeout // the held page waits out the whole crawl
	cfg.DNS.Server = site.DNSAddr()
	cfg.Render.Enabled = false
	cfg.Rules.Dir = ""
	cfg.Storage.WARCDir = ""
	cfg.Master.Quiescence = Quiescence
	cfg.Dedup.ExpectedURLs = max(minExpectedURLs, int64(site.ExpectedPages()+1))
	cfg.Dedup.Mode = "exact"
	cfg.Log.Level = "warn"
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("benchsuite: broad crawl config: %w", err)
	}
	return cfg, nil
}

// runBroad crawls the site (every root and the held page seeded) with n
// slaves of per fetches each.
func (b *bench) runBroad(ctx context.Context, site *broadsite.Site, opt BroadOptions, n, per int, label string) (res *BroadRun, err error) {
	so := site.Options()
	cfg, err := b.broadConfig(site, opt, n, per)
	if err != nil {
		return nil, err
	}
	res = &BroadRun{Label: label, Hosts: so.Hosts, PerHost: so.PagesPerHost, Slaves: n, PerSlav: per,
		MasterInProcess: opt.MasterBinary == ""}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		if derr := frontier.DeleteCrawl(cctx, b.mon, cfg.Crawl.Name); derr != nil && err == nil {
			err = fmt.Errorf("benchsuite: delete crawl keys: %w", derr)
		}
	}()
	site.ResetHits()
	fmt.Fprintf(opt.Out, "broad: crawl %s: %d hosts × %d pages, %d slave(s) of %d fetches…\n", cfg.Crawl.Name, so.Hosts, so.PagesPerHost, n, per)
	myPids := mysqlPids()
	var run *sitecrawl.Local // set once StartLocal returns
	snap := func(master func() time.Duration) cpuSnap {
		c := cpuSnap{slaves: -1, master: master(), redis: redisCPU(ctx, b.mon), mysql: sumCPU(myPids)}
		if run != nil {
			c.slaves, _ = slavesUsage(run.SlavePids())
		}
		return c
	}
	selfMaster := func() time.Duration { return selfCPU() }

	runCtx, cancelRun := context.WithTimeoutCause(ctx, RunTimeout, fmt.Errorf("crawl took over %v", RunTimeout))
	defer cancelRun()
	ropt, err := redisconn.Options(&cfg)
	if err != nil {
		return nil, err
	}
	var clients []*redis.Client
	var cmu sync.Mutex
	newClient := func() *redis.Client {
		c := redis.NewClient(ropt)
		cmu.Lock()
		clients = append(clients, c)
		cmu.Unlock()
		return c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-s%d", cfg.Crawl.Name, i+1)
	}

	// seed every root and the held page; Redis's memory before and after
	// (once the last crawl's keys are freed)
	waitLazyFree(ctx, b.mon)
	info0, err := readInfo(ctx, b.mon)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: redis info: %w", err)
	}
	cpu0 := snap(selfMaster)
	seedStart := time.Now()
	var seedCPU time.Duration
	var start time.Time
	seeded := func(masterd.SeedResult) error {
		res.SeedSeconds = time.Since(seedStart).Seconds()
		seedCPU = selfCPU() - cpu0.master // the seed command's own CPU (the site is idle)
		info1, err := readInfo(ctx, b.mon)
		if err != nil {
			return fmt.Errorf("benchsuite: redis info: %w", err)
		}
		res.RedisBytesPerHost = float64(info1.usedMemory-info0.usedMemory) / float64(so.Hosts)
		res.SeenBytesPerHost = math.NaN()
		if seen, _, err := seenMemory(ctx, b.mon, cfg.Crawl.Name); err == nil {
			res.SeenBytesPerHost = float64(seen) / float64(so.Hosts)
		}
		start = time.Now()
		return nil
	}

	// the master: a process of MasterBinary, or in this process
	lopt := sitecrawl.LocalOptions{Config: &cfg, Seeds: append(site.Seeds(), site.HeldURL()), Seeded: seeded,
		MasterBinary: opt.MasterBinary, SlaveIDs: ids, Dir: b.tmp}
	if opt.MasterBinary == "" {
		lopt.Master = masterd.Options{Logger: opt.Logger, ProgressEvery: time.Hour, Redis: newClient()}
	}
	closeProxy, err := b.slaveOptions(&lopt, slaveProgram{binary: opt.SlaveBinary, inProcess: opt.InProcess}, nil, newClient)
	if err != nil {
		return nil, err
	}
	defer closeProxy()
	if run, err = sitecrawl.StartLocal(runCtx, lopt); err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	defer run.Stop()
	masterCPU := selfMaster
	if mp := run.MasterProcess(); mp != nil {
		masterCPU = func() time.Duration {
			select {
			case <-run.Done():
				if ps := mp.ProcessState; ps != nil {
					return ps.UserTime() + ps.SystemTime()
				}
				return -1
			default:
				return procCPU(mp.Process.Pid)
			}
		}
	}

	// wait for every page but the held one, then count the idle tail's
	// commands, scrape the claim latencies and release the held page
	want := int64(site.ExpectedPages())
	done := redisDone(b.mon, cfg.Crawl.Name)
	statsKey := frontier.NewKeys(cfg.Crawl.Name).Stats
	var cpuEnd cpuSnap
	for tick := time.NewTicker(broadPoll); ; {
		select {
		case <-runCtx.Done():
			tick.Stop()
			return nil, fmt.Errorf("benchsuite: broad crawl %s: %w", label, context.Cause(runCtx))
		case <-run.Done():
			tick.Stop()
			return nil, fmt.Errorf("benchsuite: broad crawl %s: the master exited before the held page was released: %v", label, run.Wait())
		case <-tick.C:
		}
		d, _, err := done(ctx)
		if err != nil {
			continue
		}
		failed, _ := b.mon.HGet(ctx, statsKey, "failed").Int64()
		if d+failed >= want {
			tick.Stop()
			res.Pages, res.Failed = d, failed
			break
		}
	}
	end := time.Now()
	res.Seconds = end.Sub(start).Seconds()
	res.PagesPerSec = float64(res.Pages) / res.Seconds
	cpuEnd = snap(masterCPU)

	time.Sleep(idleSettle)
	ri0, err0 := readInfo(ctx, b.mon)
	m0 := b.monHook.Cmds.Load()
	t0 := time.Now()
	time.Sleep(opt.IdleWindow)
	ri1, err1 := readInfo(ctx, b.mon)
	m1 := b.monHook.Cmds.Load()
	res.IdleSeconds = time.Since(t0).Seconds()
	res.IdleCmdsPerSec, res.IdleScriptsPerSec = math.NaN(), math.NaN()
	if err0 == nil && err1 == nil {
		res.IdleCmdsPerSec = float64(ri1.calls-ri0.calls-(m1-m0)) / res.IdleSeconds
		res.IdleScriptsPerSec = float64(ri1.scripts-ri0.scripts) / res.IdleSeconds
	}
	res.RedisLuaKB = math.NaN()
	if err1 == nil {
		res.RedisLuaKB = float64(ri1.luaFnBytes) / 1024
	}
	res.ClaimP50Ms, res.ClaimP99Ms = math.NaN(), math.NaN()
	if h, err := b.claimLatency(ctx, &cfg, n); err == nil {
		res.Claims = h.count
		res.ClaimP50Ms, res.ClaimP99Ms = 1000*h.quantile(0.5), 1000*h.quantile(0.99)
	} else {
		fmt.Fprintf(opt.Out, "broad: claim latency not measured: %v\n", err)
	}
	if site.HeldRequested() == 0 {
		fmt.Fprintf(opt.Out, "broad: the held page was not requested during the idle window\n")
	}
	site.Release()
	select {
	case <-run.Done():
	case <-runCtx.Done():
		return nil, fmt.Errorf("benchsuite: broad crawl %s: %w", label, context.Cause(runCtx))
	}
	cpuTail := snap(masterCPU)
	if err := run.Wait(); err != nil {
		return nil, fmt.Errorf("benchsuite: master: %w", err)
	}
	run.StopSlaves()
	st, err := masterd.Status(ctx, &cfg)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: status: %w", err)
	}
	if !st.Finished {
		return nil, fmt.Errorf("benchsuite: broad crawl %s: %w: %+v", label, errIncomplete, st.Stats)
	}
	res.Missing, res.Extra, res.Other = site.Hits()
	res.DNSQueriesPerHost = float64(site.DNSQueries()) / float64(so.Hosts)
	res.ConnsPerHost = float64(site.Conns()) / float64(so.Hosts)

	pages := res.Pages
	if opt.MasterBinary != "" {
		// the master's CPU: its process, and the seed command's
		cpu0.master = 0
		for _, c := range []*cpuSnap{&cpuEnd, &cpuTail} {
			if c.master >= 0 {
				c.master += seedCPU
			}
		}
	}
	res.SlaveMs = msPerPage(0, cpuEnd.slaves, pages)
	res.MasterMs = msPerPage(cpu0.master, cpuEnd.master, pages)
	res.RedisMs = msPerPage(cpu0.redis, cpuEnd.redis, pages)
	res.MySQLMs = msPerPage(cpu0.mysql, cpuEnd.mysql, pages)
	res.AllInMs = res.SlaveMs + res.MasterMs + res.RedisMs + res.MySQLMs
	res.AllInTailMs = msPerPage(0, cpuTail.slaves, pages) + msPerPage(cpu0.master, cpuTail.master, pages) +
		msPerPage(cpu0.redis, cpuTail.redis, pages) + msPerPage(cpu0.mysql, cpuTail.mysql, pages)
	res.RedisCPUPerPageUs = 1000 * msPerPage(cpu0.redis, cpuTail.redis, pages)
	if in := opt.SlaveBinary == ""; in {
		// in-process slaves: their CPU is this process's, counted as the master's
		res.SlaveMs = 0
		res.AllInMs = res.MasterMs + res.RedisMs + res.MySQLMs
		res.AllInTailMs = msPerPage(cpu0.master, cpuTail.master, pages) + msPerPage(cpu0.redis, cpuTail.redis, pages) +
			msPerPage(cpu0.mysql, cpuTail.mysql, pages)
	}
	fmt.Fprintf(opt.Out, "broad: %s: %d pages in %.1fs, %.0f pages/s; Redis %.0f µs a page, %.0f bytes a host; claim p50 %.2f ms p99 %.2f ms; idle %.0f commands/s; %.2f DNS queries and %.2f connections a host; all-in CPU %.3f ms a page (%.3f with the tail)\n",
		label, res.Pages, res.Seconds, res.PagesPerSec, res.RedisCPUPerPageUs, res.RedisBytesPerHost,
		res.ClaimP50Ms, res.ClaimP99Ms, res.IdleCmdsPerSec, res.DNSQueriesPerHost, res.ConnsPerHost, res.AllInMs, res.AllInTailMs)
	return res, nil
}

// claimLatency merges the claim histograms of the crawl's n slaves, found
// by their heartbeats' metrics addresses.
func (b *bench) claimLatency(ctx context.Context, cfg *config.Config, n int) (*claimHist, error) {
	f, err := frontier.NewRedis(ctx, b.mon, frontier.OptionsFromConfig(cfg))
	if err != nil {
		return nil, err
	}
	var addrs []string
	for range claimScrapeAttempts {
		ss, err := f.Slaves(ctx)
		if err != nil {
			return nil, err
		}
		addrs = addrs[:0]
		for _, s := range ss {
			if s.MetricsAddr != "" {
				addrs = append(addrs, s.MetricsAddr)
			}
		}
		if len(addrs) >= n {
			break
		}
		time.Sleep(claimScrapeAttemptGap)
	}
	if len(addrs) < n {
		return nil, fmt.Errorf("%d of %d slaves name a metrics address", len(addrs), n)
	}
	return scrapeClaims(ctx, addrs)
}

// waitLazyFree waits, up to a minute, until Redis has freed the keys
// deleted in the background (lazyfree_pending_objects 0), so that
// used_memory measures what comes next.
func waitLazyFree(ctx context.Context, rdb *redis.Client) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		s, err := rdb.Info(ctx, "memory").Result()
		if err != nil || infoField(s, "lazyfree_pending_objects") == "0" {
			return
		}
	}
}
