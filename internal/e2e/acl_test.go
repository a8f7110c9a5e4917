package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// TestACLCrawl crawls the test site with a master and two slaves against
// a redis-server whose ACL file holds what bin/master acl prints: each
// slave on its own restricted user, the master on its own. Mid-crawl, one
// slave's user (a third slave's) tries the forbidden commands and writes;
// the crawl still
// completes with every page recorded, and the only ACL refusals Redis
// logged are the ones the test provoked.
func TestACLCrawl(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) { testACLCrawl(t, shards) })
	}
}

func testACLCrawl(t *testing.T, shards int) {
	site := crawltest.StartSite(t, 0)
	cfg := crawltest.Config(t)
	cfg.Crawl.Shards = shards
	srv := frontiertest.StartACLRedis(t, cfg.Crawl.Name, "s1", "s2", "s3")
	cfg.Redis.URL = srv.URL(frontier.RoleMaster, "")
	crawltest.Seed(t, cfg, site)

	slaveCfg := func(id string) *config.Config {
		c := *cfg
		c.Redis.URL = srv.URL(frontier.RoleSlave, id)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	crawltest.StartSlave(t, slaveCfg("s1"), "s1")
	crawltest.StartSlave(t, slaveCfg("s2"), "s2")

	// s3's user (a slave of the crawl, not running), mid-crawl, against
	// everything it must not touch
	ctx := context.Background()
	keys := frontier.NewKeys(cfg.Crawl.Name)
	k1 := frontier.ShardKeys(cfg.Crawl.Name, 1)
	evil := srv.Client(t, frontier.RoleSlave, "s3")
	// what s3's user may do, forged: join the registry and write to its
	// own stream an item of another crawl in another slave's name dated
	// 2100, and a page in s1's name (issue 19); the sink stores neither
	forged := []struct{ typ, data string }{
		{"item", `{"crawl":"other","rule":"r","item":"i","url":"http://x.test/","data":{},"slave":"o1","fetched_at":4102444800000}`},
		{"page", `{"crawl":"` + cfg.Crawl.Name + `","url":"http://forged.test/","status":200,"slave":"s1"}`},
	}
	if err := evil.ZAddNX(ctx, keys.Slaves, redis.Z{Score: 1, Member: "s3"}).Err(); err != nil {
		t.Fatalf("slave s3's user may not join the registry: %v", err)
	}
	for _, f := range forged {
		if err := evil.XAdd(ctx, &redis.XAddArgs{Stream: keys.SlaveEvents("s3"),
			Values: []any{events.FieldType, f.typ, events.FieldData, f.data}}).Err(); err != nil {
			t.Fatalf("slave s3's user may not write its own stream: %v", err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	// master status on the master's user sees both slaves (Deploy step 8)
	alive := make(chan int, 1)
	go func() {
		defer wg.Done()
		var best int
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && best < 2; time.Sleep(50 * time.Millisecond) {
			st, err := masterd.Status(ctx, cfg)
			if err == nil && st.SlavesAlive > best {
				best = st.SlavesAlive
			}
			if err == nil && st.Finished {
				break
			}
		}
		alive <- best
	}()
	go func() {
		defer wg.Done()
		// wait until s1 holds a lease, so there is one to go after
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if n, _ := srv.Root.ZCard(ctx, keys.SlaveLease("s1")).Result(); n > 0 {
				break
			}
		}
		urls, _ := srv.Root.ZRange(ctx, keys.SlaveLease("s1"), 0, 0).Result()
		victim := "http://x.test/"
		if len(urls) > 0 {
			victim = urls[0]
		}
		for _, args := range [][]any{
			{"FLUSHALL"}, {"FLUSHDB"}, {"CONFIG", "SET", "dir", "/tmp"}, {"CONFIG", "SET", "dbfilename", "x.so"},
			{"KEYS", "*"}, {"SCAN", 0}, {"MODULE", "LOAD", "/tmp/x.so"}, {"SCRIPT", "FLUSH"}, {"FUNCTION", "FLUSH"},
			{"ACL", "SETUSER", "redcrawl-slave-s3", "~*", "+@all"}, {"SHUTDOWN", "NOSAVE"},
			{"HSET", keys.Rules, "version", "evil", "blob", "x"}, {"PUBLISH", keys.RulesChannel, "evil"},
			{"HSET", keys.Control, "paused", 1}, {"HSET", keys.Control, "drain:s1", 1}, {"HSET", keys.Finish, "finished", 1},
			{"ZADD", keys.SlaveLease("s1"), 0, victim}, {"HDEL", keys.SlaveLeaseData("s1"), victim},
			{"DEL", keys.SlaveLease("s1")}, {"SET", keys.SlaveBeat("s1"), "0\t{}"}, {"ZREM", keys.Slaves, "s1"},
			{"XTRIM", keys.Events, "MAXLEN", 0}, {"DEL", keys.Events}, {"DEL", keys.Stats},
			{"SADD", keys.Prefix + "seeds", "http://evil.test/"},
			{"HSET", "crawl:{other}:meta", "x", 1}, {"GET", "crawl:{other}:robots:x"},
			{"EVAL", "return redis.call('DEL', ARGV[1])", 1, keys.Meta, keys.SlaveLeaseData("s1")},
			// another shard's keys (the same in a crawl of one shard: no such keys, still refused)
			{"ZADD", k1.SlaveLease("s1"), 0, victim}, {"HSET", k1.Control, "paused", 1},
			{"HSET", k1.Finish, "finished", 1}, {"XTRIM", k1.Events, "MAXLEN", 0}, {"XTRIM", k1.SlaveEvents("s1"), "MAXLEN", 0},
		} {
			if err := evil.Do(ctx, args...).Err(); err == nil {
				t.Errorf("slave s3's user ran %v", args)
			}
		}
	}()

	crawltest.RunMaster(t, cfg)
	wg.Wait()
	if n := <-alive; n != 2 {
		t.Errorf("master status saw %d slaves alive at most, want 2", n)
	}
	crawltest.CheckCrawl(t, cfg, site, nil)
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, _, err := db.SeedURLs(ctx, cfg.Crawl.Name, nil, 100)
	sort.Strings(got)
	want := append([]string(nil), site.Seeds()...)
	sort.Strings(want)
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("recorded seeds (-want +got), %v:\n%s", err, d)
	}

	exc, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfg.Crawl.Name, Kind: events.KindForgedEvent})
	if err != nil {
		t.Fatal(err)
	}
	var forgers []string
	for _, x := range exc {
		forgers = append(forgers, x.Slave)
	}
	if d := cmp.Diff([]string{"s3", "s3"}, forgers); d != "" {
		t.Errorf("forged_event exceptions by slave (-want +got):\n%s", d)
	}
	if c, err := db.Counts(ctx, "other"); err != nil || c != (store.Counts{}) {
		t.Errorf("rows of the crawl other: %+v, %v; want none", c, err)
	}
	if pages, err := db.PageURLs(ctx, cfg.Crawl.Name); err != nil || pages["http://forged.test/"] != 0 {
		t.Errorf("forged page stored: %v, %v", pages["http://forged.test/"], err)
	}

	// every refusal is one of s3's: the master's and the running slaves'
	// users had every right their work needed
	for _, d := range srv.Denials(t) {
		if !strings.HasPrefix(d, "redcrawl-slave-s3 ") {
			t.Errorf("unexpected ACL refusal: %s", d)
		}
	}
}
