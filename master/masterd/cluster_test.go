package masterd_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

const politeDelay = 25 * time.Millisecond

// clusterConfig is a config for a test crawl with its own crawl name and
// database.
func clusterConfig(t *testing.T) *config.Config { return clusterConfigB(t) }

func clusterConfigB(t testing.TB) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("it")
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Admin.Listen = "127.0.0.1:0" // a free port: tests run side by side
	cfg.Fetch.Timeout = 5 * time.Second
	cfg.Politeness.Delay = politeDelay
	cfg.Politeness.Jitter = 0.2
	cfg.Lease.Duration = 5 * time.Second
	cfg.Lease.RetryBase = 200 * time.Millisecond
	cfg.Slave.Concurrency = 8
	cfg.Slave.HeartbeatInterval = 300 * time.Millisecond
	cfg.Slave.ShutdownTimeout = 3 * time.Second
	cfg.Slave.IdlePoll = 50 * time.Millisecond
	cfg.Master.DeadAfter = 2 * time.Second
	cfg.Master.RecoverInterval = 200 * time.Millisecond
	cfg.Master.Quiescence = 800 * time.Millisecond
	cfg.Master.HeartbeatSample = time.Second
	cfg.Dedup.ExpectedURLs = 10000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCrawl(cfg) })
	return &cfg
}

func deleteCrawl(cfg config.Config) {
	opt, err := redis.ParseURL(cfg.Redis.URL)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name)
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return discardLogger()
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(ioDiscard{}, nil)) }

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

