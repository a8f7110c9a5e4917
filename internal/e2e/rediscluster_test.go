package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/benchsuite"
	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestRedisClusterCrawl runs two crawls at once against a three-master Redis
// Cluster on loopback, each crawl with its own master, two slaves and test
// site, all through go-redis ClusterClients. The crawl names are picked so
// that their hash slots are on different nodes. It checks that both crawls
// finish with every expected URL fetched exactly once, and that each crawl's
// keys are all in its one slot on the one node that owns it. With -v it logs
// Redis commands per page (client side), the nodes' CPU per 1,000 pages
// (INFO cpu) and each frontier script's server time (SLOWLOG at threshold 0,
// INFO commandstats).
//
//	go test -count=1 -run RedisCluster -v ./internal/e2e/
func TestRedisClusterCrawl(t *testing.T) {
	rc := startRedisCluster(t, 3)
	runClusterCrawls(t, rc, clusterCrawlParams{hosts: 3, pagesPerHost: 100, delay: crawltest.PoliteDelay,
		hostConc: 1, slaveConc: 8, check: true, slowlog: true})
}

// BenchmarkRedisClusterCrawl is TestRedisClusterCrawl on a larger site
// (2 crawls × 10 hosts × 400 pages of 15 KB, 2 slaves of 32 workers per
// crawl), at politeness delay 0 (4 requests in flight per host) and 25 ms
// (1 in flight), for the Redis cost figures of docs/scaling.md:
//
//	go test -run '^$' -bench RedisClusterCrawl -benchtime 1x -v ./internal/e2e/
func BenchmarkRedisClusterCrawl(b *testing.B) {
	for _, delay := range []time.Duration{0, crawltest.PoliteDelay} {
		b.Run("delay="+delay.String(), func(b *testing.B) {
			for range b.N {
				rc := startRedisCluster(b, 3)
				p := clusterCrawlParams{hosts: 10, pagesPerHost: 400, pageBytes: 15000,
					delay: delay, hostConc: 4, slaveConc: 32}
				if delay > 0 {
					p.hostConc = 1
				}
				// REDCRAWL_RC_SLOWLOG=1 adds the per-script split (and its overhead)
				p.slowlog = os.Getenv("REDCRAWL_RC_SLOWLOG") == "1"
				r := runClusterCrawls(b, rc, p)
				b.ReportMetric(r.pagesPerSec, "pages/s")
				b.ReportMetric(r.cmdsPerPage, "redis-cmds/page")
				b.ReportMetric(r.cpuMsPer1000, "redis-cpu-ms/1000pages")
				b.ReportMetric(r.scriptUsPerPage, "redis-script-µs/page")
			}
		})
	}
}

// ---- the cluster ----

type redisNode struct {
	addr string
	rdb  *redis.Client
}

type redisCluster struct {
	nodes []*redisNode
}

