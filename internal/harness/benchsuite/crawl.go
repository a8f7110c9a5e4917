package benchsuite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/tcpproxy"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/sitecrawl"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// minExpectedURLs is the smallest dedup.expected_urls the config accepts.
const minExpectedURLs = 1000

// crawlConfig derives one crawl's config from the base; with api, the
// master serves the work API (TLS, the bench's certificate) on a free
// loopback port.
func (b *bench) crawlConfig(slaves int, api bool) (config.Config, error) {
	cfg := *b.opt.Config
	r := make([]byte, 3)
	rand.Read(r)
	kind := ""
	if api {
		kind = "api-"
	}
	cfg.Crawl.Name = fmt.Sprintf("bench-%s-%sn%d-%s", b.stamp, kind, slaves, hex.EncodeToString(r))
	cfg.API.Listen = ""
	if api {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return cfg, fmt.Errorf("benchsuite: a port for the work API: %w", err)
		}
		cfg.API.Listen = ln.Addr().String()
		ln.Close()
		cfg.API.TLSCert, cfg.API.TLSKey, cfg.API.AllowInsecure = b.certs.ServerCert, b.certs.ServerKey, false
	}
	cfg.Admin.Listen = "" // no dashboard; it could collide with a running master
	cfg.Slave.ProgressEvery = 0
	cfg.Crawl.AllowHosts = append([]string(nil), b.hostIPs...)
	cfg.Crawl.Allow, cfg.Crawl.Deny = nil, nil
	cfg.Crawl.MaxDepth = 0
	cfg.Crawl.Strategy = "bfs"
	cfg.Crawl.ContentDedup = true
	cfg.Crawl.MaxPagesPerHost = max(cfg.Crawl.MaxPagesPerHost, int64(b.opt.PagesPerHost)+100)
	cfg.Crawl.MaxQueryVariants = 0
	cfg.Politeness.Delay = 0
	cfg.Politeness.Jitter = 0
	cfg.Politeness.JitterDist = "none"
	cfg.Politeness.HostConcurrency = b.opt.HostConcurrency
	cfg.Politeness.ObeyRobots = false
	cfg.Politeness.AutoThrottle = false
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.Proxies, cfg.Fetch.ProxyFile = nil, ""
	cfg.Slave.Concurrency = b.opt.Concurrency
	cfg.Slave.Profile = ""
	cfg.Render.Enabled = false
	cfg.Rules.Dir = ""
	cfg.Storage.WARCDir = ""
	cfg.Master.Quiescence = Quiescence
	cfg.Dedup.ExpectedURLs = max(minExpectedURLs, int64(len(b.expected)))
	cfg.Dedup.Mode = "exact"
	cfg.Log.Level = "warn"
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("benchsuite: crawl config: %w", err)
	}
	return cfg, nil
}

// slaveOptions fills in how the slaves ids of a program run: processes
// of its binary (with the slaves' config) or functions of this process.
// With tokens (the slaves' token files by id), they are slaves of the
// work API at cfg.API.Listen (through a tcpproxy with APILatency), with no
// Redis or MySQL address; closeProxy closes that proxy.
func (b *bench) slaveOptions(lopt *sitecrawl.LocalOptions, prog slaveProgram, tokens map[string]string,
	newClient func() *redis.Client) (closeProxy func(), err error) {
	cfg := lopt.Config
	closeProxy = func() {}
	apiAddr := cfg.API.Listen
	if tokens != nil && b.opt.APILatency > 0 {
		proxy, err := tcpproxy.Start(apiAddr, b.opt.APILatency)
		if err != nil {
			return nil, fmt.Errorf("benchsuite: the work API's latency: %w", err)
		}
		apiAddr, closeProxy = proxy.Addr(), func() { proxy.Close() }
	}
	slaveCfg := func(id string) *config.Config {
		if tokens == nil {
			return cfg
		}
		c := *cfg
		c.API = config.Default().API
		c.Redis.URL = "redis://127.0.0.1:1/0" // nothing: an API slave never dials Redis
		c.MySQL.DSN = "nobody:x@tcp(127.0.0.1:1)/none"
		c.Slave.API = config.SlaveAPI{URLs: []string{"https://" + apiAddr}, TokenFile: tokens[id], CAFile: b.certs.CA}
		return &c
	}
	if prog.binary != "" {
		lopt.SlaveConfig = slaveCfg(lopt.SlaveIDs[0])
		lopt.Slaves = slaveproc.Options{Binary: prog.binary, LogDir: b.tmp, StopTimeout: SlaveStopTimeout}
		if tokens != nil {
			lopt.Slaves.EnvFor = func(id string) []string { return []string{config.EnvPrefix + "SLAVE_API_TOKEN_FILE=" + tokens[id]} }
		}
		return closeProxy, nil
	}
	lopt.StartSlaves = func(ids []string, _ func(error)) (func(), error) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		stop := func() { cancel(); wg.Wait() }
		for _, id := range ids {
			run, err := prog.inProcess(slaveCfg(id), id, newClient(), b.opt.Logger)
			if err != nil {
				stop()
				return nil, fmt.Errorf("benchsuite: slave: %w", err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); run(ctx) }()
		}
		return stop, nil
	}
	return closeProxy, nil
}

