package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestAPICrawl: slaves of the work API crawl the test site whole, alone
// and beside a direct slave (politeness holds across both kinds), on one
// shard and on three; the events they send are stored under their names.
func TestAPICrawl(t *testing.T) {
	for _, tc := range []struct {
		name        string
		shards, api int
		direct      int
	}{{"three API slaves", 1, 3, 0}, {"two API slaves and a direct one, 3 shards", 3, 2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := crawltest.Config(t)
			cfg.Crawl.Shards = tc.shards
			site := crawltest.StartSite(t, 0)
			crawltest.Seed(t, cfg, site)
			a := crawltest.WithAPI(t, cfg)
			for i := range tc.api {
				a.Start(fmt.Sprintf("api-%d", i+1))
			}
			for i := range tc.direct {
				crawltest.StartSlave(t, cfg, fmt.Sprintf("direct-%d", i+1))
			}
			crawltest.RunMaster(t, cfg)
			// each API slave fetches the robots.txt of the hosts it claims
			crawltest.CheckCrawlRobots(t, cfg, site, nil, tc.api+tc.direct)

			ctx := context.Background()
			db, err := store.Open(ctx, cfg.MySQL.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			joins := slavesWithEvent(t, db, cfg.Crawl.Name, events.SlaveJoin)
			if len(joins) != tc.api+tc.direct {
				t.Errorf("joins of %d slaves, want %d: %v", len(joins), tc.api+tc.direct, joins)
			}
			for _, kind := range []string{events.KindForgedEvent, events.KindInvalidInput} {
				if exc, _ := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfg.Crawl.Name, Kind: kind}); len(exc) > 0 {
					t.Errorf("honest API slaves' events refused (%s): %+v", kind, exc[0])
				}
			}
		})
	}
}

// TestAPISlaveKilled: an API slave killed mid-crawl loses nothing, as a
// direct one: its leases are taken back when its heartbeats stop.
func TestAPISlaveKilled(t *testing.T) {
	bin, err := crawltest.BuildSlave()
	if err != nil {
		t.Fatal(err)
	}
	cfg := crawltest.Config(t)
	site := crawltest.StartSite(t, 30*time.Millisecond)
	crawltest.Seed(t, cfg, site)
	a := crawltest.WithAPI(t, cfg)
	a.Start("steady-1")
	vc := a.Config("victim")
	victim := exec.Command(bin, "run", "--config", "", "--id", "victim")
	victim.Env = append(crawltest.SlaveEnv(vc), "CRAWLER_SLAVE_API_URLS="+strings.Join(vc.Slave.API.URLs, ","),
		"CRAWLER_SLAVE_API_TOKEN_FILE="+vc.Slave.API.TokenFile, "CRAWLER_SLAVE_API_CA_FILE="+vc.Slave.API.CAFile)
	victim.Stderr = os.Stderr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })

	masterDone := make(chan struct{})
	go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()
	f := openFrontier(t, cfg)
	ctx := context.Background()
	killed := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !killed; time.Sleep(5 * time.Millisecond) {
		if n, _ := f.Client().ZCard(ctx, f.Keys().SlaveLease("victim")).Result(); n > 0 {
			if st, err := f.Stats(ctx); err == nil && st.Done > 20 {
				victim.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
	}
	if !killed {
		t.Fatal("the API slave never held a lease")
	}
	victim.Wait()
	held, _ := f.Client().ZCard(ctx, f.Keys().SlaveLease("victim")).Result()
	t.Logf("the victim held %d leases when it died", held)
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
	n := 0
	for _, l := range lost {
		if l.Slave == "victim" {
			n++
		}
	}
	if held > 0 && n == 0 {
		t.Fatalf("no lost_tasks rows for the killed API slave, which held %d leases: %+v", held, lost)
	}
	crawltest.CheckCrawlRobots(t, cfg, site, lost, 2)
}

// apiShopRules renders the test site's dynamic shop and extracts its
// products (slave/slaved's render test has the same).
const apiShopRules = `name: shop
hosts: [%HOST%]
render:
  - match: ['/shop/$']
    wait_selector: a.product
    click: {selector: button.more, times: 5}
    block: [image]
  - match: ['/shop/product/\d+$']
    wait_selector: '#price:not(:empty)'
    block: [image]
items:
  - name: product
    match: ['/shop/product/\d+$']
    fields:
      - {name: title, css: h1}
      - {name: price_text, css: '#price'}
`

// TestAPIRender: a slave of the work API renders the dynamic shop in
// Chromium and stores every product's item, as a direct slave does: its
// render tasks come to it through the API (it says it can render), and
// its items reach MySQL through its events.
func TestAPIRender(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Skipf("no Chromium at /usr/bin/chromium (apt-get install chromium): %v", err)
	}
	site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 10, Dynamic: true, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	shop := site.Shop()
	cfg := crawltest.Config(t)
	cfg.Politeness.ObeyRobots = false
	cfg.Render.ChromePath = "/usr/bin/chromium"
	cfg.Rules.Dir = t.TempDir()
	cu, err := url.Parse(shop.Catalogue)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Rules.Dir, "shop.yaml"), []byte(strings.ReplaceAll(apiShopRules, "%HOST%", cu.Hostname())), 0o644); err != nil {
		t.Fatal(err)
	}
	crawltest.Seed(t, cfg, site)
	a := crawltest.WithAPI(t, cfg)
	crawltest.RunWithSlave(t, cfg, "api-render", func(_ *config.Config, id string) *crawltest.SlaveHandle { return a.Start(id) })

	ctx := context.Background()
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string]bool{}
	if err := db.ExportItems(ctx, store.ItemFilter{Crawl: cfg.Crawl.Name}, func(r store.ItemRow) error {
		if r.Slave != "api-render" {
			t.Errorf("item of %s stored for %q", r.URL, r.Slave)
		}
		got[r.URL] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range shop.Products {
		if !got[p.URL] {
			t.Errorf("no item for %s", p.URL)
		}
	}
	t.Logf("%d items of %d products", len(got), len(shop.Products))
}

// TestAPISeveralMasters: two masters of one crawl serve the work API, each
// on its own address. One API slave is given both URLs, the other only the
// first master's. The first master stops a third of the way through and
// comes back 3 s later: the slave with two URLs goes on through the
// second, the other pauses until its master is back, and the crawl
// finishes whole.
func TestAPISeveralMasters(t *testing.T) {
	cfg := crawltest.Config(t)
	cfg.Crawl.Shards = 2
	cfg.Master.ShardLease = time.Second
	site := crawltest.StartSite(t, 10*time.Millisecond)
	crawltest.Seed(t, cfg, site)
	a := crawltest.WithAPI(t, cfg)
	cfg2 := *cfg
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg2.API.Listen = ln.Addr().String()
	ln.Close()

	both := a.Config("both")
	both.Slave.API.URLs = []string{"https://" + cfg.API.Listen, "https://" + cfg2.API.Listen}
	crawltest.StartSlave(t, both, "both")
	a.Start("first-only")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(c *config.Config, id string, ctx context.Context) chan error {
		errc := make(chan error, 1)
		go func() {
			errc <- masterd.New(c, masterd.Options{ID: id, ExitWhenDone: true, Logger: crawltest.Logger(t)}).Run(ctx)
		}()
		return errc
	}
	ctx1, stop1 := context.WithCancel(ctx)
	m1 := run(cfg, "m1", ctx1)
	m2 := run(&cfg2, "m2", ctx)

	f := openFrontier(t, cfg)
	total := int64(len(site.Expected()))
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, err := f.Stats(ctx); err == nil && st.Done >= total/3 {
			break
		}
	}
	stop1()
	if err := <-m1; err != nil {
		t.Fatalf("the first master: %v", err)
	}
	st, _ := f.Stats(ctx)
	t.Logf("the first master stopped at %d of %d pages", st.Done, total)
	time.Sleep(3 * time.Second)
	st2, _ := f.Stats(ctx)
	if st2.Done <= st.Done {
		t.Errorf("no page done in the 3 s without the first master (%d then %d): the slave with two URLs should go on", st.Done, st2.Done)
	}
	m1 = run(cfg, "m1", ctx)
	for _, errc := range []chan error{m1, m2} {
		if err := <-errc; err != nil {
			t.Fatalf("master: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish in 3 minutes")
	}
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LostTasks(ctx, cfg.Crawl.Name, 10000)
	if err != nil {
		t.Fatal(err)
	}
	crawltest.CheckCrawlRobots(t, cfg, site, lost, 2)
	pages := map[string]int{}
	rows, err := db.DB.QueryContext(ctx, `SELECT slave_id, COUNT(*) FROM pages WHERE crawl = ? GROUP BY slave_id`, cfg.Crawl.Name)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		pages[id] = n
	}
	rows.Close()
	t.Logf("pages by slave: %v", pages)
	if pages["both"] == 0 || pages["first-only"] == 0 {
		t.Errorf("pages by slave %v: want both slaves' pages", pages)
	}
}

