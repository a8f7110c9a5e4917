package e2e

import (
	"context"
	"fmt"
	"net/url"
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
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// BenchmarkShardedCluster crawls the same synthetic site (60 hosts × 100
// pages of 4 KB, delay 0, 4 requests in flight per host, a master and 2
// slaves of 32 workers, all in-process with their own cluster clients)
// twice on one 3-master Redis Cluster: once as a crawl of 1 shard, which
// lives on one node, and once as a crawl of 3 shards whose crawl name puts
// one shard on each node. The two runs alternate their order per
// iteration. It reports, for each: pages/s, Redis CPU µs per page (INFO
// cpu of every node, the idle nodes' cluster-bus baseline included),
// client commands per page (go-redis hooks on the master's and slaves'
// clients), server calls per page (INFO commandstats, which counts the
// commands scripts run too), and for S=3 the largest and smallest node's
// share of the Redis CPU, calls and crawl keys (ideal 1/3). With -v it
// logs the table per node. On a 2-core machine throughput cannot scale
// with nodes: the figures that matter are the shares.
//
//	go test -run '^$' -bench ShardedCluster -benchtime 1x -v ./internal/e2e/
func BenchmarkShardedCluster(b *testing.B) {
	for i := range b.N {
		rc := testutil.StartCluster(b, 3, 0)
		order := []int{1, 3}
		if i%2 == 1 {
			order = []int{3, 1}
		}
		res := map[int]shardBenchResult{}
		for _, s := range order {
			res[s] = runShardedBench(b, rc, s)
		}
		one, three := res[1], res[3]
		b.ReportMetric(one.pagesPerSec, "s1-pages/s")
		b.ReportMetric(three.pagesPerSec, "s3-pages/s")
		b.ReportMetric(one.cpuUsPerPage, "s1-redis-cpu-µs/page")
		b.ReportMetric(three.cpuUsPerPage, "s3-redis-cpu-µs/page")
		b.ReportMetric(three.pagesPerSec/one.pagesPerSec, "s3/s1-pages/s")
		b.ReportMetric(three.cpuUsPerPage/one.cpuUsPerPage, "s3/s1-redis-cpu/page")
		b.ReportMetric(one.clientCmdsPerPage, "s1-client-cmds/page")
		b.ReportMetric(three.clientCmdsPerPage, "s3-client-cmds/page")
		b.ReportMetric(one.serverCallsPerPage, "s1-server-calls/page")
		b.ReportMetric(three.serverCallsPerPage, "s3-server-calls/page")
		b.ReportMetric(one.bytesPerPage, "s1-key-bytes/page")
		b.ReportMetric(three.bytesPerPage, "s3-key-bytes/page")
		lo, hi := three.shareRange(func(n shardBenchNode) float64 { return n.cpuNet })
		b.ReportMetric(lo, "s3-min-node-cpu-share")
		b.ReportMetric(hi, "s3-max-node-cpu-share")
		lo, hi = three.shareRange(func(n shardBenchNode) float64 { return float64(n.calls) })
		b.ReportMetric(lo, "s3-min-node-calls-share")
		b.ReportMetric(hi, "s3-max-node-calls-share")
		lo, hi = three.shareRange(func(n shardBenchNode) float64 { return float64(n.keys) })
		b.ReportMetric(lo, "s3-min-node-keys-share")
		b.ReportMetric(hi, "s3-max-node-keys-share")
	}
}

// shardBenchNode is one node's part of a crawl.
type shardBenchNode struct {
	addr   string
	shards []int
	hosts  int     // the site's hosts whose shard it holds
	pages  int64   // pages done on its shards
	cpu    float64 // s, INFO cpu delta
	cpuNet float64 // s, less the idle baseline (see runShardedBench)
	calls  int64   // INFO commandstats calls delta (test's own left out)
	evals  int64   // of which fcall (the library's functions)
	keys   int64   // crawl keys at the end (SCAN MATCH)
	bytes  int64   // their MEMORY USAGE
	memory int64   // INFO memory used_memory delta
}

type shardBenchResult struct {
	shards                                int
	pages                                 int64
	elapsed                               time.Duration
	pagesPerSec, cpuUsPerPage             float64
	clientCmdsPerPage, serverCallsPerPage float64
	bytesPerPage                          float64
	nodes                                 []shardBenchNode
}

// shareRange returns the smallest and largest node's share of a figure.
func (r shardBenchResult) shareRange(f func(shardBenchNode) float64) (lo, hi float64) {
	var total float64
	for _, n := range r.nodes {
		total += f(n)
	}
	lo, hi = 1, 0
	for _, n := range r.nodes {
		s := f(n) / total
		lo, hi = min(lo, s), max(hi, s)
	}
	return lo, hi
}

// shardedCrawlName picks a crawl name whose shards' slots fall one on each
// of the cluster's masters (all on one node for a single shard).
func shardedCrawlName(t testing.TB, rc *testutil.Cluster, shards int) (string, []string) {
	t.Helper()
	ctx := context.Background()
	for range 2000 {
		name := testutil.CrawlName("sb")
		owners := make([]string, shards)
		used := map[string]bool{}
		for k := range shards {
			slot, err := rc.KeySlot(ctx, frontier.ShardKeys(name, k).Meta)
			if err != nil {
				t.Fatal(err)
			}
			if owners[k], err = rc.SlotOwner(ctx, slot); err != nil {
				t.Fatal(err)
			}
			used[owners[k]] = true
		}
		if len(used) == min(shards, 3) {
			return name, owners
		}
	}
	t.Fatalf("no crawl name in 2000 puts %d shards on distinct nodes", shards)
	return "", nil
}

// runShardedBench runs one crawl of the benchmark site with the given
// shard count on rc and measures it.
func runShardedBench(t testing.TB, rc *testutil.Cluster, shards int) shardBenchResult {
	t.Helper()
	ctx := context.Background()
	name, owners := shardedCrawlName(t, rc, shards)
	cfg := clusterCrawlConfig(t, name, clusterCrawlParams{delay: 0, hostConc: 4, slaveConc: 32})
	cfg.Crawl.Shards = shards
	cfg.Redis.Cluster = true
	site, err := testsite.Start(testsite.Options{Hosts: 60, PagesPerHost: 100, LinksPerPage: 6,
		PageBytes: 4096, Robots: true, Seed: 13})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg.Crawl.AllowHosts = crawltest.SiteHosts(site)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(rc.Nodes))
	for i, nd := range rc.Nodes {
		addrs[i] = nd.Addr
	}
	var hooks []*benchsuite.CountHook
	client := func() *redis.ClusterClient {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { cc.Close() })
		h := &benchsuite.CountHook{}
		cc.AddHook(h)
		hooks = append(hooks, h)
		return cc
	}
	mc := client()

	// seed
	canon, err := urlx.NewCanonicalizer(cfg.Crawl.StripParams)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []frontier.Task
	for _, raw := range site.Seeds() {
		u, err := canon.Canonicalize(raw)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, frontier.NewTask(u, 0, 0))
	}
	f, err := frontier.NewRedis(ctx, mc, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Seed(ctx, tasks); err != nil || n != len(tasks) {
		t.Fatalf("seed %s: %d of %d, %v", name, n, len(tasks), err)
	}

	// server counters from here on
	for _, nd := range rc.Nodes {
		if err := nd.Client.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	type sample struct {
		s   nodeSample
		mem int64
	}
	take := func() map[string]sample {
		out := map[string]sample{}
		for _, nd := range rc.Nodes {
			s, err := sampleNode(ctx, &redisNode{addr: nd.Addr, rdb: nd.Client})
			if err != nil {
				t.Fatal(err)
			}
			info, err := nd.Client.Info(ctx, "memory").Result()
			if err != nil {
				t.Fatal(err)
			}
			mem, _ := strconv.ParseInt(testutil.InfoField(info, "used_memory"), 10, 64)
			out[nd.Addr] = sample{s, mem}
		}
		return out
	}
	before := take()
	for _, h := range hooks {
		h.Cmds.Store(0)
	}

	start := time.Now()
	slaveCtx, stopSlaves := context.WithCancel(ctx)
	var slaveWG sync.WaitGroup
	stopAll := func() { stopSlaves(); slaveWG.Wait() }
	t.Cleanup(stopAll)
	for j := range 2 {
		s, err := slaved.New(cfg, slaved.Options{ID: fmt.Sprintf("%s-slave-%d", name, j+1),
			Logger: crawltest.DiscardLogger(), Redis: client()})
		if err != nil {
			t.Fatal(err)
		}
		slaveWG.Add(1)
		go func() { defer slaveWG.Done(); s.Run(slaveCtx) }()
	}
	mctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = masterd.New(cfg, masterd.Options{ExitWhenDone: true, Logger: crawltest.DiscardLogger(), Redis: mc}).Run(mctx)
	timedOut := mctx.Err() != nil
	cancel()
	// the finish is decided after a quiescence window; do not count it
	elapsed := time.Since(start) - cfg.Master.Quiescence
	after := take()
	stopAll()
	if err != nil {
		t.Fatalf("master of %s: %v", name, err)
	}
	if timedOut {
		t.Fatalf("crawl %s did not finish in 3 minutes", name)
	}
	var cmds int64
	for _, h := range hooks {
		cmds += h.Cmds.Load()
	}

	st, err := f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished || st.Queued != 0 || st.InFlight != 0 || st.Done < int64(len(site.Expected())) {
		t.Fatalf("crawl %s: status %+v, want finished and empty with %d done", name, st, len(site.Expected()))
	}
	res := shardBenchResult{shards: shards, pages: st.Done, elapsed: elapsed}
	byAddr := map[string]*shardBenchNode{}
	for _, nd := range rc.Nodes {
		res.nodes = append(res.nodes, shardBenchNode{addr: nd.Addr})
	}
	for i := range res.nodes {
		byAddr[res.nodes[i].addr] = &res.nodes[i]
	}
	for k, o := range owners {
		byAddr[o].shards = append(byAddr[o].shards, k)
	}
	for _, raw := range site.HostURLs() {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		byAddr[owners[frontier.ShardOfHost(u.Host, shards)]].hosts++
	}
	if shards == 1 {
		byAddr[owners[0]].pages = st.Done
	}
	for _, s := range st.Shards {
		byAddr[owners[s.Shard]].pages += s.Done
	}
	// a node with no shard gives the baseline (cluster bus, cron, INFO)
	var idleCPU float64
	idle := 0
	for i := range res.nodes {
		n := &res.nodes[i]
		a, bf := after[n.addr], before[n.addr]
		n.cpu = a.s.cpu - bf.s.cpu
		n.memory = a.mem - bf.mem
		for cmd, v := range a.s.stats {
			switch cmd {
			case "info", "config|resetstat", "config", "scan", "memory|usage", "memory", "dbsize":
				continue // the benchmark's own
			}
			d := int64(v[0] - bf.s.stats[cmd][0])
			n.calls += d
			if cmd == "fcall" || cmd == "fcall_ro" {
				n.evals += d
			}
		}
		iter := rc.Node(n.addr).Client.Scan(ctx, 0, testutil.CrawlKeyPattern(name), 1000).Iterator()
		for iter.Next(ctx) {
			n.keys++
			m, err := rc.Node(n.addr).Client.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			n.bytes += m
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		if len(n.shards) == 0 {
			idleCPU += n.cpu
			idle++
		}
	}
	if idle > 0 {
		idleCPU /= float64(idle)
	}
	var cpu, calls, bytes float64
	for i := range res.nodes {
		n := &res.nodes[i]
		n.cpuNet = n.cpu
		if len(n.shards) > 0 {
			n.cpuNet = max(0, n.cpu-idleCPU)
		}
		cpu += n.cpu
		calls += float64(n.calls)
		bytes += float64(n.bytes)
	}
	pages := float64(st.Done)
	res.pagesPerSec = pages / elapsed.Seconds()
	res.cpuUsPerPage = cpu * 1e6 / pages
	res.clientCmdsPerPage = float64(cmds) / pages
	res.serverCallsPerPage = calls / pages
	res.bytesPerPage = bytes / pages
	t.Logf("S=%d crawl %s: %d pages in %v = %.0f pages/s; Redis CPU %.1f µs/page (all nodes; idle node %.0f ms); %.2f client cmds/page; %.2f server calls/page; %.0f key bytes/page",
		shards, name, st.Done, elapsed.Round(time.Millisecond), res.pagesPerSec, res.cpuUsPerPage, idleCPU*1000,
		res.clientCmdsPerPage, res.serverCallsPerPage, res.bytesPerPage)
	t.Logf("  %-16s %-7s %5s %6s %9s %8s %9s %9s %7s %9s %10s", "node", "shards", "hosts", "pages",
		"cpu-ms", "µs/page", "calls", "evals", "keys", "key-MB", "used-MB")
	for _, n := range res.nodes {
		ks := make([]string, len(n.shards))
		for j, k := range n.shards {
			ks[j] = strconv.Itoa(k)
		}
		t.Logf("  %-16s %-7s %5d %6d %9.0f %8.1f %9d %9d %7d %9.2f %10.2f", n.addr, strings.Join(ks, ","), n.hosts, n.pages,
			n.cpu*1000, n.cpu*1e6/pages, n.calls, n.evals, n.keys, float64(n.bytes)/1e6, float64(n.memory)/1e6)
	}
	return res
}
