package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store/storetest"
)

// binaries are bin/slave and bin/master built once each for the package's
// tests (buildSlave, buildMaster), in one directory TestMain removes: the
// master finds the slave beside it.
var binaries struct {
	mu    sync.Mutex
	dir   string
	built map[string]error // by name
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
	}
	os.Exit(code)
}

// buildSlave builds bin/slave once and returns its path.
func buildSlave(t *testing.T) string { return buildBinary(t, "slave") }

// buildMaster builds bin/master once, beside bin/slave, and returns its
// path.
func buildMaster(t *testing.T) string {
	buildSlave(t)
	return buildBinary(t, "master")
}

// buildBinary builds the program of the module's package name once and
// returns its path.
func buildBinary(t *testing.T, name string) string {
	t.Helper()
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if binaries.dir == "" {
		dir, err := os.MkdirTemp("", "redcrawl-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binaries.dir, binaries.built = dir, map[string]error{}
	}
	path := filepath.Join(binaries.dir, name)
	err, done := binaries.built[name]
	if !done {
		if out, berr := exec.Command("go", "build", "-o", path, "github.com/redcrawl/redcrawl/"+name).CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build %s: %v\n%s", name, berr, out)
		}
		binaries.built[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// crawlRules is the test's rule file: an item per ordinary page.
const crawlRules = `name: pages
hosts: [HOST]
items:
  - name: page
    match: ['/page/\d+$']
    fields:
      - {name: title, css: 'h1#top', required: true}
      - {name: links, css: 'ul a', attr: href, list: true}
`

// TestCrawlCommand runs master crawl against a loopback site with a rule
// file and two slave processes: the items land in the -o file, the stats
// are printed, and the exit status says pages were fetched. The same
// command again fetches nothing (every URL was seen), exits 1 with the
// reason, and still writes the crawl's items, as flat CSV rows.
func TestCrawlCommand(t *testing.T) {
	bin := buildSlave(t)
	dir := t.TempDir()
	site, rulesDir := startCrawlSite(t, dir, testsite.Options{Hosts: 1, PagesPerHost: 20, LinksPerPage: 4, Robots: true, Seed: 4})
	env := writeCrawlConfig(t, dir, rulesDir, "")
	crawl, cfgPath := env.crawl, env.cfgPath
	itemsPath := filepath.Join(dir, "items.jsonl")
	var stdout, stderr bytes.Buffer
	code := run([]string{"crawl", "--config", cfgPath, "--slaves", "2", "--slave-binary", bin, site.Seeds()[0], "-o", itemsPath},
		nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("master crawl: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	wantItems := 19 // /page/1 to /page/19; the root is no item
	f, err := os.Open(itemsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	titles := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Crawl, Rule, Item, URL string
			Data                   struct{ Title string }
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("items line %q: %v", sc.Text(), err)
		}
		if rec.Crawl != crawl || rec.Rule != "pages" || rec.Item != "page" || !strings.Contains(rec.URL, "/page/") {
			t.Errorf("item %+v", rec)
		}
		titles[rec.Data.Title] = true
	}
	if len(titles) != wantItems || !titles["Host 0 page 7"] {
		t.Errorf("%d distinct item titles, want %d with \"Host 0 page 7\": %v", len(titles), wantItems, titles)
	}
	out := strings.Join(strings.Fields(stdout.String()), " ") // the table's padding aside
	for _, want := range []string{
		"crawl " + crawl + ": 1 seeds added",
		"pace: at most 1 request at a time to a host, 20ms apart plus 25% on average: about 40.0 pages/s a host. " +
			"On a site you own, lower politeness.delay and raise politeness.host_concurrency to go faster",
		"crawl " + crawl + " finished",
		"pages 20 (2xx 20,",
		fmt.Sprintf("items %d", wantItems),
		"top hosts by failures",
		"this run: 20 pages fetched",
		fmt.Sprintf("%d items written to %s", wantItems, itemsPath),
		"progress: done ", // not a terminal: plain lines
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "\r") {
		t.Errorf("a progress bar redrawn in place on a non-terminal:\n%q", stdout.String())
	}

	// again: nothing new to fetch
	csvPath := filepath.Join(dir, "items.csv")
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"crawl", "--config", cfgPath, "--slaves", "1", "--slave-binary", bin, "-o", csvPath,
		"--item-fields", "url,title", site.Seeds()[0]}, nil, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "no page fetched: every start URL was already seen") {
		t.Errorf("crawl again: exit %d, want 1 saying the URLs were seen\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) != wantItems+1 || strings.Join(rows[0], ",") != "url,title" {
		t.Fatalf("csv: %v, %d rows, header %q:\n%s", err, len(rows), rows[0], b)
	}
	for _, r := range rows[1:] {
		if !strings.HasPrefix(r[1], "Host 0 page ") || !strings.HasSuffix(r[0], strings.TrimPrefix(r[1], "Host 0 page ")) {
			t.Errorf("csv row %q", r)
		}
	}

	// master export writes what crawl -o writes: the same flat rows, and
	// a JSON array continued by --append
	for _, tc := range []struct {
		args []string
		want int // items in the file
	}{
		{[]string{"-o", csvPath, "--item-fields", "url,title"}, wantItems},
		{[]string{"-o", filepath.Join(dir, "items.json")}, wantItems},
		{[]string{"-o", filepath.Join(dir, "items.json"), "--append", "--rule", "pages"}, 2 * wantItems},
	} {
		stderr.Reset()
		before, _ := os.ReadFile(csvPath)
		if code := run(append([]string{"export", "--config", cfgPath}, tc.args...), nil, &stdout, &stderr); code != 0 {
			t.Fatalf("master export %q: exit %d: %s", tc.args, code, stderr.String())
		}
		b, err := os.ReadFile(tc.args[1])
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(tc.args[1], ".csv") {
			if !bytes.Equal(b, before) {
				t.Errorf("master export -o %s --item-fields url,title differs from master crawl's:\n%s\n%s", csvPath, b, before)
			}
			continue
		}
		var arr []map[string]any
		if err := json.Unmarshal(b, &arr); err != nil || len(arr) != tc.want || arr[0]["data"] == nil {
			t.Errorf("master export %q: %v, %d items, want %d in their envelope", tc.args, err, len(arr), tc.want)
		}
	}
	for _, args := range [][]string{{"-o", filepath.Join(dir, "items.txt")}, {"--append"}, {"--format", "xml"}} {
		stderr.Reset()
		if code := run(append([]string{"export", "--config", cfgPath}, args...), nil, &stdout, &stderr); code != 2 {
			t.Errorf("master export %q: exit %d, want 2: %s", args, code, stderr.String())
		}
	}
}

// crawlEnv is a crawl of a test's own: its name, its config file, its
// MySQL database and a client of the test Redis.
type crawlEnv struct {
	crawl, cfgPath string
	db             *sql.DB
	rdb            *redis.Client
}

// writeCrawlConfig writes the config of a crawl of its own against the
// test Redis and a database of its own on the test MariaDB (rules from
// rulesDir, short delays; extra is YAML appended to it) to dir, and
// deletes the crawl's keys when the test ends.
func writeCrawlConfig(t *testing.T, dir, rulesDir, extra string) crawlEnv {
	t.Helper()
	var crawl, cfgPath string
	redisURL := "redis://127.0.0.1:6379/0"
	if v := os.Getenv("REDCRAWL_TEST_REDIS"); v != "" {
		redisURL = v
	}
	crawl = testutil.CrawlName("crawlcmd")
	cfgPath = filepath.Join(dir, "config.yaml")
	dsn := storetest.DSN(t)
	yaml := fmt.Sprintf(`redis:
  url: %s
mysql:
  dsn: %s
crawl:
  name: %s
rules:
  dir: %s
  poll: 500ms
fetch:
  allow_private_networks: true
politeness:
  delay: 20ms
lease:
  retry_base: 200ms
slave:
  heartbeat_interval: 300ms
  shutdown_timeout: 5s
  idle_poll: 50ms
master:
  quiescence: 500ms
dedup:
  expected_urls: 10000
admin:
  listen: ""
`, redisURL, dsn, crawl, rulesDir) + extra
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	ropt, _ := redis.ParseURL(redisURL)
	rdb := redis.NewClient(ropt)
	t.Cleanup(func() {
		testutil.DeleteCrawl(context.Background(), rdb, crawl)
		rdb.Close()
		db.Close()
	})
	return crawlEnv{crawl: crawl, cfgPath: cfgPath, db: db, rdb: rdb}
}

// startCrawlSite starts a test site of hosts × pages and writes the rule
// file of crawlRules for its hosts into dir/rules, which it returns.
func startCrawlSite(t *testing.T, dir string, opt testsite.Options) (*testsite.Site, string) {
	t.Helper()
	site, err := testsite.Start(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	rulesDir := filepath.Join(dir, "rules")
	if err := os.Mkdir(rulesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, s := range site.HostURLs() {
		u, _ := url.Parse(s)
		hosts = append(hosts, u.Hostname())
	}
	rule := strings.ReplaceAll(crawlRules, "[HOST]", "["+strings.Join(hosts, ", ")+"]")
	if err := os.WriteFile(filepath.Join(rulesDir, "pages.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	return site, rulesDir
}

// TestCrawlLimits runs master crawl with limits on a site of 400 pages
// (some of them refused by robots.txt, which count no page), the crawl
// going on each time: --max-pages 100 stores 100 pages, or less by at
// most the pages of one claim batch, and finishes by the limit, saying
// so in its stats and in master status, with work left queued; --max-pages
// 150 goes on to 150; --max-duration 1s ends it after a second, and
// --max-items N once its pages gave N items, passed by at most the items
// of a claim batch.
func TestCrawlLimits(t *testing.T) {
	bin := buildSlave(t)
	dir := t.TempDir()
	site, rulesDir := startCrawlSite(t, dir, testsite.Options{Hosts: 1, PagesPerHost: 400, LinksPerPage: 4, Robots: true, Seed: 9})
	env := writeCrawlConfig(t, dir, rulesDir, "")
	const batch = 8 // claimBatch of the default slave.concurrency
	count := func(table string) int64 {
		t.Helper()
		var n int64
		if err := env.db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE crawl = ?", env.crawl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	between := func(what string, n, lo, hi int64) {
		t.Helper()
		t.Logf("%d %s stored", n, what)
		if n < lo || n > hi {
			t.Errorf("%d %s stored, want %d to %d", n, what, lo, hi)
		}
	}
	var items int64 // the max_items of the last run
	for _, tc := range []struct {
		args  func() []string
		ended string // what the stats say ended the crawl
		check func()
	}{
		{func() []string { return []string{"--max-pages", "100"} }, "max_pages 100",
			func() { between("pages", count("pages"), 100-batch, 100) }},
		{func() []string { return []string{"--max-pages", "150"} }, "max_pages 150",
			func() { between("pages", count("pages"), 150-batch, 150) }},
		{func() []string { return []string{"--max-pages", "0", "--max-duration", "1s"} }, "max_duration",
			func() {
				if n := count("pages"); n < 150 || n >= 400 {
					t.Errorf("%d pages after --max-duration 1s, want more than before and not all", n)
				}
			}},
		{func() []string {
			items = count("items") + 20
			return []string{"--max-items", strconv.FormatInt(items, 10)}
		}, "max_items", func() { between("items", count("items"), items, items+batch) }},
	} {
		args := tc.args()
		var stdout, stderr bytes.Buffer
		code := run(append(append([]string{"crawl", "--config", env.cfgPath, "--slaves", "2", "--slave-binary", bin}, args...),
			site.Seeds()...), nil, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("master crawl %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout.String(), stderr.String())
		}
		tc.check()
		if want := "finished by its limit " + tc.ended; !strings.Contains(stdout.String(), want) {
			t.Errorf("%q: the stats do not say %q:\n%s", args, want, stdout.String())
		}
		stdout.Reset()
		if code := run([]string{"status", "--config", env.cfgPath}, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("master status: exit %d: %s", code, stderr.String())
		}
		status := strings.Join(strings.Fields(stdout.String()), " ")
		for _, want := range []string{"finished true", "ended the crawl: " + tc.ended} {
			if !strings.Contains(status, want) {
				t.Errorf("%q: master status lacks %q:\n%s", args, want, stdout.String())
			}
		}
		if strings.Contains(status, "queued 0 ") {
			t.Errorf("%q: nothing left queued:\n%s", args, stdout.String())
		}
	}
}

// TestCrawlUsage: bad usage of master crawl exits 2 before anything runs.
func TestCrawlUsage(t *testing.T) {
	for _, args := range [][]string{
		{"crawl"},
		{"crawl", "-o", "items.txt", "http://a.test/"},
		{"crawl", "--item-fields", "a", "http://a.test/"},
		{"crawl", "--slaves", "-1", "http://a.test/"},
		{"crawl", "--slaves", "0", "http://a.test/"},
		{"crawl", "--slaves", "65", "http://a.test/"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "master crawl: ") {
			t.Errorf("master %q: exit %d, stderr %q; want 2 and why", args, code, errOut.String())
		}
	}
}