// startRedisCluster starts n redis-server processes in cluster mode on free
// loopback ports, joins them as n masters with redis-cli --cluster create
// and waits until every node says cluster_state:ok. The processes are
// killed when the test ends.
func startRedisCluster(t testing.TB, n int) *redisCluster {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not found in PATH: the Redis Cluster test needs it (apt-get install redis-server)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not found in PATH: the Redis Cluster test needs it (apt-get install redis-tools)")
	}
	rc := &redisCluster{}
	for range n {
		rc.nodes = append(rc.nodes, startClusterNode(t, server))
	}
	args := []string{"--cluster", "create"}
	for _, nd := range rc.nodes {
		args = append(args, nd.addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, nd := range rc.nodes {
		for deadline := time.Now().Add(30 * time.Second); ; {
			info, err := nd.rdb.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s: cluster_state not ok after 30s: %q %v", nd.addr, info, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return rc
}

// startClusterNode starts one redis-server in cluster mode; a port taken
// between picking and binding is retried with another.
func startClusterNode(t testing.TB, server string) *redisNode {
	t.Helper()
	// nodes.conf goes to the server's --dir
	srv := testutil.StartRedis(t, nil, "--cluster-enabled", "yes",
		"--cluster-port", strconv.Itoa(testutil.FreePort(t)))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return &redisNode{addr: srv.Addr, rdb: rdb}
}

// slotOwner returns the address of the master serving slot.
func (rc *redisCluster) slotOwner(ctx context.Context, slot int64) (string, error) {
	slots, err := rc.nodes[0].rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d has no owner", slot)
}

func (rc *redisCluster) node(addr string) *redisNode {
	for _, nd := range rc.nodes {
		if nd.addr == addr {
			return nd
		}
	}
	return nil
}

// pickCrawlNames returns n fresh crawl names whose slots are owned by n
// different nodes, asking the cluster (CLUSTER KEYSLOT, CLUSTER SLOTS).
func (rc *redisCluster) pickCrawlNames(t testing.TB, n int) (names []string, slots []int64, owners []string) {
	t.Helper()
	ctx := context.Background()
	used := map[string]bool{}
	for i := 0; i < 1000 && len(names) < n; i++ {
		name := testutil.CrawlName("rc")
		slot, err := rc.nodes[0].rdb.ClusterKeySlot(ctx, frontier.NewKeys(name).Meta).Result()
		if err != nil {
			t.Fatal(err)
		}
		owner, err := rc.slotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		if used[owner] {
			continue
		}
		used[owner] = true
		names, slots, owners = append(names, name), append(slots, slot), append(owners, owner)
	}
	if len(names) < n {
		t.Fatalf("no %d crawl names on distinct nodes", n)
	}
	return names, slots, owners
}

// ---- server-side measurements ----

// nodeSample is what INFO says of a node at one moment.
type nodeSample struct {
	cpu   float64 // used_cpu_user + used_cpu_sys, seconds
	stats map[string][2]float64
}

func sampleNode(ctx context.Context, nd *redisNode) (nodeSample, error) {
	s := nodeSample{stats: map[string][2]float64{}}
	info, err := nd.rdb.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		case strings.HasPrefix(k, "cmdstat_"):
			// calls=N,usec=N,usec_per_call=F,...
			var calls, usec float64
			for _, kv := range strings.Split(v, ",") {
				a, b, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(b, 64)
				switch a {
				case "calls":
					calls = f
				case "usec":
					usec = f
				}
			}
			s.stats[strings.TrimPrefix(k, "cmdstat_")] = [2]float64{calls, usec}
		}
	}
	return s, nil
}

// ---- the crawls ----

type clusterCrawlParams struct {
	hosts, pagesPerHost, pageBytes int
	delay                          time.Duration
	hostConc, slaveConc            int
	check                          bool // full correctness checks (the test)
	// slowlog logs every command (SLOWLOG at threshold 0) to split the
	// scripts' server time by operation; it slows the commands that
	// scripts call, so the bench leaves it off
	slowlog bool
}

type clusterCrawlResult struct {
	pagesPerSec, cmdsPerPage, cpuMsPer1000 float64
	scriptUsPerPage                        float64 // INFO commandstats: fcall usec per page
	execUsPerPage                          float64 // SLOWLOG: top-level command time per page
}

type rcCrawl struct {
	name  string
	slot  int64
	owner string
	cfg   *config.Config
	site  *testsite.Site
	cc    *redis.ClusterClient
	hook  *benchsuite.CountHook
	err   error
}

func clusterCrawlConfig(t testing.TB, name string, p clusterCrawlParams) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Crawl.Name = name
	cfg.MySQL.DSN = storetest.DSN(t)
	// Nothing listens here: the master and slaves must use the cluster
	// client they are given, and would hang (and fail the test) otherwise.
	cfg.Redis.URL = fmt.Sprintf("redis://127.0.0.1:%d/0", testutil.FreePort(t))
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Admin.Listen = ""
	cfg.Fetch.Timeout = 5 * time.Second
	cfg.Politeness.Delay = p.delay
	cfg.Politeness.Jitter = 0.2
	cfg.Politeness.HostConcurrency = p.hostConc
	cfg.Lease.Duration = 5 * time.Second
	cfg.Lease.RetryBase = 200 * time.Millisecond
	cfg.Slave.Concurrency = p.slaveConc
	cfg.Slave.HeartbeatInterval = 300 * time.Millisecond
	cfg.Slave.ShutdownTimeout = 3 * time.Second
	cfg.Slave.IdlePoll = 50 * time.Millisecond
	cfg.Master.DeadAfter = 2 * time.Second
	cfg.Master.RecoverInterval = 200 * time.Millisecond
	cfg.Master.Quiescence = 800 * time.Millisecond
	cfg.Master.HeartbeatSample = time.Second
	cfg.Dedup.ExpectedURLs = 10000
	return &cfg
}