// slavesRSS returns the largest VmRSS of the slave processes now, or 0.
func slavesRSS(pids []int) int64 {
	var m int64
	for _, pid := range pids {
		m = max(m, procStatusKB(pid, "VmRSS"))
	}
	return m
}

// slavesUsage returns the slave processes' CPU and their largest peak
// RSS, or -1s.
func slavesUsage(pids []int) (cpu time.Duration, peak int64) {
	if len(pids) == 0 {
		return -1, -1
	}
	peak = -1
	for _, pid := range pids {
		if d := procCPU(pid); d >= 0 {
			cpu += d
		} else {
			return -1, -1
		}
		peak = max(peak, procStatusKB(pid, "VmHWM"))
	}
	return cpu, peak
}

// runCrawl crawls the site with the master and n slaves of a program,
// slaves of the work API if prog.api.
func (b *bench) runCrawl(ctx context.Context, n int, prog slaveProgram) (res *RunResult, err error) {
	api := prog.api
	cfg, err := b.crawlConfig(n, api)
	if err != nil {
		return nil, err
	}
	res = &RunResult{Slaves: n, API: api, Subprocess: prog.binary != "", Crawl: cfg.Crawl.Name, Colly: prog.colly,
		SlaveCPUPer1k: math.NaN(), SlavePeakRSS: -1, SlaveRSSFirst: -1, SlaveRSSLast: -1}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := frontier.DeleteCrawl(cctx, b.mon, cfg.Crawl.Name); derr != nil && err == nil {
			err = fmt.Errorf("benchsuite: delete crawl keys: %w", derr)
		}
	}()
	b.site.ResetHits()
	fmt.Fprintf(b.opt.Out, "bench: crawl %s with %d slave(s)…\n", cfg.Crawl.Name, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-s%d", cfg.Crawl.Name, i+1)
	}
	var tokens map[string]string // API slaves' token files by id
	if api {
		if tokens, err = b.issueTokens(ctx, &cfg, ids); err != nil {
			return nil, err
		}
	}

	ropt, err := redisconn.Options(&cfg)
	if err != nil {
		return nil, err
	}
	hook := &CountHook{}
	var (
		cmu     sync.Mutex
		clients []*redis.Client
	)
	newClient := func() *redis.Client {
		c := redis.NewClient(ropt)
		c.AddHook(hook)
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

	info0, err := readInfo(ctx, b.mon)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: redis info: %w", err)
	}
	mon0 := b.monHook.Cmds.Load()
	myPids := mysqlPids()
	my0 := sumCPU(myPids)
	cpu0 := selfCPU()
	start := time.Now()

	runCtx, cancelRun := context.WithTimeoutCause(ctx, RunTimeout, fmt.Errorf("crawl took over %v", RunTimeout))
	defer cancelRun()
	var run atomic.Pointer[sitecrawl.Local] // set once StartLocal returns
	pids := func() []int {
		if r := run.Load(); r != nil {
			return r.SlavePids()
		}
		return nil
	}
	smp := &sampler{start: start, done: redisDone(b.mon, cfg.Crawl.Name), rdb: b.mon, crawl: cfg.Crawl.Name,
		hosts: b.hostKeys, baseMem: info0.usedMemory}
	if prog.binary != "" {
		smp.slaveRSS = func() int64 { return slavesRSS(pids()) }
	}
	sctx, stopSampler := context.WithCancel(runCtx)
	var swg sync.WaitGroup
	defer func() { stopSampler(); swg.Wait() }()

	// the figures are read when the master declares the crawl finished,
	// before a master of API slaves keeps its API up for them to leave;
	// those are then stopped, as direct ones are once the master is gone
	var (
		readOnce            sync.Once
		masterEnd           time.Time
		slaveCPU, cpu1, my1 time.Duration
		slaveRSS, mon1      int64
		info1               redisInfo
		ierr                error
		read                = func() {
			readOnce.Do(func() {
				masterEnd = time.Now()
				slaveCPU, slaveRSS = slavesUsage(pids())
				cpu1 = selfCPU()
				my1 = sumCPU(myPids)
				stopSampler()
				swg.Wait()
				info1, ierr = readInfo(ctx, b.mon)
				mon1 = b.monHook.Cmds.Load()
			})
		}
	)
	mopt := masterd.Options{Logger: b.opt.Logger, ProgressEvery: time.Hour, Redis: newClient()}
	var served apiServed
	if api {
		mopt.APIServed = served.add
	}
	lopt := sitecrawl.LocalOptions{Config: &cfg, Seeds: b.site.Seeds(), Master: mopt, SlaveIDs: ids,
		SlavesAfterAPI: api, Dir: b.tmp,
		// the sampler from the seeding on, as the time
		Seeded: func(masterd.SeedResult) error {
			swg.Add(1)
			go func() { defer swg.Done(); smp.run(sctx) }()
			return nil
		}}
	lopt.Master.Finished = func() {
		read()
		if r := run.Load(); api && r != nil {
			r.StopSlaves()
		}
	}
	closeProxy, err := b.slaveOptions(&lopt, prog, tokens, newClient)
	if err != nil {
		return nil, err
	}
	defer closeProxy()
	r, err := sitecrawl.StartLocal(runCtx, lopt)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	run.Store(r)
	defer r.Stop()
	<-r.Done()
	read()
	r.StopSlaves()
	if err := r.Wait(); err != nil {
		if !r.SlavesStarted() {
			return nil, fmt.Errorf("benchsuite: master: %w", err)
		}
		return nil, fmt.Errorf("benchsuite: %d-slave crawl: %w", n, err)
	}
	if cause := context.Cause(runCtx); cause != nil {
		return nil, fmt.Errorf("benchsuite: %d-slave crawl: %w", n, cause)
	}
	if ierr != nil {
		return nil, fmt.Errorf("benchsuite: redis info: %w", ierr)
	}
	st, err := masterd.Status(ctx, &cfg)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: status: %w", err)
	}
	if !st.Finished {
		return nil, fmt.Errorf("benchsuite: %d-slave crawl: %w: %+v", n, errIncomplete, st.Stats)
	}

	elapsed := masterEnd.Sub(start) - cfg.Master.Quiescence
	if st.FinishedAt > 0 {
		if e := time.UnixMilli(st.FinishedAt).Sub(start) - cfg.Master.Quiescence; e > 0 && e < elapsed {
			elapsed = e
		}
	}
	pages := st.Done
	res.Pages, res.Failed, res.Lost = pages, st.Failed, st.Lost
	res.APIRequestsPerPage, res.APIClaimMs = math.NaN(), math.NaN()
	if api {
		served.mu.Lock()
		res.APIRequestsPerPage = perPage(served.n, pages)
		if served.claims > 0 {
			res.APIClaimMs = 1000 * served.claimTime.Seconds() / float64(served.claims)
		}
		served.mu.Unlock()
	}
	res.Seconds = elapsed.Seconds()
	res.PagesPerSec = float64(pages) / elapsed.Seconds()
	res.ProcessCPUPer1k = per1k(cpu1-cpu0, pages)
	if slaveCPU >= 0 {
		res.SlaveCPUPer1k = per1k(slaveCPU, pages)
		res.SlavePeakRSS = slaveRSS
	}

	// Redis: the server's counts less this suite's own monitoring commands
	calls := info1.calls - info0.calls - (mon1 - mon0)
	res.RedisCallsPerPage = perPage(calls, pages)
	if prog.binary == "" {
		res.RoundTripsPerPage = perPage(hook.Cmds.Load(), pages)
		res.ScriptsPerPage = perPage(hook.Scripts.Load(), pages)
	} else {
		// the slaves' scripts from the server, the master's commands from its hook
		scripts := info1.scripts - info0.scripts
		res.ScriptsPerPage = perPage(scripts, pages)
		res.RoundTripsPerPage = perPage(scripts-hook.Scripts.Load()+hook.Cmds.Load(), pages)
	}
	res.RedisCPUPer1k = per1k(time.Duration((info1.cpu-info0.cpu)*float64(time.Second)), pages)
	res.MySQLCPUPer1k = math.NaN()
	if my0 >= 0 && my1 >= 0 {
		res.MySQLCPUPer1k = per1k(my1-my0, pages)
	}
	res.AllInPer1k = res.ProcessCPUPer1k + res.RedisCPUPer1k + res.MySQLCPUPer1k
	if prog.binary != "" {
		res.AllInPer1k += res.SlaveCPUPer1k
	}
	smp.mu.Lock()
	res.RedisPeakCore = smp.peakCore
	res.Series = smp.series
	res.SlaveRSSFirst, res.SlaveRSSLast = rssEnds(smp.series, pages)
	res.PeakQueued = smp.peakQueued
	if smp.probeQueued > 0 {
		res.QueuedBytesPerURL = float64(smp.probeBytes) / float64(smp.probeQueued)
		res.QueuedGrowthPerURL = float64(smp.probeGrowth) / float64(smp.probeQueued)
	} else {
		res.QueuedBytesPerURL, res.QueuedGrowthPerURL = math.NaN(), math.NaN()
	}
	smp.mu.Unlock()
	if seenBytes, _, err := seenMemory(ctx, b.mon, cfg.Crawl.Name); err == nil && st.Seen > 0 {
		res.SeenBytesPerURL = float64(seenBytes) / float64(st.Seen)
	} else {
		res.SeenBytesPerURL = math.NaN()
	}

	db, err := masterd.OpenStore(ctx, &cfg)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: mysql: %w", err)
	}
	counts, err := db.Counts(ctx, cfg.Crawl.Name)
	// every page's fetch time, in order, in one read: the last ends the
	// crawl to the millisecond (the finish decision comes up to one check
	// interval later), the k-th made 99% of the expected pages, the first
	// starts the ramp
	var fetched []time.Time
	if err == nil {
		fetched, err = fetchTimes(ctx, db.DB, cfg.Crawl.Name)
	}
	db.Close()
	var last sql.NullTime
	res.To99Seconds, res.PagesPerSec99, res.FinishLag = math.NaN(), math.NaN(), math.NaN()
	res.RampSeconds, res.FirstFetch = math.NaN(), math.NaN()
	if len(fetched) > 0 {
		last = sql.NullTime{Time: fetched[len(fetched)-1], Valid: true}
		ts := make([]time.Duration, len(fetched))
		for i, at := range fetched {
			ts[i] = at.Sub(start)
		}
		res.RampSeconds, res.FirstFetch = ramp(ts), ts[0].Seconds()
		if k := pages99(len(b.expected)); len(ts) >= k && ts[k-1] > 0 {
			res.To99Seconds = ts[k-1].Seconds()
			res.PagesPerSec99 = float64(k) / ts[k-1].Seconds()
		}
	}
	if last.Valid && st.FinishedAt > 0 {
		res.FinishLag = time.UnixMilli(st.FinishedAt).Sub(last.Time).Seconds()
	}
	if err != nil {
		return nil, fmt.Errorf("benchsuite: mysql: %w", err)
	}
	if e := last.Time.Sub(start); last.Valid && e > 0 && e < elapsed {
		elapsed = e
		res.Seconds = elapsed.Seconds()
		res.PagesPerSec = float64(pages) / elapsed.Seconds()
	}
	res.MySQLRows = counts.Pages + counts.Exceptions
	res.MySQLRowsPerSec = float64(res.MySQLRows) / elapsed.Seconds()
	res.Missing, res.Extra = b.exactlyOnce()
	return res, nil
}

