package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
)

// TestFailoverLosesNoPage hunts for the window in which a Redis Cluster
// failover could lose a page: the sharded crawl of TestShardedClusterFailover
// (6 shards on 3 masters + 3 replicas, a master and 3 slaves) on a site
// where every third page links to a leaf that no other page links to
// (testsite Options.Leaves, across hosts and so across shards), with one
// cluster master killed at 10%, 20%, ... 100% of the pages done, a new
// cluster each time. Its replica's link is cut replicaLag before the
// kill, so the window in which replication had not caught up is certain
// to hold writes, not a matter of luck. Every page must be fetched and
// stored in MySQL. A failover costs re-fetches (a claim or an ack the
// replica never got: the page is fetched again), counted in the log.
func TestFailoverLosesNoPage(t *testing.T) {
	if testing.Short() {
		t.Skip("ten sharded crawls, each over a new Redis Cluster")
	}
	for pct := 10; pct <= 100; pct += 10 {
		t.Run(fmt.Sprintf("kill at %d%%", pct), func(t *testing.T) { failoverRun(t, pct) })
	}
}

// replicaLag is how long the killed master's replica is cut off before
// the kill.
const replicaLag = 200 * time.Millisecond

func failoverRun(t *testing.T, pct int) {
	const shards = 6
	rc := testutil.StartCluster(t, 3, 1, testutil.WithNodeTimeout(time.Second))
	ctx := context.Background()
	cfg := crawltest.Config(t)
	cfg.Redis.URL, cfg.Redis.Cluster = rc.URL, true
	cfg.Crawl.Shards = shards
	cfg.Lease.Duration = 3 * time.Second
	site, err := testsite.Start(testsite.Options{Hosts: 24, PagesPerHost: 24, LinksPerPage: 4,
		PageBytes: 512, Robots: true, Leaves: true, Seed: int64(pct)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	crawltest.Seed(t, cfg, site)
	for i := range 3 {
		crawltest.StartSlave(t, cfg, fmt.Sprintf("fh-%d", i+1))
	}
	masterDone := make(chan struct{})
	go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()

	total := int64(len(site.Expected()))
	want := total * int64(pct) / 100
	killed := ""
wait:
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-masterDone:
			break wait // finished before the point: nothing left to lose
		default:
		}
		if st, err := masterd.Status(ctx, cfg); err == nil && st.Done >= want {
			masters, err := rc.Masters(ctx)
			if err != nil || len(masters) == 0 {
				t.Fatalf("masters %v, %v", masters, err)
			}
			killed = masters[pct/10%len(masters)]
			// its replica is cut off replicaLag before the kill: what the
			// master acknowledges meanwhile is on it alone when it dies,
			// as asynchronous replication allows
			if err := rc.KillBehind(ctx, killed, func() { time.Sleep(replicaLag) }); err != nil {
				t.Fatal(err)
			}
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err = rc.WaitFailover(fctx, killed)
			cancel()
			if err != nil {
				t.Fatalf("failover of %s: %v", killed, err)
			}
			break
		}
	}
	<-masterDone

	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LostTasks(ctx, cfg.Crawl.Name, 100000)
	if err != nil {
		t.Fatal(err)
	}
	lostBy := map[string]int{}
	for _, l := range lost {
		lostBy[l.URL]++
	}
	rows, err := db.PageURLs(ctx, cfg.Crawl.Name)
	if err != nil {
		t.Fatal(err)
	}
	expected, hits := site.Expected(), site.HitCounts()
	var missing, unstored []string
	refetched := 0
	for u, n := range expected {
		switch {
		case hits[u] < n:
			missing = append(missing, u)
		case rows[u] == 0:
			unstored = append(unstored, u)
		}
		refetched += max(hits[u]-n, 0)
	}
	for _, l := range [][]string{missing, unstored} {
		sort.Strings(l)
	}
	if len(missing) > 0 {
		t.Errorf("killed %s at %d of %d pages: %d pages never fetched, e.g. %v", killed, want, total, len(missing),
			missing[:min(6, len(missing))])
	}
	if len(unstored) > 0 {
		t.Errorf("%d pages fetched but not in MySQL, e.g. %v", len(unstored), unstored[:min(6, len(unstored))])
	}
	leaves := 0
	for u := range expected {
		if strings.Contains(u, "/leaf/") {
			leaves++
		}
	}
	t.Logf("killed %q at %d of %d pages (%d leaves): %d re-fetches, %d leases taken back", killed, want, total,
		leaves, refetched, len(lost))
}
