package e2e

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestShardedClusterFailover crawls a 48-host test site as one crawl of 6
// shards over a 3-master + 3-replica Redis Cluster, with a master and 3
// slaves. Mid-crawl it checks each master node's share of the crawl's keys
// and Redis CPU, then kills one master node with SIGKILL: its replica is
// promoted, slaves and master ride through, and every page is fetched and
// recorded in MySQL. Replication is asynchronous, so writes acknowledged
// just before the kill can vanish: the test counts the re-fetches that
// costs and allows them, but not one missing page.
func TestShardedClusterFailover(t *testing.T) {
	const shards = 6
	rc := testutil.StartCluster(t, 3, 1, testutil.WithNodeTimeout(time.Second))
	ctx := context.Background()
	cfg := crawltest.Config(t)
	cfg.Redis.URL, cfg.Redis.Cluster = rc.URL, true
	cfg.Crawl.Shards = shards
	cfg.Lease.Duration = 3 * time.Second
	site, err := testsite.Start(testsite.Options{Hosts: 48, PagesPerHost: 30, LinksPerPage: 5,
		PageBytes: 1024, Robots: true, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	var hosts []string // as Task.Host: host:port
	for _, raw := range site.HostURLs() {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, u.Host)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	perShard := make([]int, shards)
	for _, h := range hosts {
		perShard[frontier.ShardOfHost(h, shards)]++
	}
	t.Logf("hosts per shard %v (the frontier places the shards: two a master)", perShard)
	before, err := rc.NodeStats(ctx, testutil.CrawlKeyPattern(cfg.Crawl.Name))
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := map[string]time.Duration{}
	for _, s := range before {
		cpu0[s.Addr] = s.CPU
	}
	crawltest.Seed(t, cfg, site)
	for i := range 3 {
		crawltest.StartSlave(t, cfg, fmt.Sprintf("fo-%d", i+1))
	}
	masterDone := make(chan struct{})
	go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()

	// a third of the way: each node's share, then the kill
	total := len(site.Expected())
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st, err := masterd.Status(ctx, cfg); err == nil && st.Done >= int64(total/3) {
			break
		}
	}
	masters, err := rc.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("masters %v, %v", masters, err)
	}
	stats, err := rc.NodeStats(ctx, testutil.CrawlKeyPattern(cfg.Crawl.Name))
	if err != nil {
		t.Fatal(err)
	}
	var keys int64
	var cpu time.Duration
	for i, s := range stats {
		stats[i].CPU -= cpu0[s.Addr] // the crawl's, not the cluster's start
		if s.Role == "master" {
			keys += s.Matched
			cpu += stats[i].CPU
		}
	}
	for _, s := range stats {
		if s.Role != "master" {
			continue
		}
		kShare, cShare := float64(s.Matched)/float64(keys), float64(s.CPU)/float64(cpu)
		t.Logf("node %s: %d keys (%.0f%%), %v Redis CPU (%.0f%%)", s.Addr, s.Matched, 100*kShare, s.CPU, 100*cShare)
		// every node used: its two shards hold a share of the 48 hosts
		// that varies with their random ports (host:port picks the
		// shard), so the bounds are wide; an idle node (0%) or one
		// holding most of the crawl fails
		if kShare < 0.15 || kShare > 0.52 {
			t.Errorf("node %s holds %.0f%% of the crawl's keys, want 15%% to 52%%", s.Addr, 100*kShare)
		}
		if cShare < 0.15 || cShare > 0.52 {
			t.Errorf("node %s spent %.0f%% of the Redis CPU, want 15%% to 52%%", s.Addr, 100*cShare)
		}
	}
	victim := masters[0]
	if err := rc.Kill(victim); err != nil {
		t.Fatal(err)
	}
	kill := time.Now()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	promoted, err := rc.WaitFailover(fctx, victim)
	cancel()
	if err != nil {
		t.Fatalf("failover of %s: %v", victim, err)
	}
	t.Logf("killed %s; %s promoted %v later", victim, promoted, time.Since(kill).Round(time.Millisecond))
	<-masterDone

	// every page fetched and recorded; re-fetches only counted
	expected, hits := site.Expected(), site.HitCounts()
	var missing []string
	refetched := 0
	for u, want := range expected {
		if hits[u] < want {
			missing = append(missing, u)
		}
		if hits[u] > want {
			refetched += hits[u] - want
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d pages never fetched, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LostTasks(ctx, cfg.Crawl.Name, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var unrecorded []string
	for u := range expected {
		if strings.HasSuffix(u, "/robots.txt") {
			continue
		}
		var n int
		if err := db.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM pages WHERE crawl = ? AND url = ?", cfg.Crawl.Name, u).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			unrecorded = append(unrecorded, u)
		}
	}
	if len(unrecorded) > 0 {
		sort.Strings(unrecorded)
		t.Errorf("%d pages not in MySQL, e.g. %v", len(unrecorded), unrecorded[:min(5, len(unrecorded))])
	}
	st, err := masterd.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished || st.Queued != 0 || st.InFlight != 0 {
		t.Errorf("status after the crawl %+v, want finished and empty", st)
	}
	t.Logf("%d pages, %d re-fetches after the failover (%d leases taken back)", len(expected), refetched, len(lost))
}