// fetchTimes returns the fetch times of a crawl's pages, earliest first.
func fetchTimes(ctx context.Context, db *sql.DB, crawl string) ([]time.Time, error) {
	rows, err := db.QueryContext(ctx, "SELECT fetched_at FROM pages WHERE crawl = ? ORDER BY fetched_at", crawl)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, at)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// issueTokens issues a work API token for each slave id, as
// `master token issue` would, into files in the bench's directory.
func (b *bench) issueTokens(ctx context.Context, cfg *config.Config, ids []string) (map[string]string, error) {
	db, err := masterd.OpenStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: mysql: %w", err)
	}
	defer db.Close()
	files := map[string]string{}
	for _, id := range ids {
		tok, _, err := db.IssueToken(ctx, cfg.Crawl.Name, id, store.TokenLimits{})
		if err != nil {
			return nil, fmt.Errorf("benchsuite: %w", err)
		}
		p := filepath.Join(b.tmp, id+".token")
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("benchsuite: token file: %w", err)
		}
		files[id] = p
	}
	return files, nil
}

// apiServed counts the work API's requests of a crawl and times its
// claims (masterd.Options.APIServed).
type apiServed struct {
	mu        sync.Mutex
	n, claims int64
	claimTime time.Duration
}

func (a *apiServed) add(path string, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	if path == api.PathClaim {
		a.claims++
		a.claimTime += d
	}
}
