package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestClusterThreeSlaves(t *testing.T) {
	cfg := crawltest.Config(t)
	site := crawltest.StartSite(t, 0)
	crawltest.Seed(t, cfg, site)
	for i := range 3 {
		crawltest.StartSlave(t, cfg, fmt.Sprintf("slave-%d", i+1))
	}
	crawltest.RunMaster(t, cfg)
	crawltest.CheckCrawl(t, cfg, site, nil)

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

func TestClusterSlaveKilled(t *testing.T) {
	bin, err := crawltest.BuildSlave()
	if err != nil {
		t.Fatal(err)
	}
	cfg := crawltest.Config(t)
	site := crawltest.StartSite(t, 30*time.Millisecond)
	crawltest.Seed(t, cfg, site)
	crawltest.StartSlave(t, cfg, "steady-1")
	crawltest.StartSlave(t, cfg, "steady-2")
	victim := exec.Command(bin, "run", "--config", "", "--id", "victim")
	victim.Env = crawltest.SlaveEnv(cfg)
	victim.Stderr = os.Stderr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })

	masterDone := make(chan struct{})
	go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()

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
	crawltest.CheckCrawl(t, cfg, site, lost)
}

// TestClusterMySQLOutage takes MySQL away from the master mid-crawl, with
// direct slaves and with slaves of the work API (whose tokens the master
// looks up in MySQL): the master pauses its sink, the slaves go on or
// pause, and the crawl completes with full coverage.
func TestClusterMySQLOutage(t *testing.T) {
	for _, api := range []bool{false, true} {
		t.Run(crawltest.SlaveKind(api), func(t *testing.T) {
			cfg := crawltest.Config(t)
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

			site := crawltest.StartSite(t, 0)
			crawltest.Seed(t, cfg, site)
			crawltest.StartSlaves(t, cfg, api, 2)
			masterDone := make(chan struct{})
			go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()
			time.Sleep(700 * time.Millisecond)
			proxy.SetDown(true)
			time.Sleep(3 * time.Second)
			if st, _ := masterd.Status(context.Background(), cfg); st.Finished {
				t.Log("crawl finished during the outage")
			}
			proxy.SetDown(false)
			<-masterDone
			crawltest.CheckCrawlRobots(t, cfg, site, nil, crawltest.RobotsFetchers(api, 2))
		})
	}
}

// TestClusterRedisOutage takes Redis away from the master and the slaves
// mid-crawl, with direct slaves and with slaves of the work API (which
// meet the outage as the master's errors): they pause and resume when it
// is back, nothing crashes, and the crawl completes with full coverage.
func TestClusterRedisOutage(t *testing.T) {
	for _, api := range []bool{false, true} {
		t.Run(crawltest.SlaveKind(api), func(t *testing.T) {
			cfg := crawltest.Config(t)
			site := crawltest.StartSite(t, 0)
			crawltest.Seed(t, cfg, site) // seeded directly, before the proxy is in the way
			ropt, err := redis.ParseURL(cfg.Redis.URL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testutil.NewProxy(t, ropt.Addr)
			cfg.Redis.URL = fmt.Sprintf("redis://%s/%d", proxy.Addr(), ropt.DB)
			// a lease must outlive the outage, or every in-flight task is (correctly) re-fetched
			cfg.Lease.Duration = 20 * time.Second
			cfg.Master.DeadAfter = 10 * time.Second

			crawltest.StartSlaves(t, cfg, api, 2)
			masterDone := make(chan struct{})
			go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()
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
			crawltest.CheckCrawlRobots(t, cfg, site, nil, crawltest.RobotsFetchers(api, 2))
		})
	}
}
