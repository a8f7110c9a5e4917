package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// TestReadmeDiff checks that the diff README.md shows is the diff between
// the two programs: applied to standalone/main.go it gives main.go, and
// it stays a few lines.
func TestReadmeDiff(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```diff\n(.*?)^```").FindAllSubmatch(readme, -1)
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d diff blocks, want 1", len(blocks))
	}
	diff := string(blocks[0][1])
	src, err := os.ReadFile(filepath.Join("standalone", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	got, changed, err := applyDiff(string(src), diff, "standalone/main.go", "main.go")
	if err != nil {
		t.Fatalf("README.md's diff does not apply to standalone/main.go: %v", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("standalone/main.go with README.md's diff is not main.go (-main.go +patched):\n%s", d)
	}
	if changed > 20 {
		t.Errorf("the diff changes %d lines: a colly scraper should become a slave in a few", changed)
	}
}

var hunkRE = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// applyDiff applies a unified diff between the files named from and to
// to src, strictly: every context and removed line must be src's. It
// returns the result and the number of lines added or removed.
func applyDiff(src, diff, from, to string) (string, int, error) {
	lines := strings.SplitAfter(src, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	dl := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	if len(dl) < 2 || dl[0] != "--- "+from || dl[1] != "+++ "+to {
		return "", 0, fmt.Errorf("the diff's header is not --- %s / +++ %s", from, to)
	}
	var out []string
	next, changed := 0, 0 // next: index of src's first line not yet copied
	for i := 2; i < len(dl); {
		m := hunkRE.FindStringSubmatch(dl[i])
		if m == nil {
			return "", 0, fmt.Errorf("line %d: %q is not a hunk header", i+1, dl[i])
		}
		count := func(s string) int {
			if s == "" {
				return 1
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		start, oldN, newN := count(m[1])-1, count(m[2]), count(m[4])
		if start < next || start > len(lines) {
			return "", 0, fmt.Errorf("hunk %q out of order", dl[i])
		}
		out = append(out, lines[next:start]...)
		next = start
		gotOld, gotNew := 0, 0
		for i++; i < len(dl) && !strings.HasPrefix(dl[i], "@@"); i++ {
			l := dl[i]
			if l == "" {
				l = " " // an empty context line, trimmed
			}
			body := l[1:] + "\n"
			switch l[0] {
			case ' ', '-':
				if next >= len(lines) || lines[next] != body {
					return "", 0, fmt.Errorf("diff line %d %q: standalone/main.go line %d differs", i+1, l, next+1)
				}
				next++
				gotOld++
				if l[0] == ' ' {
					out = append(out, body)
					gotNew++
				} else {
					changed++
				}
			case '+':
				out = append(out, body)
				gotNew++
				changed++
			default:
				return "", 0, fmt.Errorf("diff line %d %q", i+1, l)
			}
		}
		if gotOld != oldN || gotNew != newN {
			return "", 0, fmt.Errorf("hunk %q has %d old and %d new lines", m[0], gotOld, gotNew)
		}
	}
	out = append(out, lines[next:]...)
	return strings.Join(out, ""), changed, nil
}

// politeDelay is the crawl's politeness delay: the shop is one host.
const politeDelay = 40 * time.Millisecond

// TestStandaloneAndDistributed crawls the test site's shop with the plain
// colly scraper, then with three slave processes of the distributed one
// and a master, and checks that both find the shop's products, the same
// set, and that the slaves fetched each page once (again only after a
// lost lease) and never two requests to the host closer than the
// politeness delay, across the three of them. The slaves run on
// least-privilege Redis users in a crawl of three shards; in the second
// case one of them is killed mid-crawl, and nothing is lost.
func TestStandaloneAndDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example programs")
	}
	bins := buildPrograms(t)
	for _, tt := range []struct {
		name string
		kill bool
	}{{"three slaves", false}, {"a slave killed mid-crawl", true}} {
		t.Run(tt.name, func(t *testing.T) {
			site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 5, Robots: true, Seed: 9, Dynamic: true,
				Latency: 30 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(site.Close)
			shop := site.Shop()
			var want []Product
			for _, p := range shop.Products {
				it := p.StaticItem()
				want = append(want, Product{URL: it.URL, Title: it.Title, SKU: it.SKU, Price: it.Price,
					Availability: it.Availability, Images: it.Images})
			}
			sortProducts(want)

			standalone := runStandalone(t, bins.standalone, shop.API[0])
			if d := cmp.Diff(want, standalone); d != "" {
				t.Errorf("products of the plain scraper (-shop +scraper):\n%s", d)
			}
			site.ResetHits()
			distributed, lost := runDistributed(t, bins.distributed, site, tt.kill)
			if d := cmp.Diff(standalone, distributed); d != "" {
				t.Errorf("products of the slaves (-plain scraper +slaves):\n%s", d)
			}
			checkHits(t, site, shop, lost)
		})
	}
}

type programs struct{ standalone, distributed string }

var buildOnce = sync.OnceValues(func() (programs, error) {
	dir, err := os.MkdirTemp("", "collyshop-")
	if err != nil {
		return programs{}, err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	p := programs{standalone: filepath.Join(dir, "collyshop-standalone"), distributed: filepath.Join(dir, "collyshop")}
	for bin, pkg := range map[string]string{p.standalone: "./standalone", p.distributed: "."} {
		if out, err := exec.Command(goBin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return programs{}, fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return p, nil
})

func buildPrograms(t *testing.T) programs {
	t.Helper()
	p, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runStandalone runs the plain scraper and returns the products it wrote.
func runStandalone(t *testing.T, bin, start string) []Product {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, start)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("standalone scraper: %v\n%s", err, stderr.String())
	}
	var ps []Product
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var p Product
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("standalone output %q: %v", sc.Text(), err)
		}
		ps = append(ps, p)
	}
	sortProducts(ps)
	return ps
}

// runDistributed crawls the shop with a master and three slave processes,
// each on its own least-privilege Redis user, in a crawl of three shards;
// with kill, the slave "victim" is killed while it holds a lease, after
// its first pages. It returns the products stored in MySQL and the lost
// tasks the master recorded.
func runDistributed(t *testing.T, bin string, site *testsite.Site, kill bool) ([]Product, []string) {
	t.Helper()
	shop := site.Shop()
	start, _ := url.Parse(shop.API[0])
	ids := []string{"shop-1", "shop-2", "victim"}
	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("collyshop")
	cfg.Crawl.Shards = 3
	cfg.Crawl.AllowHosts = []string{start.Hostname()}
	cfg.MySQL.DSN = storetest.DSN(t)
	srv := frontiertest.StartACLRedis(t, cfg.Crawl.Name, ids...)
	cfg.Redis.URL = srv.URL(frontier.RoleMaster, "")
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.Timeout = 5 * time.Second
	cfg.Politeness.Delay = politeDelay
	cfg.Lease.Duration = 2 * time.Second
	cfg.Lease.RetryBase = 100 * time.Millisecond
	cfg.Slave.Concurrency = 4
	cfg.Slave.HeartbeatInterval = 200 * time.Millisecond
	cfg.Slave.IdlePoll = 50 * time.Millisecond
	cfg.Master.DeadAfter = time.Second
	cfg.Master.RecoverInterval = 200 * time.Millisecond
	cfg.Master.Quiescence = 800 * time.Millisecond
	cfg.Dedup.ExpectedURLs = 1000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if res, err := masterd.Seed(ctx, &cfg, []string{shop.API[0]}); err != nil || res.Added != 1 {
		t.Fatalf("seed: %+v %v", res, err)
	}

	procs := map[string]*exec.Cmd{}
	exited := map[string]chan error{}
	if kill {
		// the victim first, the others once it has done a page: on a
		// loaded machine a slave that starts last may find the crawl of
		// this one host taken by the others before it is killed mid-way
		ids = []string{"victim", "shop-1", "shop-2"}
	}
	for _, id := range ids {
		if kill && id != "victim" {
			waitWorking(t, srv.Root, cfg.Crawl.Name, "victim")
		}
		cmd := exec.Command(bin, "--config", "", "--id", id, shop.API[0])
		cmd.Env = append(os.Environ(),
			"CRAWLER_REDIS_URL="+srv.URL(frontier.RoleSlave, id),
			"CRAWLER_MYSQL_DSN="+cfg.MySQL.DSN,
			"CRAWLER_CRAWL_NAME="+cfg.Crawl.Name,
			"CRAWLER_CRAWL_SHARDS=3",
			"CRAWLER_CRAWL_ALLOW_HOSTS="+start.Hostname(),
			"CRAWLER_FETCH_ALLOW_PRIVATE_NETWORKS=true",
			"CRAWLER_FETCH_TIMEOUT=5s",
			"CRAWLER_POLITENESS_DELAY="+politeDelay.String(),
			"CRAWLER_LEASE_DURATION="+cfg.Lease.Duration.String(),
			"CRAWLER_LEASE_RETRY_BASE="+cfg.Lease.RetryBase.String(),
			"CRAWLER_SLAVE_CONCURRENCY=4",
			"CRAWLER_SLAVE_HEARTBEAT_INTERVAL=200ms",
			"CRAWLER_SLAVE_IDLE_POLL=50ms",
			"CRAWLER_DEDUP_EXPECTED_URLS=1000",
			"CRAWLER_LOG_LEVEL=warn",
		)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		procs[id], exited[id] = cmd, done
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-done
			done <- nil
		})
	}

	masterDone := make(chan error, 1)
	go func() {
		masterDone <- masterd.New(&cfg, masterd.Options{ExitWhenDone: true, Logger: testLogger()}).Run(ctx)
	}()
	if kill {
		killWhileLeasing(t, srv.Root, cfg.Crawl.Name, procs["victim"])
	}
	if err := <-masterDone; err != nil {
		t.Fatalf("master: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("crawl did not finish in 2 minutes")
	}
	// the others leave gracefully, with exit status 0
	for _, id := range ids {
		if kill && id == "victim" {
			continue
		}
		procs[id].Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited[id]:
			exited[id] <- err
			if err != nil {
				t.Errorf("slave %s: %v", id, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("slave %s did not leave in 30s after SIGTERM", id)
		}
	}

	db, err := store.Open(context.Background(), cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ps []Product
	bySlave := map[string]int{}
	err = db.ExportItems(context.Background(), store.ItemFilter{Crawl: cfg.Crawl.Name, Item: "product"}, func(r store.ItemRow) error {
		var p Product
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return fmt.Errorf("item %s: %w", r.URL, err)
		}
		if r.URL != p.URL {
			return fmt.Errorf("item %s holds %s", r.URL, p.URL)
		}
		bySlave[r.Slave]++
		ps = append(ps, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sortProducts(ps)
	if len(bySlave) < 2 {
		t.Errorf("items by slave %v: the slaves did not share the crawl", bySlave)
	}
	st, err := masterd.Status(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished || st.Failed != 0 {
		t.Errorf("status %+v, want finished without failures", st.Stats)
	}
	var lost []string
	tasks, err := db.LostTasks(context.Background(), cfg.Crawl.Name, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range tasks {
		if l.Slave != "victim" {
			t.Errorf("lost task of %s: %+v", l.Slave, l)
		}
		lost = append(lost, l.URL)
	}
	if kill && len(lost) == 0 {
		t.Error("no lost task recorded for the killed slave")
	}
	for _, d := range srv.Denials(t) {
		t.Errorf("ACL refusal: %s", d)
	}
	return ps, lost
}

// working reports whether slave id's heartbeat says it has done a page.
func working(rdb *redis.Client, crawl, id string) bool {
	for shard := range 3 {
		k := frontier.ShardKeys(crawl, shard)
		if info, _ := rdb.Get(context.Background(), k.SlaveBeat(id)).Result(); strings.Contains(info, `"pages"`) && !strings.Contains(info, `"pages":0,`) {
			return true
		}
	}
	return false
}

// waitWorking waits (at most 60 s) until slave id has done a page.
func waitWorking(t *testing.T, rdb *redis.Client, crawl, id string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if working(rdb, crawl, id) {
			return
		}
	}
	t.Fatalf("slave %s did no page in 60 s", id)
}

// killWhileLeasing kills the slave "victim" once it has done a page and
// holds a lease.
func killWhileLeasing(t *testing.T, rdb *redis.Client, crawl string, victim *exec.Cmd) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if !working(rdb, crawl, "victim") {
			continue
		}
		for shard := range 3 {
			k := frontier.ShardKeys(crawl, shard)
			if n, _ := rdb.ZCard(ctx, k.SlaveLease("victim")).Result(); n > 0 {
				victim.Process.Signal(syscall.SIGKILL)
				return
			}
		}
	}
	t.Fatal("the victim never held a lease after its first page")
}

// checkHits checks what the site saw of the distributed crawl: the shop's
// API pages and product pages each fetched once (again only after a lost
// lease), robots.txt once, nothing else, and no two requests closer than
// the politeness delay.
func checkHits(t *testing.T, site *testsite.Site, shop testsite.ShopInfo, lost []string) {
	t.Helper()
	want := map[string]int{}
	for _, u := range shop.API {
		want[u] = 1
	}
	for _, p := range shop.Products {
		want[p.URL] = 1
	}
	lostBy := map[string]int{}
	for _, u := range lost {
		lostBy[u]++
	}
	hits := site.Hits()
	got := map[string]int{}
	robots := 0
	var at []time.Time
	for _, h := range hits {
		at = append(at, h.At.Round(0))
		if h.Path == "/robots.txt" {
			robots++
			continue
		}
		got[h.URL()]++
	}
	for u, n := range got {
		switch {
		case want[u] == 0:
			t.Errorf("unexpected request, %d times: %s", n, u)
		case n > want[u]+lostBy[u]:
			t.Errorf("%s fetched %d times (%d lost leases)", u, n, lostBy[u])
		}
	}
	for u := range want {
		if got[u] == 0 {
			t.Errorf("%s never fetched", u)
		}
	}
	if robots < 1 || robots > 1+len(lost) {
		t.Errorf("robots.txt fetched %d times", robots)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < politeDelay {
			t.Errorf("two requests to the shop %v apart, the delay is %v", gap, politeDelay)
			break
		}
	}
}

func sortProducts(ps []Product) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].URL < ps[j].URL })
}

// testLogger logs the master at info with -v, else not at all.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}
