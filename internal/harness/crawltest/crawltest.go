// Package crawltest is the scaffolding of the crawl tests (internal/e2e
// and the master's): a config against the test Redis and MariaDB, the
// test site, slaves in this process, slave processes and slaves of the
// work API, the master run to the crawl's end, and the checks of what the
// site saw and what landed in MySQL.
package crawltest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testcert"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// PoliteDelay is the test crawls' politeness.delay.
const PoliteDelay = 25 * time.Millisecond

// Config is a config for a test crawl with its own crawl name and
// database, against the test Redis (REDCRAWL_TEST_REDIS) and MariaDB, with
// short delays, leases and heartbeats; the crawl's keys are deleted when
// the test ends.
func Config(t testing.TB) *config.Config {
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
	cfg.Politeness.Delay = PoliteDelay
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

// Logger is the tests' logger: info lines with -v, else nothing.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return DiscardLogger()
}

// DiscardLogger logs nothing.
func DiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// StartSite serves the crawl tests' site: 5 hosts × 220 pages with
// robots.txt and the special pages (redirects, errors, retries), each
// answer after latency.
func StartSite(t testing.TB, latency time.Duration) *testsite.Site {
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

// SlaveHandle is a slave running in this process.
type SlaveHandle struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartSlave runs slave id of cfg's crawl in this process until Stop or
// the test's end.
func StartSlave(t testing.TB, cfg *config.Config, id string) *SlaveHandle {
	t.Helper()
	return StartSlaveLogged(t, cfg, id, Logger(t))
}

// StartSlaveLogged is StartSlave with the slave logging to log.
func StartSlaveLogged(t testing.TB, cfg *config.Config, id string, log *slog.Logger) *SlaveHandle {
	t.Helper()
	s, err := slaved.New(cfg, slaved.Options{ID: id, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &SlaveHandle{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(h.done); s.Run(ctx) }()
	t.Cleanup(h.Stop)
	return h
}

// Stop stops the slave and waits for it to leave.
func (h *SlaveHandle) Stop() {
	h.cancel()
	<-h.done
}

// RunMaster runs the master until the crawl is finished.
func RunMaster(t testing.TB, cfg *config.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var finished atomic.Int32
	opt := masterd.Options{ExitWhenDone: true, Logger: Logger(t), Finished: func() { finished.Add(1) }}
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

// Seed scopes cfg's crawl to the site's hosts and seeds it with the
// site's seeds.
func Seed(t testing.TB, cfg *config.Config, site *testsite.Site) {
	t.Helper()
	cfg.Crawl.AllowHosts = SiteHosts(site)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := masterd.Seed(context.Background(), cfg, site.Seeds())
	if err != nil || res.Added != len(site.Seeds()) {
		t.Fatalf("seed: %+v %v", res, err)
	}
}

// CheckHits checks, from the site's request log, coverage and exactly-once
// (re-fetches only for lost leases), that robots.txt was fetched once per
// host (again only after a lost lease) and that no disallowed or unknown URL
// was requested. label prefixes the errors. It returns the expected URLs
// and the lost leases by URL.
func CheckHits(t testing.TB, label string, site *testsite.Site, lost []events.Lost) (map[string]int, map[string]int) {
	return CheckHitsRobots(t, label, site, lost, 1)
}

// CheckHitsRobots is CheckHits with up to robotsPerHost robots.txt fetches
// a host: a slave of the work API fetches the robots.txt of the hosts it
// claims itself (it writes no shared record).
func CheckHitsRobots(t testing.TB, label string, site *testsite.Site, lost []events.Lost, robotsPerHost int) (map[string]int, map[string]int) {
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

// CheckCrawl checks coverage, exactly-once (re-fetches only for lost
// leases), robots.txt, politeness as the site saw it, and what landed in
// MySQL.
func CheckCrawl(t testing.TB, cfg *config.Config, site *testsite.Site, lost []events.Lost) {
	t.Helper()
	CheckCrawlRobots(t, cfg, site, lost, 1)
}

// CheckCrawlRobots is CheckCrawl with up to robotsPerHost robots.txt
// fetches a host (CheckHitsRobots).
func CheckCrawlRobots(t testing.TB, cfg *config.Config, site *testsite.Site, lost []events.Lost, robotsPerHost int) {
	t.Helper()
	ctx := context.Background()
	st, err := masterd.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished || st.Queued != 0 || st.InFlight != 0 || st.Retry != 0 {
		t.Errorf("status %+v, want finished and empty", st)
	}
	expected, lostBy := CheckHitsRobots(t, "", site, lost, robotsPerHost)

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
			t.Errorf("page rows for %s: %d (leases lost %d, fetched %d times)", u, pages[u], lostBy[u], site.HitCounts()[u])
			dups, _ := db.Duplicates(ctx, cfg.Crawl.Name)
			for _, d := range dups {
				if d.URL == u || d.FirstURL == u {
					t.Logf("duplicate %+v", d)
				}
			}
			exc, _ := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfg.Crawl.Name, Limit: 100000})
			for _, e := range exc {
				if e.URL == u || strings.Contains(e.Message, u) {
					t.Logf("exception %+v", e)
				}
			}
			for _, l := range lost {
				if l.URL == u {
					t.Logf("lost %+v", l)
				}
			}
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

// OpenFrontier opens cfg's crawl in Redis, as a master does; the client
// is closed when the test ends.
func OpenFrontier(t testing.TB, cfg *config.Config) *frontier.Redis {
	t.Helper()
	rdb, err := redisconn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f, err := frontier.NewRedis(context.Background(), rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// BuildSlave builds bin/slave once for tests that kill it.
var BuildSlave = sync.OnceValues(func() (string, error) {
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

// SlaveEnv is the environment of a slave process of cfg's crawl (started
// with --config ""): the test config as CRAWLER_ variables.
func SlaveEnv(cfg *config.Config) []string {
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

// RobotsFetchers is how many times a host's robots.txt may be fetched by
// n slaves: once with direct slaves (they share it through Redis), once
// by each slave of the work API (each fetches the robots.txt of the hosts
// it claims).
func RobotsFetchers(api bool, n int) int {
	if api {
		return n
	}
	return 1
}

// SlaveKind names a subtest by the kind of its slaves.
func SlaveKind(api bool) string {
	if api {
		return "work API slaves"
	}
	return "direct slaves"
}

// StartSlaves starts n slaves of cfg's crawl in this process: direct, or
// (api) slaves of the work API that cfg's master serves (WithAPI: call it
// before the master starts).
func StartSlaves(t testing.TB, cfg *config.Config, api bool, n int) {
	t.Helper()
	var a *APISlaves
	if api {
		a = WithAPI(t, cfg)
	}
	for i := range n {
		id := fmt.Sprintf("slave-%d", i+1)
		if a != nil {
			a.Start(id)
		} else {
			StartSlave(t, cfg, id)
		}
	}
}

// SiteHosts lists the site's host names: seeds are on one host, and the
// scope must take in all five.
func SiteHosts(site *testsite.Site) []string {
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

// APISlaves makes cfg's master serve the work API over TLS on a free
// loopback port, and returns what starts a slave of it: a token issued
// for the slave, the masters' CA, and no Redis or MySQL it could reach
// (its redis.url and mysql.dsn point at closed ports).
type APISlaves struct {
	t     testing.TB
	cfg   *config.Config
	certs testcert.Files
	dir   string
}

// WithAPI makes cfg's master serve the work API (call it before the
// master starts) and returns what starts its slaves.
func WithAPI(t testing.TB, cfg *config.Config) *APISlaves {
	t.Helper()
	dir := t.TempDir()
	certs := testcert.Write(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.API.Listen = ln.Addr().String()
	ln.Close()
	cfg.API.TLSCert, cfg.API.TLSKey = certs.ServerCert, certs.ServerKey
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &APISlaves{t: t, cfg: cfg, certs: certs, dir: dir}
}

// Config returns the config of API slave id, with its token file.
func (a *APISlaves) Config(id string) *config.Config {
	t := a.t
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, a.cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tok, _, err := db.IssueToken(ctx, a.cfg.Crawl.Name, id, store.TokenLimits{})
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(a.dir, id+".token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := *a.cfg
	c.API = config.Default().API
	c.Redis.URL = "redis://127.0.0.1:1/0" // nothing: the slave never dials Redis
	c.MySQL.DSN = "nobody:x@tcp(127.0.0.1:1)/none"
	c.Slave.API = config.SlaveAPI{URLs: []string{"https://" + a.cfg.API.Listen}, TokenFile: tokFile, CAFile: a.certs.CA}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return &c
}

// CA is the file of the CA that signed the master's API certificate.
func (a *APISlaves) CA() string { return a.certs.CA }

// Start starts API slave id in this process.
func (a *APISlaves) Start(id string) *SlaveHandle {
	return StartSlave(a.t, a.Config(id), id)
}

// SlavesWithEvent returns the slaves of crawl with a slave event of kind
// (events.SlaveJoin, SlaveLeave, …) in MySQL.
func SlavesWithEvent(t testing.TB, db *store.Store, crawl string, kind string) map[string]bool {
	t.Helper()
	evs, err := db.SlaveEvents(context.Background(), crawl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range evs {
		if e.Kind == kind {
			out[e.Slave] = true
		}
	}
	return out
}

// RunWithSlave runs the master until the crawl is finished, with one
// slave started (by start) once the master published the rules (so that
// every page goes through them).
func RunWithSlave(t testing.TB, cfg *config.Config, slave string, start func(*config.Config, string) *SlaveHandle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- masterd.New(cfg, masterd.Options{ExitWhenDone: true, Logger: Logger(t)}).Run(ctx)
	}()
	f := OpenFrontier(t, cfg)
	for {
		if v, _, _, err := f.GetRules(ctx); err == nil && v != "" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("master ended before publishing the rules: %v", err)
		case <-ctx.Done():
			t.Fatal("the master published no rules in 3 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}
	h := start(cfg, slave)
	defer h.Stop()
	if err := <-done; err != nil {
		t.Fatalf("master: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish in 3 minutes")
	}
}

// LockedBuffer is a bytes.Buffer for loggers of several goroutines.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RunAdminMaster runs a master of cfg until the test ends (or ctx does)
// and sets cfg.Admin.Listen to the address its admin server listens on.
func RunAdminMaster(t testing.TB, ctx context.Context, cfg *config.Config) {
	t.Helper()
	addrc := make(chan string, 1)
	mctx, stopMaster := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() {
		mdone <- masterd.New(cfg, masterd.Options{Logger: Logger(t), AdminReady: func(a string) { addrc <- a }}).Run(mctx)
	}()
	t.Cleanup(func() {
		stopMaster()
		if err := <-mdone; err != nil {
			t.Errorf("master: %v", err)
		}
	})
	select {
	case a := <-addrc:
		cfg.Admin.Listen = a
	case err := <-mdone:
		mdone <- nil // reported here, not again by the cleanup
		t.Fatalf("master stopped before its admin server listened: %v", err)
	}
}