func runClusterCrawls(t testing.TB, rc *redisCluster, p clusterCrawlParams) clusterCrawlResult {
	t.Helper()
	ctx := context.Background()
	names, slots, owners := rc.pickCrawlNames(t, 2)
	addrs := make([]string, len(rc.nodes))
	for i, nd := range rc.nodes {
		addrs[i] = nd.addr
	}
	var crawls []*rcCrawl
	for i, name := range names {
		cfg := clusterCrawlConfig(t, name, p)
		site, err := testsite.Start(testsite.Options{Hosts: p.hosts, PagesPerHost: p.pagesPerHost,
			LinksPerPage: 6, PageBytes: p.pageBytes, Robots: true, Seed: int64(11 + i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(site.Close)
		cfg.Crawl.AllowHosts = crawltest.SiteHosts(site)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		// one cluster client per crawl, so its commands are counted apart
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { cc.Close() })
		hook := &benchsuite.CountHook{}
		cc.AddHook(hook)
		crawls = append(crawls, &rcCrawl{name: name, slot: slots[i], owner: owners[i],
			cfg: cfg, site: site, cc: cc, hook: hook})
	}

	// seed through the cluster client (masterd.Seed dials redis.url)
	for _, c := range crawls {
		canon, err := urlx.NewCanonicalizer(c.cfg.Crawl.StripParams)
		if err != nil {
			t.Fatal(err)
		}
		var tasks []frontier.Task
		for _, raw := range c.site.Seeds() {
			u, err := canon.Canonicalize(raw)
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, frontier.NewTask(u, 0, 0))
		}
		f, err := frontier.NewRedis(ctx, c.cc, frontier.OptionsFromConfig(c.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := f.Seed(ctx, tasks); err != nil || n != len(tasks) {
			t.Fatalf("seed %s: %d of %d, %v", c.name, n, len(tasks), err)
		}
		t.Logf("crawl %s: slot %d on node %s, %d expected URLs", c.name, c.slot, c.owner, len(c.site.Expected()))
	}

	// server-side counters from here on
	for _, nd := range rc.nodes {
		cmds := [][]any{{"config", "resetstat"}}
		if p.slowlog {
			cmds = append(cmds, []any{"config", "set", "slowlog-log-slower-than", "0"},
				[]any{"config", "set", "slowlog-max-len", "1000000"}, []any{"slowlog", "reset"})
		}
		for _, cmd := range cmds {
			if err := nd.rdb.Do(ctx, cmd...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := map[string]nodeSample{}
	for _, nd := range rc.nodes {
		s, err := sampleNode(ctx, nd)
		if err != nil {
			t.Fatal(err)
		}
		before[nd.addr] = s
	}
	for _, c := range crawls {
		c.hook.Cmds.Store(0)
		c.hook.Scripts.Store(0)
	}

	start := time.Now()
	slaveCtx, stopSlaves := context.WithCancel(ctx)
	var slaveWG sync.WaitGroup
	stopAll := func() { stopSlaves(); slaveWG.Wait() }
	t.Cleanup(stopAll)
	for _, c := range crawls {
		for j := range 2 {
			s, err := slaved.New(c.cfg, slaved.Options{ID: fmt.Sprintf("%s-slave-%d", c.name, j+1),
				Logger: crawltest.DiscardLogger(), Redis: c.cc})
			if err != nil {
				t.Fatal(err)
			}
			slaveWG.Add(1)
			go func() { defer slaveWG.Done(); s.Run(slaveCtx) }()
		}
	}
	var masterWG sync.WaitGroup
	for _, c := range crawls {
		masterWG.Add(1)
		go func() {
			defer masterWG.Done()
			mctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			c.err = masterd.New(c.cfg, masterd.Options{ExitWhenDone: true, Logger: crawltest.DiscardLogger(), Redis: c.cc}).Run(mctx)
			if c.err == nil && mctx.Err() != nil {
				c.err = fmt.Errorf("crawl %s did not finish in 3 minutes", c.name)
			}
		}()
	}
	masterWG.Wait()
	// the finish is decided after a quiescence window; do not count it
	elapsed := time.Since(start) - crawls[0].cfg.Master.Quiescence
	after := map[string]nodeSample{}
	for _, nd := range rc.nodes {
		s, err := sampleNode(ctx, nd)
		if err != nil {
			t.Fatal(err)
		}
		after[nd.addr] = s
	}
	stopAll()
	for _, c := range crawls {
		if c.err != nil {
			t.Fatalf("master of %s: %v", c.name, c.err)
		}
	}

	// every crawl finished; its keys are all in its slot, on its node only
	var res clusterCrawlResult
	var pages, cmds, cpuCrawl float64
	for _, c := range crawls {
		f, err := frontier.NewRedis(ctx, c.cc, frontier.OptionsFromConfig(c.cfg))
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Finished || st.Queued != 0 || st.InFlight != 0 || st.Retry != 0 || st.Done < int64(len(c.site.Expected())) {
			t.Errorf("crawl %s: status %+v, want finished and empty with %d done", c.name, st, len(c.site.Expected()))
		}
		checkClusterKeys(t, rc, c)
		if p.check {
			checkClusterCrawl(t, c)
		}
		pages += float64(st.Done)
		cmds += float64(c.hook.Cmds.Load())
		cpu := after[c.owner].cpu - before[c.owner].cpu
		cpuCrawl += cpu
		t.Logf("crawl %s: %d pages, %.2f client commands/page (%.2f scripts/page), owner %s CPU %.0f ms = %.0f ms per 1,000 pages",
			c.name, st.Done, float64(c.hook.Cmds.Load())/float64(st.Done), float64(c.hook.Scripts.Load())/float64(st.Done),
			c.owner, cpu*1000, cpu*1e6/float64(st.Done))
	}
	// a node without a crawl gives the baseline: cluster bus, cron, INFO
	var idleCPU float64
	idleNodes := 0
	for _, nd := range rc.nodes {
		idle := true
		for _, c := range crawls {
			if c.owner == nd.addr {
				idle = false
			}
		}
		if idle {
			idleCPU += after[nd.addr].cpu - before[nd.addr].cpu
			idleNodes++
			t.Logf("node %s (no crawl): CPU %.0f ms over the run (cluster bus, cron, INFO)",
				nd.addr, (after[nd.addr].cpu-before[nd.addr].cpu)*1000)
		}
	}
	if idleNodes > 0 {
		idleCPU /= float64(idleNodes)
	}
	res.pagesPerSec = pages / elapsed.Seconds()
	res.cmdsPerPage = cmds / pages
	res.cpuMsPer1000 = (cpuCrawl - float64(len(crawls))*idleCPU) * 1e6 / pages
	t.Logf("both crawls: %.0f pages in %v (%.0f pages/s), %.2f client commands/page, Redis CPU %.0f ms per 1,000 pages (%.0f less the idle node's)",
		pages, elapsed.Round(time.Millisecond), res.pagesPerSec, res.cmdsPerPage, cpuCrawl*1e6/pages, res.cpuMsPer1000)

	// commandstats: fcall (the library's functions) on the crawl nodes
	var evalCalls, evalUsec float64
	for _, c := range crawls {
		for _, k := range []string{"fcall", "fcall_ro"} {
			a, b := after[c.owner].stats[k], before[c.owner].stats[k]
			evalCalls += a[0] - b[0]
			evalUsec += a[1] - b[1]
		}
	}
	if evalCalls > 0 {
		res.scriptUsPerPage = evalUsec / pages
		t.Logf("INFO commandstats, crawl nodes: %.0f fcall calls, %.1f µs per call, %.1f µs of functions per page",
			evalCalls, evalUsec/evalCalls, evalUsec/pages)
	}

	if !p.slowlog {
		return res
	}
	// SLOWLOG (threshold 0): every top-level command's execution time, by
	// script; the commands scripts call are logged too (client "?:0") and
	// are counted in their script's time
	type agg struct{ calls, usec float64 }
	byOp := map[string]*agg{}
	var execUsec float64
	for _, c := range crawls {
		entries, err := rc.node(c.owner).rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if len(e.Args) == 0 || e.ClientAddr == "?:0" {
				continue
			}
			op := strings.ToLower(e.Args[0])
			switch op {
			case "slowlog", "info", "config", "cluster", "scan":
				continue // the test's and the client's own
			case "fcall", "fcall_ro":
				if len(e.Args) > 1 {
					op = e.Args[1] // the function's name
				}
			}
			a := byOp[op]
			if a == nil {
				a = &agg{}
				byOp[op] = a
			}
			us := float64(e.Duration.Microseconds())
			a.calls++
			a.usec += us
			execUsec += us
		}
	}
	res.execUsPerPage = execUsec / pages
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return byOp[ops[i]].usec > byOp[ops[j]].usec })
	t.Logf("SLOWLOG, crawl nodes: %.1f µs of top-level command execution per page; by operation (calls, µs/call, µs/page):", res.execUsPerPage)
	for _, op := range ops[:min(10, len(ops))] {
		a := byOp[op]
		t.Logf("  %-28s %7.0f %8.1f %7.2f", op, a.calls, a.usec/a.calls, a.usec/pages)
	}
	return res
}

// checkClusterKeys scans every node for the crawl's keys (and any key
// naming the crawl): they must all be crawl:{name}:… keys in the crawl's
// slot, on the node that owns it.
func checkClusterKeys(t testing.TB, rc *redisCluster, c *rcCrawl) {
	t.Helper()
	ctx := context.Background()
	prefix := frontier.NewKeys(c.name).Prefix
	perNode := map[string]int{}
	for _, nd := range rc.nodes {
		iter := nd.rdb.Scan(ctx, 0, "*"+c.name+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			perNode[nd.addr]++
			if !strings.HasPrefix(k, prefix) {
				t.Errorf("crawl %s: key %q on %s lacks the prefix %s", c.name, k, nd.addr, prefix)
			}
			slot, err := nd.rdb.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slot != c.slot {
				t.Errorf("crawl %s: key %q is in slot %d, want %d", c.name, k, slot, c.slot)
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for addr, n := range perNode {
		if addr != c.owner && n > 0 {
			t.Errorf("crawl %s: %d keys on node %s, want all on %s", c.name, n, addr, c.owner)
		}
	}
	if perNode[c.owner] == 0 {
		t.Errorf("crawl %s: no keys on its node %s", c.name, c.owner)
	}
	t.Logf("crawl %s: %d keys, all in slot %d on %s", c.name, perNode[c.owner], c.slot, c.owner)
}

// checkClusterCrawl checks coverage and exactly-once as crawltest.CheckCrawl does
// (re-fetches only for lost leases), robots.txt, and the MySQL page rows.
func checkClusterCrawl(t testing.TB, c *rcCrawl) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, c.cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LostTasks(ctx, c.name, 100000)
	if err != nil {
		t.Fatal(err)
	}
	expected, lostBy := crawltest.CheckHits(t, "crawl "+c.name+": ", c.site, lost)
	pages, err := db.PageURLs(ctx, c.name)
	if err != nil {
		t.Fatal(err)
	}
	for u := range expected {
		if pages[u] < 1 || pages[u] > 1+lostBy[u] {
			t.Errorf("crawl %s: page rows for %s: %d", c.name, u, pages[u])
			break
		}
	}
	exc, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: c.name, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, e := range exc {
		if e.Kind == events.KindRobotsDenied {
			denied++
		}
	}
	if denied == 0 {
		t.Errorf("crawl %s: no robots_denied exceptions in MySQL", c.name)
	}
	t.Logf("crawl %s: %d expected URLs each fetched once, %d lost leases, %d robots_denied",
		c.name, len(expected), len(lost), denied)
}