// TestAPISlavesExitWhenDone: slaves of the work API run with
// --exit-when-done beside a master that exits when the crawl is finished.
// The master keeps its API up until they have learnt the finish from a
// heartbeat and left through it, so each slave returns nil with a leave
// recorded, and no claim of theirs met a master already gone.
func TestAPISlavesExitWhenDone(t *testing.T) {
	cfg := crawltest.Config(t)
	site := crawltest.StartSite(t, 0)
	crawltest.Seed(t, cfg, site)
	a := crawltest.WithAPI(t, cfg)
	logs := &crawltest.LockedBuffer{}
	errs := make(chan error, 2)
	for i := range 2 {
		id := fmt.Sprintf("api-%d", i+1)
		s, err := slaved.New(a.Config(id), slaved.Options{ID: id, ExitWhenDone: true,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		t.Cleanup(cancel)
		go func() { errs <- s.Run(ctx) }()
	}
	crawltest.RunMaster(t, cfg)
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("slave Run = %v, want nil (left when done)", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an API slave still runs 10 s after its master exited")
		}
	}
	crawltest.CheckCrawlRobots(t, cfg, site, nil, 2)
	if out := logs.String(); strings.Contains(out, "claim failed") || strings.Contains(out, "deregister") {
		t.Errorf("the slaves met a master gone:\n%s", out)
	}
	db, err := store.Open(context.Background(), cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	left := slavesWithEvent(t, db, cfg.Crawl.Name, events.SlaveLeave)
	if diff := cmp.Diff(map[string]bool{"api-1": true, "api-2": true}, left); diff != "" {
		t.Errorf("slaves recorded as left (-want +got):\n%s", diff)
	}
}

// slavesWithEvent returns the slaves of crawl with a slave event of kind
// (events.SlaveJoin, SlaveLeave, …) in MySQL.
func slavesWithEvent(t *testing.T, db *store.Store, crawl string, kind string) map[string]bool {
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