func startSite(t *testing.T, latency time.Duration) *testsite.Site {
	t.Helper()
	site, err := testsite.Start(testsite.Options{Hosts: 5, PagesPerHost: 220, LinksPerPage: 6,
		PageBytes: 2048, Robots: true, Specials: true, Seed: 7, Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	if n := len(site.Expected()); n < 1000 {
		t.Fatalf("test site has %d URLs, want 1000+", n)
	}
	return site
}

// slaveHandle runs an in-process slave.
type slaveHandle struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startSlave(t testing.TB, cfg *config.Config, id string) *slaveHandle {
	t.Helper()
	s, err := slaved.New(cfg, slaved.Options{ID: id, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &slaveHandle{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(h.done); s.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *slaveHandle) stop() {
	h.cancel()
	<-h.done
}

// runMaster runs the master until the crawl is finished.
func runMaster(t *testing.T, cfg *config.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var finished atomic.Int32
	opt := masterd.Options{ExitWhenDone: true, Logger: testLogger(t), Finished: func() { finished.Add(1) }}
	if err := masterd.New(cfg, opt).Run(ctx); err != nil {
		t.Fatalf("master: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish in 3 minutes")
	}
	if n := finished.Load(); n != 1 {
		t.Errorf("Options.Finished was called %d times, want once", n)
	}
}

func seed(t *testing.T, cfg *config.Config, site *testsite.Site) {
	t.Helper()
	cfg.Crawl.AllowHosts = siteHosts(site)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := masterd.Seed(context.Background(), cfg, site.Seeds())
	if err != nil || res.Added != len(site.Seeds()) {
		t.Fatalf("seed: %+v %v", res, err)
	}
}

// checkHits checks, from the site's request log, coverage and exactly-once
// (re-fetches only for lost leases), that robots.txt was fetched once per
// host (again only after a lost lease) and that no disallowed or unknown URL
// was requested. label prefixes the errors. It returns the expected URLs
// and the lost leases by URL.
func checkHits(t testing.TB, label string, site *testsite.Site, lost []events.Lost) (map[string]int, map[string]int) {
	return checkHitsRobots(t, label, site, lost, 1)
}

// checkHitsRobots is checkHits with up to robotsPerHost robots.txt fetches
// a host: a slave of the work API fetches the robots.txt of the hosts it
// claims itself (it writes no shared record).
func checkHitsRobots(t testing.TB, label string, site *testsite.Site, lost []events.Lost, robotsPerHost int) (map[string]int, map[string]int) {
	t.Helper()
	expected := site.Expected()
	hits := site.HitCounts()
	lostBy := map[string]int{}
	for _, l := range lost {
		lostBy[l.URL]++
	}
	var missing, extra []string
	for u, want := range expected {
		got := hits[u]
		if got < want {
			missing = append(missing, fmt.Sprintf("%s (%d of %d)", u, got, want))
		}
		if got > want+lostBy[u] {
			extra = append(extra, fmt.Sprintf("%s (%d, want %d + %d lost)", u, got, want, lostBy[u]))
		}
	}
	robots := 0
	for u, n := range hits {
		switch {
		case strings.HasSuffix(u, "/robots.txt"):
			robots += n
		case strings.Contains(u, "/private/"):
			t.Errorf("%srobots.txt-disallowed URL fetched: %s", label, u)
		case expected[u] == 0:
			t.Errorf("%sunexpected URL fetched %d times: %s", label, n, u)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("%s%d expected URLs not fetched, e.g. %v", label, len(missing), missing[:min(5, len(missing))])
	}
	if len(extra) > 0 {
		t.Errorf("%s%d URLs fetched more than once without a lost lease, e.g. %v", label, len(extra), extra[:min(5, len(extra))])
	}
	if hosts := len(site.HostURLs()); robots > robotsPerHost*hosts+len(lost) { // once per host, shared through Redis
		t.Errorf("%srobots.txt fetched %d times for %d hosts", label, robots, hosts)
	}
	return expected, lostBy
}

// checkCrawl checks coverage, exactly-once (re-fetches only for lost
// leases), robots.txt, politeness as the site saw it, and what landed in
// MySQL.
func checkCrawl(t *testing.T, cfg *config.Config, site *testsite.Site, lost []events.Lost) {
	t.Helper()
	checkCrawlRobots(t, cfg, site, lost, 1)
}

// checkCrawlRobots is checkCrawl with up to robotsPerHost robots.txt
// fetches a host (checkHitsRobots).
func checkCrawlRobots(t *testing.T, cfg *config.Config, site *testsite.Site, lost []events.Lost, robotsPerHost int) {
	t.Helper()
	ctx := context.Background()
	st, err := masterd.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished || st.Queued != 0 || st.InFlight != 0 || st.Retry != 0 {
		t.Errorf("status %+v, want finished and empty", st)
	}
	expected, lostBy := checkHitsRobots(t, "", site, lost, robotsPerHost)

	// politeness across all slaves, as the site saw it
	byHost := map[string][]time.Time{}
	for _, h := range site.Hits() {
		// wall clock, as Redis stamps next-allowed times; Go's monotonic
		// clock may run at another rate while NTP slews the wall clock
		byHost[h.Host] = append(byHost[h.Host], h.At.Round(0))
	}
	for host, ts := range byHost {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < cfg.Politeness.Delay {
				t.Errorf("host %s: two requests %v apart, delay is %v", host, gap, cfg.Politeness.Delay)
				break
			}
		}
	}

	// MySQL: one page row per fetched URL (a re-fetch after a lost lease may add one)
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pages, err := db.PageURLs(ctx, cfg.Crawl.Name)
	if err != nil {
		t.Fatal(err)
	}
	for u := range expected {
		if pages[u] < 1 || pages[u] > 1+lostBy[u] {
			t.Errorf("page rows for %s: %d", u, pages[u])
			break
		}
	}
	exc, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfg.Crawl.Name, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	statuses := map[int]bool{}
	for _, e := range exc {
		kinds[e.Kind]++
		statuses[e.Status] = true
	}
	if kinds[events.KindRobotsDenied] == 0 {
		t.Errorf("no robots_denied exceptions: %v", kinds)
	}
	// /retry-after answers 429 once and /flaky 500 once: a slave killed
	// after that answer and before its ack takes the exception with it,
	// and the refetch gets 200
	onceLost := map[int]bool{}
	for u, n := range lostBy {
		if n > 0 && strings.HasSuffix(u, "/retry-after") {
			onceLost[429] = true
		}
		if n > 0 && strings.HasSuffix(u, "/flaky") {
			onceLost[500] = true
		}
	}
	for _, code := range []int{404, 500, 429} {
		if !statuses[code] && !onceLost[code] {
			t.Errorf("no exception with HTTP status %d recorded: %v", code, kinds)
		}
	}
}

func TestClusterThreeSlaves(t *testing.T) {
	cfg := clusterConfig(t)
	site := startSite(t, 0)
	seed(t, cfg, site)
	for i := range 3 {
		startSlave(t, cfg, fmt.Sprintf("slave-%d", i+1))
	}
	runMaster(t, cfg)
	checkCrawl(t, cfg, site, nil)

	// every slave joined; counters add up
	ctx := context.Background()
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := db.SlaveEvents(ctx, cfg.Crawl.Name)
	if err != nil {
		t.Fatal(err)
	}
	joins := map[string]bool{}
	for _, e := range evs {
		if e.Kind == events.SlaveJoin {
			joins[e.Slave] = true
		}
	}
	if len(joins) != 3 {
		t.Errorf("joins recorded for %d slaves, want 3: %+v", len(joins), evs)
	}
	if c, _ := db.Counts(ctx, cfg.Crawl.Name); c.Heartbeats == 0 {
		t.Error("no heartbeat samples in MySQL")
	}
}

// buildSlave builds bin/slave once for tests that kill it.
var buildSlave = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "redcrawl-slave-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "slave")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/redcrawl/redcrawl/slave")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build slave: %v\n%s", err, out)
	}
	return bin, nil
})

// writeConfig writes cfg as YAML-free environment for a slave process.
func slaveEnv(cfg *config.Config) []string {
	env := os.Environ()
	return append(env,
		"CRAWLER_REDIS_URL="+cfg.Redis.URL,
		"CRAWLER_MYSQL_DSN="+cfg.MySQL.DSN,
		"CRAWLER_CRAWL_NAME="+cfg.Crawl.Name,
		"CRAWLER_CRAWL_ALLOW_HOSTS="+strings.Join(cfg.Crawl.AllowHosts, ","),
		"CRAWLER_FETCH_ALLOW_PRIVATE_NETWORKS=true",
		"CRAWLER_FETCH_TIMEOUT="+cfg.Fetch.Timeout.String(),
		"CRAWLER_POLITENESS_DELAY="+cfg.Politeness.Delay.String(),
		fmt.Sprintf("CRAWLER_POLITENESS_JITTER=%g", cfg.Politeness.Jitter),
		"CRAWLER_LEASE_DURATION="+cfg.Lease.Duration.String(),
		"CRAWLER_LEASE_RETRY_BASE="+cfg.Lease.RetryBase.String(),
		fmt.Sprintf("CRAWLER_SLAVE_CONCURRENCY=%d", cfg.Slave.Concurrency),
		"CRAWLER_SLAVE_HEARTBEAT_INTERVAL="+cfg.Slave.HeartbeatInterval.String(),
		"CRAWLER_SLAVE_IDLE_POLL="+cfg.Slave.IdlePoll.String(),
		"CRAWLER_MASTER_DEAD_AFTER="+cfg.Master.DeadAfter.String(),
		fmt.Sprintf("CRAWLER_DEDUP_EXPECTED_URLS=%d", cfg.Dedup.ExpectedURLs),
		"CRAWLER_LOG_LEVEL=warn",
	)
}

func TestClusterSlaveKilled(t *testing.T) {
	bin, err := buildSlave()
	if err != nil {
		t.Fatal(err)
	}
	cfg := clusterConfig(t)
	site := startSite(t, 30*time.Millisecond)
	seed(t, cfg, site)
	startSlave(t, cfg, "steady-1")
	startSlave(t, cfg, "steady-2")
	victim := exec.Command(bin, "run", "--config", "", "--id", "victim")
	victim.Env = slaveEnv(cfg)
	victim.Stderr = os.Stderr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })

	masterDone := make(chan struct{})
	go func() { defer close(masterDone); runMaster(t, cfg) }()

	// kill the victim while it holds a lease, after it has done some work
	opt, _ := redis.ParseURL(cfg.Redis.URL)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys := frontier.NewKeys(cfg.Crawl.Name)
	ctx := context.Background()
	killed := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !killed; {
		info, _ := rdb.Get(ctx, keys.SlaveBeat("victim")).Result()
		var holding bool
		if strings.Contains(info, `"pages"`) && !strings.Contains(info, `"pages":0,`) {
			all, _ := rdb.HVals(ctx, keys.SlaveLeaseData("victim")).Result()
			for _, v := range all {
				if strings.HasPrefix(v, "victim\t") {
					holding = true
				}
			}
		}
		if holding {
			victim.Process.Signal(syscall.SIGKILL)
			killed = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !killed {
		t.Fatal("victim never held a lease")
	}
	victim.Wait()
	<-masterDone

	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LostTasks(ctx, cfg.Crawl.Name, 10000)
	if err != nil {
		t.Fatal(err)
	}
	victimLost := 0
	for _, l := range lost {
		if l.Slave == "victim" {
			victimLost++
			if l.LeasedAt == 0 || l.DetectedAt < l.LeasedAt || l.Attempt < 1 {
				t.Errorf("lost task record %+v", l)
			}
		}
	}
	if victimLost == 0 {
		t.Fatalf("no lost_tasks rows for the killed slave: %+v", lost)
	}
	evs, _ := db.SlaveEvents(ctx, cfg.Crawl.Name)
	death := false
	for _, e := range evs {
		if e.Slave == "victim" && e.Kind == events.SlaveDeath {
			death = true
		}
	}
	if !death {
		t.Errorf("no death recorded for the killed slave: %+v", evs)
	}
	checkCrawl(t, cfg, site, lost)
}

// TestClusterMySQLOutage takes MySQL away from the master mid-crawl, with
// direct slaves and with slaves of the work API (whose tokens the master
// looks up in MySQL): the master pauses its sink, the slaves go on or
// pause, and the crawl completes with full coverage.
func TestClusterMySQLOutage(t *testing.T) {
	for _, api := range []bool{false, true} {
		t.Run(slaveKind(api), func(t *testing.T) {
			cfg := clusterConfig(t)
			// the master reaches MySQL through a proxy that the test takes down
			dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
			if err != nil {
				t.Fatal(err)
			}
			// create the database and schema first, through the real server
			if db, err := store.Open(context.Background(), cfg.MySQL.DSN); err != nil {
				t.Fatal(err)
			} else {
				db.Close()
			}
			proxy := testutil.NewProxy(t, dsn.Addr)
			dsn.Addr = proxy.Addr()
			dsn.Timeout = time.Second
			cfg.MySQL.DSN = dsn.FormatDSN()

			site := startSite(t, 0)
			seed(t, cfg, site)
			startSlaves(t, cfg, api, 2)
			masterDone := make(chan struct{})
			go func() { defer close(masterDone); runMaster(t, cfg) }()
			time.Sleep(700 * time.Millisecond)
			proxy.SetDown(true)
			time.Sleep(3 * time.Second)
			if st, _ := masterd.Status(context.Background(), cfg); st.Finished {
				t.Log("crawl finished during the outage")
			}
			proxy.SetDown(false)
			<-masterDone
			checkCrawlRobots(t, cfg, site, nil, robotsFetchers(api, 2))
		})
	}
}

// robotsFetchers is how many times a host's robots.txt may be fetched by
// n slaves: once with direct slaves (they share it through Redis), once
// by each slave of the work API (each fetches the robots.txt of the hosts
// it claims).
func robotsFetchers(api bool, n int) int {
	if api {
		return n
	}
	return 1
}

// slaveKind names a subtest by the kind of its slaves.
func slaveKind(api bool) string {
	if api {
		return "work API slaves"
	}
	return "direct slaves"
}

// startSlaves starts n slaves of cfg's crawl in this process: direct, or
// (api) slaves of the work API that cfg's master serves (withAPI: call it
// before the master starts).
func startSlaves(t *testing.T, cfg *config.Config, api bool, n int) {
	t.Helper()
	var a *apiSlaves
	if api {
		a = withAPI(t, cfg)
	}
	for i := range n {
		id := fmt.Sprintf("slave-%d", i+1)
		if a != nil {
			a.start(id)
		} else {
			startSlave(t, cfg, id)
		}
	}
}

// siteHosts lists the site's host names: seeds are on one host, and the
// scope must take in all five.
func siteHosts(site *testsite.Site) []string {
	var out []string
	for _, raw := range site.HostURLs() {
		u, err := url.Parse(raw)
		if err != nil {
			panic(err)
		}
		out = append(out, u.Hostname())
	}
	return out
}

// TestClusterRedisOutage takes Redis away from the master and the slaves
// mid-crawl, with direct slaves and with slaves of the work API (which
// meet the outage as the master's errors): they pause and resume when it
// is back, nothing crashes, and the crawl completes with full coverage.
func TestClusterRedisOutage(t *testing.T) {
	for _, api := range []bool{false, true} {
		t.Run(slaveKind(api), func(t *testing.T) {
			cfg := clusterConfig(t)
			site := startSite(t, 0)
			seed(t, cfg, site) // seeded directly, before the proxy is in the way
			ropt, err := redis.ParseURL(cfg.Redis.URL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testutil.NewProxy(t, ropt.Addr)
			cfg.Redis.URL = fmt.Sprintf("redis://%s/%d", proxy.Addr(), ropt.DB)
			// a lease must outlive the outage, or every in-flight task is (correctly) re-fetched
			cfg.Lease.Duration = 20 * time.Second
			cfg.Master.DeadAfter = 10 * time.Second

			startSlaves(t, cfg, api, 2)
			masterDone := make(chan struct{})
			go func() { defer close(masterDone); runMaster(t, cfg) }()
			time.Sleep(time.Second)
			st, err := masterd.Status(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if st.Done == 0 || st.Finished {
				t.Fatalf("crawl not under way before the outage: %+v", st)
			}
			proxy.SetDown(true)
			time.Sleep(3 * time.Second)
			proxy.SetDown(false)
			<-masterDone
			checkCrawlRobots(t, cfg, site, nil, robotsFetchers(api, 2))
		})
	}
}
