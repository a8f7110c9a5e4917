package benchsuite

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/collyslave"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// TestRunSmoke runs a small benchmark: 2 hosts × 50 pages, one slave in
// this process (or a subprocess of REDCRAWL_BENCH_SLAVE when set), and
// checks that the report is complete and its files are written.
func TestRunSmoke(t *testing.T) {
	cfg := config.Default()
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	dir := t.TempDir()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Hosts: 2, PagesPerHost: 50, PageBytes: 2000, Slaves: []int{1},
		Concurrency: 8, OutDir: dir, Config: &cfg, SlaveBinary: os.Getenv("REDCRAWL_BENCH_SLAVE"), InProcess: inProcess,
		CollySlaveBinary: os.Getenv("REDCRAWL_BENCH_COLLY_SLAVE"), CollySlaveInProcess: inProcessColly,
		Sizes: []Size{{Label: "this test", Path: os.Args[0]}}, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if rep.ExpectedURLs != 100 {
		t.Errorf("expected URLs %d, want 100", rep.ExpectedURLs)
	}
	if rep.Colly == nil || rep.Colly.Pages == 0 || rep.Colly.PagesPerSec <= 0 || len(rep.Colly.Series) == 0 {
		t.Errorf("colly result incomplete: %+v", rep.Colly)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(rep.Runs))
	}
	r := rep.Runs[0]
	if r.Pages != 100 || r.Missing != 0 || r.Extra != 0 {
		t.Errorf("crawl: %d pages, %d missing, %d extra; want 100, 0, 0", r.Pages, r.Missing, r.Extra)
	}
	for name, v := range map[string]float64{"seconds": r.Seconds, "pages/s": r.PagesPerSec, "vs colly": r.VsColly,
		"process cpu": r.ProcessCPUPer1k, "round trips": r.RoundTripsPerPage, "scripts": r.ScriptsPerPage,
		"redis calls": r.RedisCallsPerPage, "seen bytes": r.SeenBytesPerURL, "mysql rows/s": r.MySQLRowsPerSec} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if len(mysqlPids()) > 0 && (!(r.MySQLCPUPer1k >= 0) || !(r.AllInPer1k > r.RedisCPUPer1k)) {
		t.Errorf("all-in CPU not measured: MySQL %v, all-in %v", r.MySQLCPUPer1k, r.AllInPer1k)
	}
	if r.MySQLRows < 100 {
		t.Errorf("mysql rows %d, want >= 100", r.MySQLRows)
	}
	if len(r.Series) == 0 {
		t.Error("no samples")
	}
	if r.Subprocess && (!(r.SlaveCPUPer1k > 0) || r.SlavePeakRSS <= 0) {
		t.Errorf("subprocess slave usage not measured: cpu %v rss %d", r.SlaveCPUPer1k, r.SlavePeakRSS)
	}
	md, err := os.ReadFile(rep.MarkdownPath)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil || !bytes.Equal(md, latest) {
		t.Errorf("latest.md differs from %s (%v)", rep.MarkdownPath, err)
	}
	if len(rep.CollyRuns) != 1 {
		t.Fatalf("%d colly-callback runs, want 1", len(rep.CollyRuns))
	}
	if c := rep.CollyRuns[0]; !c.Colly || c.Pages != 100 || c.Missing != 0 || c.Extra != 0 || !(c.PagesPerSec > 0) {
		t.Errorf("colly-callback crawl: %d pages, %d missing, %d extra, %v pages/s; want 100, 0, 0", c.Pages, c.Missing, c.Extra, c.PagesPerSec)
	}
	if vs, ok := rep.CollyVsStock[1]; !ok || !(vs.PagesPerSec > 0) {
		t.Errorf("colly-callback vs stock: %+v", rep.CollyVsStock)
	}
	for _, want := range []string{"| metric | colly | 1 slave | 1 colly-callback slave |", "| pages/s |", "Redis bytes / seen URL",
		"2-slave / 1-slave throughput: n/a", "runtime.NumCPU", "| all-in CPU ms / page (slaves, this process, Redis, MySQL) |", "- 1 colly-callback slave: ", "× the stock slave's pages/s",
		"Binary sizes:\n\n- this test: "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	svg, err := os.ReadFile(rep.SVGPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(svg), "<polyline") < 1 || !strings.Contains(string(svg), "pages/s") {
		t.Errorf("chart lacks its lines or labels:\n%s", svg)
	}
	if !strings.HasPrefix(filepath.Base(rep.MarkdownPath), "bench-") {
		t.Errorf("report name %s", rep.MarkdownPath)
	}
}

