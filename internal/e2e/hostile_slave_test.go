package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// TestHostileDirectSlave runs a hostile direct slave (its own Redis user,
// made as bin/master acl --role slave makes it) beside two honest crawls
// on one Redis for at least 30 s. Over and over it tries to run Lua of
// its own (EVAL, EVALSHA, SCRIPT, FUNCTION), to call the library's
// functions with another slave's keys or the other crawl's, with
// arguments over their caps, out of scope or out of form, and to write
// events for the other crawl or in another slave's name. Every attempt is
// refused or recorded; both crawls finish with every page, the other
// crawl's rows hold nothing of the hostile slave's, and Redis never
// answered BUSY.
func TestHostileDirectSlave(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two crawls for 30 s")
	}
	t.Parallel() // its own Redis and crawls: it runs beside the package's other tests
	ctx := context.Background()
	newCrawl := func(seed int64) (*config.Config, *testsite.Site) {
		site, err := testsite.Start(testsite.Options{Hosts: 4, PagesPerHost: 120, LinksPerPage: 5,
			PageBytes: 1024, Robots: true, Specials: true, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(site.Close)
		cfg := crawltest.Config(t)
		// about 16 pages a second: each crawl lasts about 30 s
		cfg.Politeness.Delay, cfg.Politeness.Jitter = 250*time.Millisecond, 0
		return cfg, site
	}
	cfgA, siteA := newCrawl(31)
	cfgB, siteB := newCrawl(32)
	srv := frontiertest.StartACLRedisCrawls(t, map[string][]string{
		cfgA.Crawl.Name: {"a1", "a2", "evil"}, cfgB.Crawl.Name: {"b1", "b2"}})
	for _, c := range []struct {
		cfg  *config.Config
		site *testsite.Site
	}{{cfgA, siteA}, {cfgB, siteB}} {
		c.cfg.Redis.URL = srv.CrawlURL(c.cfg.Crawl.Name, frontier.RoleMaster, "")
		crawltest.Seed(t, c.cfg, c.site)
	}
	slaveCfg := func(cfg *config.Config, id string) *config.Config {
		c := *cfg
		c.Redis.URL = srv.CrawlURL(cfg.Crawl.Name, frontier.RoleSlave, id)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	crawltest.StartSlave(t, slaveCfg(cfgA, "a1"), "a1")
	crawltest.StartSlave(t, slaveCfg(cfgA, "a2"), "a2")
	crawltest.StartSlave(t, slaveCfg(cfgB, "b1"), "b1")
	crawltest.StartSlave(t, slaveCfg(cfgB, "b2"), "b2")

	evil := srv.CrawlClient(t, cfgA.Crawl.Name, frontier.RoleSlave, "evil")
	attacks := hostileAttacks(t, cfgA, cfgB)
	var failures []string
	atk := startAttacks(30*time.Second, func() {
		for _, a := range attacks {
			if msg := a.try(ctx, evil); msg != "" && len(failures) < 20 {
				failures = append(failures, a.name+": "+msg)
			}
		}
	})
	var masters sync.WaitGroup
	for _, cfg := range []*config.Config{cfgA, cfgB} {
		masters.Add(1)
		go func() { defer masters.Done(); crawltest.RunMaster(t, cfg) }()
	}
	masters.Wait()
	rounds := atk.stop()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d rounds of %d attacks", rounds, len(attacks))

	crawltest.CheckCrawl(t, cfgA, siteA, nil)
	crawltest.CheckCrawl(t, cfgB, siteB, nil)

	db, err := store.Open(ctx, cfgA.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// the other crawl holds nothing of the hostile slave's
	if n, err := db.Counts(ctx, cfgB.Crawl.Name); err != nil || n.Items != 0 {
		t.Errorf("items of crawl B: %+v, %v; want none (the forged one refused)", n, err)
	}
	excB, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfgB.Crawl.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range excB {
		if x.Slave == "evil" || x.Kind == events.KindForgedEvent {
			t.Errorf("crawl B holds an exception of the hostile slave's: %+v", x)
		}
	}
	// what it did is recorded where it came from: forged events and
	// refused links, in crawl A under its own name
	kinds := map[string]int{}
	excA, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfgA.Crawl.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range excA {
		if x.Slave == "evil" {
			kinds[x.Kind]++
		}
	}
	if kinds[events.KindForgedEvent] == 0 || kinds["invalid_input"] == 0 {
		t.Errorf("exceptions of the hostile slave in crawl A by kind: %v; want forged_event and invalid_input", kinds)
	}
	if pages, err := db.PageURLs(ctx, cfgA.Crawl.Name); err != nil {
		t.Fatal(err)
	} else {
		for u := range pages {
			if strings.Contains(u, "evil.example") || strings.Contains(u, "forged.test") {
				t.Errorf("crawl A fetched or stored %s", u)
			}
		}
	}
	info, err := srv.Root.Info(ctx, "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(info, "errorstat_BUSY") {
		t.Errorf("Redis answered BUSY:\n%s", info)
	}
	// every ACL refusal is the hostile slave's
	for _, d := range srv.Denials(t) {
		if !strings.HasPrefix(d, "redcrawl-slave-evil ") {
			t.Errorf("unexpected ACL refusal: %s", d)
		}
	}
}

// hostileAttack is one thing the hostile slave tries; try returns what went
// wrong ("" when it was refused, or done and harmless, as it must be).
type hostileAttack struct {
	name string
	try  func(ctx context.Context, evil *redis.Client) string
}

// hostileAttacks lists the hostile slave's attempts, as slave evil of
// crawl A.
func hostileAttacks(t *testing.T, cfgA, cfgB *config.Config) []hostileAttack {
	kA, kB := frontier.NewKeys(cfgA.Crawl.Name), frontier.NewKeys(cfgB.Crawl.Name)
	lib := frontier.LibraryName()
	ns := strings.Replace(lib, "redcrawl_", "rc", 1) + "_"
	fcall := func(k frontier.Keys, fn string, args ...any) []any {
		return append([]any{"FCALL", ns + fn, 1, k.Meta, k.Prefix}, args...)
	}
	refused := func(prefix string, args ...any) func(ctx context.Context, evil *redis.Client) string {
		return func(ctx context.Context, evil *redis.Client) string {
			err := evil.Do(ctx, args...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), prefix) {
				return fmt.Sprintf("%.80v: err = %v, want %s...", args, err, prefix)
			}
			return ""
		}
	}
	done := func(args ...any) func(ctx context.Context, evil *redis.Client) string {
		return func(ctx context.Context, evil *redis.Client) string {
			if err := evil.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
				return fmt.Sprintf("%.80v: %v", args, err)
			}
			return ""
		}
	}
	task := func(depth int, url string) string { return fmt.Sprintf("%d\t0\t0\t%s", depth, url) }
	xadd := func(typ, data string) []any {
		return []any{"XADD", kA.SlaveEvents("evil"), "*", events.FieldType, typ, events.FieldData, data}
	}
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	return []hostileAttack{
		{"a Lua loop with no end", refused("NOPERM", "EVAL", "while true do end", 0)},
		{"EVALSHA", refused("NOPERM", "EVALSHA", strings.Repeat("a", 40), 0)},
		{"SCRIPT LOAD", refused("NOPERM", "SCRIPT", "LOAD", "while true do end")},
		{"SCRIPT KILL", refused("NOPERM", "SCRIPT", "KILL")},
		{"FUNCTION LOAD", refused("NOPERM", "FUNCTION", "LOAD", "#!lua name=evil\nredis.register_function('evil', function() while true do end end)")},
		{"FUNCTION DELETE", refused("NOPERM", "FUNCTION", "DELETE", lib)},
		{"FUNCTION FLUSH", refused("NOPERM", "FUNCTION", "FLUSH")},
		{"FUNCTION KILL", refused("NOPERM", "FUNCTION", "KILL")},
		{"claim as another slave", refused("NOPERM", fcall(kA, "claim", "a1", 10, 1, 0, 0)...)},
		{"heartbeat as another slave", refused("NOPERM", fcall(kA, "heartbeat", "a1", `{"slave":"a1"}`, "x")...)},
		{"claim in the other crawl", refused("NOPERM", fcall(kB, "claim", "evil", 10, 1, 0, 0)...)},
		{"claim past the cap", refused("ERR redcrawl:", fcall(kA, "claim", "evil", 1_000_000, 1, 0, 0)...)},
		{"an event over the cap", refused("ERR redcrawl:", fcall(kA, "complete", "evil", 1, 1,
			"http://x.test/", 1, "done", 0, 0, 0, "", "", "", "", 1, 0, 0, "page", strings.Repeat("x", 1<<20+1))...)},
		{"links past the arguments", refused("ERR redcrawl:", fcall(kA, "links", "evil", 0, 1000)...)},
		{"a master's function", refused("NOPERM", fcall(kA, "finish", 0)...)},
		{"a link out of scope", done(fcall(kA, "links", "evil", 0, 1,
			"1", "1", "evil.example", "evil.example", 1, task(1, "http://evil.example/"), "")...)},
		{"a link under another host's politeness", done(fcall(kA, "links", "evil", 0, 1,
			"2", "2", siteHosts0(cfgA), siteHosts0(cfgA), 1, task(1, "http://evil.example/x"), "")...)},
		{"an item for the other crawl", done(xadd("item", fmt.Sprintf(`{"crawl":%q,"rule":"r","item":"i","url":"http://x.test/","data":{},"slave":"b1","fetched_at":%d}`, cfgB.Crawl.Name, future))...)},
		{"a page in another slave's name", done(xadd("page", fmt.Sprintf(`{"crawl":%q,"url":"http://forged.test/","status":200,"slave":"a1"}`, cfgA.Crawl.Name))...)},
		{"a heartbeat pointing Prometheus at the metadata address", done(fcall(kA, "heartbeat", "evil",
			`{"slave":"evil","metrics_addr":"169.254.169.254:80"}`, "box")...)},
	}
}

// siteHosts0 is the first of a crawl's allowed hosts.
func siteHosts0(cfg *config.Config) string { return cfg.Crawl.AllowHosts[0] }

// attackLoop repeats a hostile slave's round of attacks in a goroutine.
type attackLoop struct {
	stopc  chan struct{}
	done   chan struct{}
	rounds int
}

// startAttacks runs round over and over, 20 ms apart, until stop is called
// and at least atLeast has passed.
func startAttacks(atLeast time.Duration, round func()) *attackLoop {
	a := &attackLoop{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		start := time.Now()
		for {
			select {
			case <-a.stopc:
				if time.Since(start) >= atLeast {
					return
				}
			default:
			}
			round()
			a.rounds++
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return a
}

// stop ends the attacks (once atLeast has passed) and returns the rounds.
func (a *attackLoop) stop() int {
	close(a.stopc)
	<-a.done
	return a.rounds
}