// TestRunSmokeAPI runs the small benchmark with --api: the slave count
// crawls directly and then through the work API, and the report compares
// the two.
func TestRunSmokeAPI(t *testing.T) {
	cfg := config.Default()
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	dir := t.TempDir()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Hosts: 2, PagesPerHost: 50, PageBytes: 2000, Slaves: []int{1}, API: true,
		Concurrency: 8, OutDir: dir, Config: &cfg, SlaveBinary: os.Getenv("REDCRAWL_BENCH_SLAVE"), InProcess: inProcess, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	if len(rep.APIRuns) != 1 || len(rep.APIDirectRuns) != 1 || len(rep.APIVsDirect[1]) != 1 {
		t.Fatalf("API runs %d, direct %d, ratios %v; want one each", len(rep.APIRuns), len(rep.APIDirectRuns), rep.APIVsDirect)
	}
	r := rep.APIRuns[0]
	if !r.API || r.Pages != 100 || r.Missing != 0 || r.Extra != 0 {
		t.Errorf("API crawl: api %v, %d pages, %d missing, %d extra; want true, 100, 0, 0", r.API, r.Pages, r.Missing, r.Extra)
	}
	// a page costs a claim and an ack at least, shared by the pages of a
	// batch: somewhere between a tenth of a request and a hundred
	if !(r.APIRequestsPerPage > 0.1 && r.APIRequestsPerPage < 100) || !(r.APIClaimMs > 0) {
		t.Errorf("API requests a page %v, claim ms %v", r.APIRequestsPerPage, r.APIClaimMs)
	}
	if d := rep.APIDirectRuns[0]; d.API || !math.IsNaN(d.APIRequestsPerPage) {
		t.Errorf("the direct run: api %v, requests a page %v", d.API, d.APIRequestsPerPage)
	}
	md, err := os.ReadFile(rep.MarkdownPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Slaves of the work API", "| work API requests / page |", "- 1 slave(s): "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestRunOrder(t *testing.T) {
	for _, c := range []struct {
		n, round int
		want     []int
	}{{3, 0, []int{0, 1, 2}}, {3, 1, []int{2, 1, 0}}, {3, 2, []int{0, 1, 2}}, {1, 1, []int{0}}, {0, 1, []int{}}} {
		if d := cmp.Diff(c.want, runOrder(c.n, c.round)); d != "" {
			t.Errorf("runOrder(%d, %d) (-want +got):\n%s", c.n, c.round, d)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 1}, {0.3, 0.5}, {1, 1}, {1.1, 2}, {37, 50}, {1234, 2000}, {9000, 10000}} {
		if got := niceCeil(c.in); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestFullBench runs the default benchmark when REDCRAWL_BENCH_FULL=1
// (minutes): slaves from REDCRAWL_BENCH_SLAVE (a built bin/slave; unset =
// in-process), files into REDCRAWL_BENCH_OUT (default results/ here),
// MySQL in a temporary database. REDCRAWL_BENCH_HOSTS and
// REDCRAWL_BENCH_PAGES shrink the site.
//
//	REDCRAWL_BENCH_FULL=1 go test -run FullBench -timeout 60m -v ./internal/harness/benchsuite/
func TestFullBench(t *testing.T) {
	if os.Getenv("REDCRAWL_BENCH_FULL") != "1" {
		t.Skip("set REDCRAWL_BENCH_FULL=1 to run the full benchmark")
	}
	cfg := config.Default()
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	rep, err := Run(context.Background(), Options{Hosts: atoi("REDCRAWL_BENCH_HOSTS"),
		PagesPerHost: atoi("REDCRAWL_BENCH_PAGES"), OutDir: os.Getenv("REDCRAWL_BENCH_OUT"), Config: &cfg,
		SlaveBinary: os.Getenv("REDCRAWL_BENCH_SLAVE"), InProcess: inProcess, Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Markdown())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestRSSEnds(t *testing.T) {
	series := []Point{{Done: 0, SlaveRSS: 100}, {Done: 5, SlaveRSS: 10}, {Done: 10, SlaveRSS: 20},
		{Done: 50, SlaveRSS: 99}, {Done: 90, SlaveRSS: 30}, {Done: 95, SlaveRSS: 50}, {Done: 100, SlaveRSS: 100}}
	if f, l := rssEnds(series, 100); f != 15 || l != 40 {
		t.Errorf("rssEnds = %d, %d; want 15, 40", f, l)
	}
	if f, l := rssEnds(nil, 100); f != -1 || l != -1 {
		t.Errorf("rssEnds(nil) = %d, %d", f, l)
	}
}

// TestRunRounds runs a tiny benchmark twice over with 1 and 2 slaves and
// checks that every round's ratios are kept, the 2/1 ratio is their
// median, and the report lists the rounds.
func TestRunRounds(t *testing.T) {
	cfg := config.Default()
	cfg.MySQL.DSN = storetest.DSN(t)
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Hosts: 2, PagesPerHost: 30, PageBytes: 1000, Slaves: []int{1, 2}, Rounds: 3,
		Concurrency: 4, OutDir: t.TempDir(), Config: &cfg, InProcess: inProcess, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if len(rep.Runs) != 2 || len(rep.VsColly[1]) != 3 || len(rep.VsColly[2]) != 3 || len(rep.TwoToOneRounds) != 3 {
		t.Fatalf("runs %d, ratios %v, 2/1 rounds %v; want 2 runs and 3 rounds of each", len(rep.Runs), rep.VsColly, rep.TwoToOneRounds)
	}
	if want := median(rep.TwoToOneRounds); rep.TwoToOne != want {
		t.Errorf("2/1 = %v, want the median %v of %v", rep.TwoToOne, want, rep.TwoToOneRounds)
	}
	for k, n := range []int{1, 2} {
		if got, want := rep.Runs[k].VsColly, median(rep.VsColly[n]); got != want {
			t.Errorf("%d slaves: shown ratio %v, want the median round's %v of %v", n, got, want, rep.VsColly[n])
		}
	}
	// the rounds alternate the order of the slave counts
	var order []string
	for _, line := range strings.Split(out.String(), "\n") {
		if n, _, ok := strings.Cut(strings.TrimPrefix(line, "bench: "), " slave(s): "); ok && !strings.Contains(n, " ") {
			order = append(order, n)
		}
	}
	if d := cmp.Diff([]string{"1", "2", "2", "1", "1", "2"}, order); d != "" {
		t.Errorf("order of the slave counts over the rounds (-want +got):\n%s", d)
	}
	md, err := os.ReadFile(rep.MarkdownPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte("3 rounds")) || !bytes.Contains(md, []byte("- 2 / 1 slaves:")) {
		t.Errorf("report lacks the rounds:\n%s", md)
	}
}

func TestRamp(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	// n fetches spread evenly over the bin starting at from ms
	bin := func(from, n int) []int {
		var out []int
		for i := range n {
			out = append(out, from+i*100/n)
		}
		return out
	}
	cat := func(bs ...[]int) []int { return slices.Concat(bs...) }
	tests := []struct {
		name  string
		times []time.Duration
		want  float64
	}{
		{"steady from the start", ms(cat(bin(0, 10), bin(100, 10), bin(200, 10), bin(300, 10), bin(400, 3))...), 0.1},
		{"slow first 200 ms", ms(cat(bin(0, 2), bin(100, 5), bin(200, 10), bin(300, 10), bin(400, 10), bin(500, 1))...), 0.3},
		{"offset start", ms(cat(bin(1000, 2), bin(1100, 10), bin(1200, 10), bin(1300, 10), bin(1400, 10))...), 0.2},
		{"too short", ms(1, 2, 3), math.NaN()},
		{"empty", nil, math.NaN()},
	}
	for _, tc := range tests {
		got := ramp(tc.times)
		if !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%s: ramp = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPages99(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 100: 99, 3000: 2970, 20000: 19800, 101: 100} {
		if got := pages99(n); got != want {
			t.Errorf("pages99(%d) = %d, want %d", n, got, want)
		}
	}
}

// inProcessColly runs the tests' colly-callback slaves in this process:
// collybench's collector.
func inProcessColly(cfg *config.Config, id string, rdb *redis.Client, log *slog.Logger) (func(context.Context) error, error) {
	c := colly.NewCollector(colly.Async(true))
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	s, err := collyslave.New(cfg, c, slaved.Options{ID: id, Logger: log, Redis: rdb})
	if err != nil {
		return nil, err
	}
	return s.Run, nil
}

// inProcess runs the tests' slaves in this process.
func inProcess(cfg *config.Config, id string, rdb *redis.Client, log *slog.Logger) (func(context.Context) error, error) {
	s, err := slaved.New(cfg, slaved.Options{ID: id, Logger: log, Redis: rdb})
	if err != nil {
		return nil, err
	}
	return s.Run, nil
}
