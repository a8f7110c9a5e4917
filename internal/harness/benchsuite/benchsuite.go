// Package benchsuite is the crawl benchmark of `make bench`: it serves the
// synthetic site of internal/harness/testsite on loopback addresses, crawls
// it with the real master and 1, 2, 4… slaves against the configured Redis
// and MySQL, crawls it again with a plain colly crawler for reference, and
// writes a Markdown report and an SVG chart of pages/s over time.
//
// What is measured, and how, is written in the report's notes (notes in
// report.go).
package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/selfcert"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/shared/secret"
)

// Defaults of Options.
const (
	DefaultHosts           = 20
	DefaultPagesPerHost    = 1000
	DefaultPageBytes       = 15_000
	DefaultLinksPerPage    = 8
	DefaultConcurrency     = 64
	DefaultHostConcurrency = 4
	DefaultOutDir          = "results"
)

// DefaultSlaves are the slave counts run by default.
var DefaultSlaves = []int{1, 2, 4}

// Measurement constants.
const (
	// SampleEvery is the period of the pages-done samples (the chart).
	SampleEvery = 500 * time.Millisecond
	// RedisSampleEvery is the period of the INFO samples (Redis CPU share).
	RedisSampleEvery = time.Second
	// ChartWindow is the number of samples a chart point's rate spans.
	ChartWindow = 2
	// MaxSeenSample is the number of seen-URL buckets measured with
	// MEMORY USAGE; the total is scaled to all buckets.
	MaxSeenSample = 256
	// MaxQueueProbes bounds the measurements of the queue lists per crawl;
	// a new one is taken when the queue has grown by QueueProbeGrowth
	// since the last.
	MaxQueueProbes   = 24
	QueueProbeGrowth = 1.2
	// RunTimeout bounds each crawl (redcrawl or colly).
	RunTimeout = 30 * time.Minute
	// Quiescence is the master's finish window in the benchmark; it is
	// taken off the measured time.
	Quiescence = 500 * time.Millisecond
	// SlaveStopTimeout bounds a subprocess slave's graceful exit before
	// it is killed.
	SlaveStopTimeout = 20 * time.Second
	// SiteSeed selects the site's link graph.
	SiteSeed = 11
	// maxSamples bounds a sample series.
	maxSamples = int(RunTimeout/SampleEvery) + 16
)

// Options size and tune the benchmark. Zero fields take the defaults.
type Options struct {
	Hosts        int // site hosts, default 20
	PagesPerHost int // pages per host, default 1000
	PageBytes    int // approximate page size, default 15 KB
	LinksPerPage int // default 8
	// Latency is how long the site waits before answering each request
	// (a real server's time to first byte); 0 = at once.
	Latency time.Duration
	// APILatency is the round trip put between the work API's slaves and
	// their master (a tcpproxy), as if the slaves ran at a distance;
	// 0 = none (loopback).
	APILatency time.Duration
	// FailingHosts is how many of the site's hosts have one URL that
	// always answers 503 with Retry-After: 2 (testsite
	// Options.FailingHosts), linked from their root; 0 = none. It is not
	// an expected page: time to 99% measures the rest of those hosts.
	FailingHosts int
	// Slaves are the slave counts crawled in turn; default 1, 2, 4.
	Slaves []int
	// Concurrency is the fetches in flight per slave (and colly's total);
	// default 64.
	Concurrency int
	// HostConcurrency is the requests in flight per host, for both
	// crawlers; default 4.
	HostConcurrency int
	// OutDir receives bench-<stamp>.md, bench-<stamp>.svg and latest.md;
	// default "results".
	OutDir string
	// Config is the base config (redis, mysql, fetch…); nil = the
	// defaults. The suite sets the crawl name, scope, politeness (delay
	// 0, no jitter, HostConcurrency, robots off), private networks on,
	// content dedup on, rendering, rules and WARC off.
	Config *config.Config
	// API crawls each slave count a second time in each round, right
	// after its direct crawl, with slaves of the master's work API (TLS, a
	// token each, no Redis or MySQL address): the report compares them.
	API bool
	// SlaveBinary is a built bin/slave run as each slave's process; "" =
	// slaves run in this process, made by InProcess.
	SlaveBinary string
	// InProcess makes a slave that runs in this process on the Redis
	// client rdb until the context of run ends (the tests: slaved.New and
	// Run). bin/master gives a SlaveBinary instead, so that it does not
	// link the slave.
	InProcess func(cfg *config.Config, id string, rdb *redis.Client, log *slog.Logger) (run func(context.Context) error, err error)
	// CollySlaveBinary is a program that runs a colly collector as a
	// slave through slave/collyslave, started as bin/slave is ("run
	// --config FILE --id ID"): the benchmark's own,
	// internal/harness/benchsuite/collybench, follows every link as the
	// colly crawl does. Its crawls of CollySlaves slaves are reported
	// beside the stock slave's. "" = none, unless CollySlaveInProcess.
	CollySlaveBinary string
	// CollySlaveInProcess makes such a slave in this process (the tests),
	// as InProcess does a stock one.
	CollySlaveInProcess func(cfg *config.Config, id string, rdb *redis.Client, log *slog.Logger) (run func(context.Context) error, err error)
	// CollySlaves are the slave counts of the colly-callback crawls;
	// default 1.
	CollySlaves []int
	// Sizes are files whose size the report lists (e.g. the arm64 builds
	// of the slave and of a colly slave).
	Sizes []Size
	// Rounds repeats the whole sequence (colly, then each slave count) so
	// that each ratio is taken within a round, back to back, and the
	// report shows the median round of each; default 1. Odd rounds run the
	// slave counts in reverse order (runOrder).
	Rounds int
	Logger *slog.Logger // the master's and in-process slaves' logs; default discard
	Out    io.Writer    // progress lines; default discard
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Hosts, DefaultHosts)
	def(&o.PagesPerHost, DefaultPagesPerHost)
	def(&o.PageBytes, DefaultPageBytes)
	def(&o.LinksPerPage, DefaultLinksPerPage)
	def(&o.Concurrency, DefaultConcurrency)
	def(&o.HostConcurrency, DefaultHostConcurrency)
	def(&o.Rounds, 1)
	if len(o.Slaves) == 0 {
		o.Slaves = DefaultSlaves
	}
	if len(o.CollySlaves) == 0 && (o.CollySlaveBinary != "" || o.CollySlaveInProcess != nil) {
		o.CollySlaves = []int{1}
	}
	fillCommon(&o.OutDir, &o.Config, &o.Logger, &o.Out)
	return o
}

// fillCommon gives the options every bench shares their defaults: the
// results directory, a default config, a discarding logger and output.
func fillCommon(outDir *string, cfg **config.Config, log **slog.Logger, out *io.Writer) {
	if *outDir == "" {
		*outDir = DefaultOutDir
	}
	if *cfg == nil {
		c := config.Default()
		*cfg = &c
	}
	if *log == nil {
		*log = slog.New(slog.DiscardHandler)
	}
	if *out == nil {
		*out = io.Discard
	}
}

// Point is one sample: seconds since the crawl started and pages done.
type Point struct {
	T    float64
	Done int64
	// SlaveRSS is the largest VmRSS of the slave processes at the sample,
	// in bytes (subprocesses only; else 0).
	SlaveRSS int64
}

// Size is a file of Options.Sizes: a label and its path; Bytes is
// filled in by Run (-1 when it could not be read).
type Size struct {
	Label, Path string
	Bytes       int64
}

// slaveProgram is what a crawl's slaves run: a binary started as bin/slave
// is, or a function of this process; api makes them slaves of the work
// API.
type slaveProgram struct {
	colly     bool // a colly collector through slave/collyslave
	api       bool
	binary    string
	inProcess func(cfg *config.Config, id string, rdb *redis.Client, log *slog.Logger) (func(context.Context) error, error)
}

// RunResult is one redcrawl crawl. Values that were not measured are -1
// (counts, bytes) or NaN (rates); the report prints them as n/a.
type RunResult struct {
	Slaves     int
	API        bool // slaves of the work API
	Subprocess bool
	Crawl      string
	// Colly says the slaves ran a colly collector's callbacks
	// (Options.CollySlaveBinary), not the stock slave's pipeline.
	Colly bool

	Pages       int64
	Seconds     float64
	PagesPerSec float64
	VsColly     float64 // PagesPerSec / colly's

	// To99Seconds is the time from seeding to the fetch that made 99% of
	// the site's expected pages (MySQL pages.fetched_at); PagesPerSec99 is
	// those pages / it, and VsColly99 its ratio to colly's: a small crawl's
	// start counts, its tail (the last stragglers) does not.
	To99Seconds, PagesPerSec99, VsColly99 float64
	// FirstFetch is the time from seeding to the first page's fetch, s.
	FirstFetch float64
	// RampSeconds is how long after the first fetch the crawl first
	// fetched, in a 100 ms bin, at least 90% of its median rate (ramp).
	RampSeconds float64
	// FinishLag is the time from the last page's fetch to the master's
	// finish decision (frontier Stats.FinishedAt), seconds.
	FinishLag float64

	SlaveCPUPer1k   float64 // CPU seconds per 1,000 pages of the slave processes (subprocesses only)
	ProcessCPUPer1k float64 // of this process: site, master, sampler (+ slaves when in-process)
	SlavePeakRSS    int64   // bytes, max VmHWM over the slave processes (subprocesses only)
	// SlaveRSSFirst and SlaveRSSLast are the mean slave RSS over the
	// samples of the first and the last 10% of the crawl (by pages done),
	// in bytes; -1 when not measured. Their ratio shows whether memory
	// stays flat as the crawl goes on.
	SlaveRSSFirst, SlaveRSSLast int64

	RedisCallsPerPage float64 // server: commandstats calls, commands inside scripts included
	RoundTripsPerPage float64 // client: commands and scripts sent
	ScriptsPerPage    float64
	RedisCPUPer1k     float64 // Redis CPU seconds per 1,000 pages
	RedisPeakCore     float64 // max over 1 s samples of Redis CPU / wall time
	// MySQLCPUPer1k is the CPU seconds per 1,000 pages of the local
	// mariadbd/mysqld (/proc/<pid>/stat; NaN when MySQL is not local),
	// and AllInPer1k the sum slaves + this process + Redis + MySQL: the
	// crawl's whole CPU, the site's serving included (in this process).
	MySQLCPUPer1k, AllInPer1k float64

	// APIRequestsPerPage is the work API requests the master answered a
	// page (watches aside), and APIClaimMs the master's mean time to
	// answer a claim, ms (API runs; else NaN).
	APIRequestsPerPage, APIClaimMs float64

	SeenBytesPerURL    float64 // MEMORY USAGE of the seen buckets / URLs seen
	QueuedBytesPerURL  float64 // MEMORY USAGE of the queue lists / their length, at the largest probe
	QueuedGrowthPerURL float64 // (used_memory − before seeding) / queued, at the largest probe
	PeakQueued         int64

	MySQLRows       int64 // pages + exceptions rows of the crawl
	MySQLRowsPerSec float64

	Missing, Extra int // expected fetches not made, fetches beyond exactly once
	Failed, Lost   int64

	Series []Point
}

// CollyResult is the colly crawl of the same site.
type CollyResult struct {
	Pages       int64
	Errors      int64
	Seconds     float64
	PagesPerSec float64
	// To99Seconds and PagesPerSec99: as RunResult's, from the responses
	// to the site's expected URLs.
	To99Seconds, PagesPerSec99 float64
	RampSeconds                float64
	FirstFetch                 float64 // seconds from the first Visit to the first response
	CPUPer1k                   float64 // this process, site included
	RSSGrowth                  int64   // bytes: peak VmRSS sampled during the crawl − VmRSS before
	Missing                    int
	Extra                      int
	Series                     []Point
}

// Report is the whole benchmark.
type Report struct {
	Date         time.Time
	CPUModel     string
	NumCPU       int
	GoVersion    string
	Options      Options
	ExpectedURLs int
	RedisVersion string

	Colly *CollyResult
	Runs  []*RunResult
	// CollyRuns are the colly-callback slaves' crawls (median rounds), by
	// Options.CollySlaves; CollyVsStock compares each with the stock
	// slave's crawl of as many slaves in its round (CollyVsStockRounds:
	// every round's), by pages/s and by slave CPU per page, medians.
	CollyRuns          []*RunResult
	CollyVsStock       map[int]StockRatio
	CollyVsStockRounds map[int][]StockRatio
	// TwoToOne is the 2-slave / 1-slave throughput ratio; NaN when one
	// of them was not run. With several rounds it is the median of the
	// rounds' ratios, and Colly and Runs are the median round's runs of
	// each (by their ratio to colly in their round).
	TwoToOne float64
	// VsColly lists each slave count's ratio to colly in every round, and
	// TwoToOneRounds the 2/1 ratio of every round (Options.Rounds > 1).
	VsColly        map[int][]float64
	TwoToOneRounds []float64
	// APIRuns are the crawls with slaves of the work API (Options.API),
	// each slave count's median round by APIVsDirect, which lists each
	// slave count's API/direct pages/s ratio in every round.
	APIRuns     []*RunResult
	APIVsDirect map[int][]float64
	// APIDirectRuns are the direct runs of APIRuns' rounds, to compare.
	APIDirectRuns []*RunResult

	MarkdownPath, SVGPath, LatestPath string
}

// StockRatio is a colly-callback crawl against the stock slave's with as
// many slaves: pages/s and slave CPU per page, colly / stock (NaN when
// not measured).
type StockRatio struct{ PagesPerSec, CPU float64 }

// bench holds what every crawl of a Run shares.
type bench struct {
	opt      Options
	site     *testsite.Site
	expected map[string]int
	hostIPs  []string       // 127.0.0.2…
	hostKeys []string       // frontier host keys, ip:port
	certs    selfcert.Files // the work API's (Options.API)
	mon      *redis.Client
	monHook  *CountHook
	tmp      string
	stamp    string
}

// Run runs the benchmark and writes its files.
func Run(ctx context.Context, opt Options) (*Report, error) {
	opt = opt.withDefaults()
	for _, n := range opt.Slaves {
		if n < 1 || n > 64 {
			return nil, fmt.Errorf("benchsuite: slave count %d out of range 1..64", n)
		}
	}
	if opt.SlaveBinary != "" {
		if _, err := os.Stat(opt.SlaveBinary); err != nil {
			return nil, fmt.Errorf("benchsuite: slave binary: %w", err)
		}
	} else if opt.InProcess == nil {
		return nil, fmt.Errorf("benchsuite: no slaves: give a slave binary")
	}
	if opt.CollySlaveBinary != "" {
		if _, err := os.Stat(opt.CollySlaveBinary); err != nil {
			return nil, fmt.Errorf("benchsuite: colly slave binary: %w", err)
		}
	}
	for _, n := range opt.CollySlaves {
		if n < 1 || n > 64 {
			return nil, fmt.Errorf("benchsuite: colly slave count %d out of range 1..64", n)
		}
	}
	opt.Sizes = slices.Clone(opt.Sizes)
	for i := range opt.Sizes {
		opt.Sizes[i].Bytes = -1
		if fi, err := os.Stat(opt.Sizes[i].Path); err == nil {
			opt.Sizes[i].Bytes = fi.Size()
		}
	}
	site, err := testsite.Start(testsite.Options{Hosts: opt.Hosts, PagesPerHost: opt.PagesPerHost,
		LinksPerPage: opt.LinksPerPage, PageBytes: opt.PageBytes, Seed: SiteSeed, Latency: opt.Latency,
		FailingHosts: opt.FailingHosts})
	if err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	defer site.Close()
	ropt, err := redisconn.Options(opt.Config)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	b := &bench{opt: opt, site: site, expected: site.Expected(), hostKeys: hostKeys(site.HostURLs()),
		mon: redis.NewClient(ropt), monHook: &CountHook{}}
	defer b.mon.Close()
	b.mon.AddHook(b.monHook)
	for _, raw := range site.HostURLs() {
		if u, err := url.Parse(raw); err == nil {
			b.hostIPs = append(b.hostIPs, u.Hostname())
		}
	}
	if b.tmp, err = os.MkdirTemp("", "redcrawl-bench-"); err != nil {
		return nil, fmt.Errorf("benchsuite: %w", err)
	}
	defer os.RemoveAll(b.tmp)

	now := time.Now()
	b.stamp = now.Format("20060102-150405")
	rep := &Report{Date: now, CPUModel: cpuModel(), NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		Options: opt, ExpectedURLs: len(b.expected), TwoToOne: math.NaN()}
	if s, err := b.mon.Info(ctx, "server").Result(); err == nil {
		rep.RedisVersion = infoField(s, "redis_version")
	} else {
		return nil, fmt.Errorf("benchsuite: redis at %s: %w", secret.URL(opt.Config.Redis.URL), err)
	}
	mode := "in-process"
	if opt.SlaveBinary != "" {
		mode = "subprocesses of " + opt.SlaveBinary
	}
	fmt.Fprintf(opt.Out, "bench: site %d hosts × %d pages (%d URLs, ~%d bytes each)%s; slaves %v (%s); colly for reference\n",
		opt.Hosts, opt.PagesPerHost, len(b.expected), opt.PageBytes, failingNote(opt.FailingHosts), opt.Slaves, mode)

	if opt.API {
		dir := filepath.Join(b.tmp, "certs")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("benchsuite: %w", err)
		}
		if b.certs, err = selfcert.Make(dir); err != nil {
			return nil, fmt.Errorf("benchsuite: work API certificate: %w", err)
		}
	}
	if _, err := b.crawlConfig(0, opt.API); err != nil { // fail before crawling anything
		return nil, err
	}
	var rounds []round
	rep.VsColly = map[int][]float64{}
	rep.APIVsDirect = map[int][]float64{}
	for i := range opt.Rounds {
		if opt.Rounds > 1 {
			fmt.Fprintf(opt.Out, "bench: round %d of %d\n", i+1, opt.Rounds)
		}
		var rd round
		if err = labeled(ctx, "colly", func(ctx context.Context) (err error) { rd.colly, err = b.runColly(ctx); return err }); err != nil {
			return nil, err
		}
		fmt.Fprintf(opt.Out, "bench: colly: %d pages in %.1fs, %.0f pages/s; 99%% in %.2fs\n", rd.colly.Pages, rd.colly.Seconds, rd.colly.PagesPerSec, rd.colly.To99Seconds)
		freeMemory()
		var one, two float64
		rd.runs = make([]*RunResult, len(opt.Slaves))
		rd.api = make([]*RunResult, len(opt.Slaves))
		for _, k := range runOrder(len(opt.Slaves), i) {
			n := opt.Slaves[k]
			// crawl runs the direct crawl or the work API's
			crawl := func(api bool) (*RunResult, error) {
				name := "direct"
				if api {
					name = "api"
				}
				var x *RunResult
				err := labeled(ctx, fmt.Sprintf("%s-%d", name, n), func(ctx context.Context) (err error) { x, err = b.runCrawl(ctx, n, b.stock(api)); return err })
				if err != nil {
					return nil, err
				}
				x.VsColly = ratio(x.PagesPerSec, rd.colly.PagesPerSec)
				x.VsColly99 = ratio(x.PagesPerSec99, rd.colly.PagesPerSec99)
				if api {
					fmt.Fprintf(opt.Out, "bench: %d slave(s) of the work API: %d pages in %.1fs, %.0f pages/s; %.2f requests a page, %.2f ms a claim at the master\n",
						n, x.Pages, x.Seconds, x.PagesPerSec, x.APIRequestsPerPage, x.APIClaimMs)
				} else {
					fmt.Fprintf(opt.Out, "bench: %d slave(s): %d pages in %.1fs, %.0f pages/s (%.2f× colly); 99%% in %.2fs (%.2f× colly); finished %.2fs after the last fetch\n",
						n, x.Pages, x.Seconds, x.PagesPerSec, x.VsColly, x.To99Seconds, x.VsColly99, x.FinishLag)
				}
				return x, nil
			}
			// the API's crawl runs after the direct one in odd rounds (the
			// first, the third, …) and before it in even ones, so that
			// neither always gets the machine as the other left it
			steps := []bool{false}
			switch {
			case opt.API && i%2 == 1:
				steps = []bool{true, false}
			case opt.API:
				steps = []bool{false, true}
			}
			var r, ra *RunResult
			for j, api := range steps {
				if j > 0 {
					freeMemory()
				}
				x, err := crawl(api)
				if err != nil {
					return nil, err
				}
				if api {
					ra = x
				} else {
					r = x
				}
			}
			rd.runs[k] = r
			rep.VsColly[n] = append(rep.VsColly[n], r.VsColly)
			if opt.API {
				rd.api[k] = ra
				rep.APIVsDirect[n] = append(rep.APIVsDirect[n], ratio(ra.PagesPerSec, r.PagesPerSec))
				fmt.Fprintf(opt.Out, "bench: %d slave(s): work API / direct %.2f\n", n, ratio(ra.PagesPerSec, r.PagesPerSec))
			}
			switch n {
			case 1:
				one = r.PagesPerSec
			case 2:
				two = r.PagesPerSec
			}
			freeMemory()
		}
		rd.two = math.NaN()
		if one > 0 && two > 0 {
			rd.two = two / one
			rep.TwoToOneRounds = append(rep.TwoToOneRounds, rd.two)
		}
		if err := b.runCollySlaves(ctx, &rd); err != nil {
			return nil, err
		}
		rounds = append(rounds, rd)
	}
	// each slave count's median round (by its ratio to colly); colly's
	// figures from the median round of the first slave count
	for k := range opt.Slaves {
		sort.SliceStable(rounds, func(i, j int) bool { return rounds[i].runs[k].VsColly < rounds[j].runs[k].VsColly })
		med := rounds[(len(rounds)-1)/2]
		rep.Runs = append(rep.Runs, med.runs[k])
		if k == 0 {
			rep.Colly = med.colly
		}
	}
	if opt.API {
		for k := range opt.Slaves {
			sort.SliceStable(rounds, func(i, j int) bool {
				return ratio(rounds[i].api[k].PagesPerSec, rounds[i].runs[k].PagesPerSec) <
					ratio(rounds[j].api[k].PagesPerSec, rounds[j].runs[k].PagesPerSec)
			})
			med := rounds[(len(rounds)-1)/2]
			rep.APIRuns = append(rep.APIRuns, med.api[k])
			rep.APIDirectRuns = append(rep.APIDirectRuns, med.runs[k])
		}
	}
	if len(rep.TwoToOneRounds) > 0 {
		rep.TwoToOne = median(rep.TwoToOneRounds)
	}
	rep.collyMedians(opt.CollySlaves, rounds)
	if err := rep.write(opt.OutDir, b.stamp); err != nil {
		return rep, err
	}
	fmt.Fprintf(opt.Out, "bench: wrote %s, %s and %s\n", rep.MarkdownPath, rep.SVGPath, rep.LatestPath)
	return rep, nil
}

// round is one round of Run: colly, then the slave counts.
type round struct {
	colly     *CollyResult
	runs      []*RunResult // by Options.Slaves
	api       []*RunResult // the runs with API slaves (Options.API)
	collyRuns []*RunResult // by Options.CollySlaves
	two       float64      // 2/1 in this round
}

// stock is the stock slave's program, of the work API with api.
func (b *bench) stock(api bool) slaveProgram {
	return slaveProgram{api: api, binary: b.opt.SlaveBinary, inProcess: b.opt.InProcess}
}

// exactlyOnce compares the site's hits with its expected fetches.
func (b *bench) exactlyOnce() (missing, extra int) {
	hits := b.site.HitCounts()
	for u, want := range b.expected {
		if hits[u] < want {
			missing += want - hits[u]
		}
	}
	for u, n := range hits {
		if n > b.expected[u] {
			extra += n - b.expected[u]
		}
	}
	return missing, extra
}

// median returns the median of xs (the lower middle of an even count).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

func ratio(a, b float64) float64 {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

func per1k(d time.Duration, pages int64) float64 {
	if pages <= 0 || d < 0 {
		return math.NaN()
	}
	return d.Seconds() * 1000 / float64(pages)
}

func perPage(n, pages int64) float64 {
	if pages <= 0 || n < 0 {
		return math.NaN()
	}
	return float64(n) / float64(pages)
}

func freeMemory() { debug.FreeOSMemory() }

func infoField(info, key string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

var errIncomplete = errors.New("crawl incomplete")

// runOrder is the order in which round i runs the slave counts (indexes
// of n counts): as given in even rounds, reversed in odd ones, so that the
// machine's drift during a round does not always favour the same count.
func runOrder(n, i int) []int {
	out := make([]int, n)
	for k := range out {
		if i%2 == 0 {
			out[k] = k
		} else {
			out[k] = n - 1 - k
		}
	}
	return out
}

// rampBin is the bin of ramp's rates.
const rampBin = 100 * time.Millisecond

// ramp returns how long after the first of times (any order) a rampBin
// first holds at least 90% of the median bin's count, the last (partial)
// bin left out of the median; NaN with fewer than 4 bins.
func ramp(times []time.Duration) float64 {
	if len(times) == 0 {
		return math.NaN()
	}
	ts := slices.Sorted(slices.Values(times))
	var bins []int
	for _, t := range ts {
		i := int((t - ts[0]) / rampBin)
		for len(bins) <= i {
			bins = append(bins, 0)
		}
		bins[i]++
	}
	if len(bins) < 4 {
		return math.NaN()
	}
	full := slices.Sorted(slices.Values(bins[:len(bins)-1]))
	median := full[len(full)/2]
	for i, n := range bins {
		if float64(n) >= 0.9*float64(median) {
			return (time.Duration(i+1) * rampBin).Seconds()
		}
	}
	return math.NaN()
}

// labeled runs f with the CPU profile label run=name (--cpuprofile): the
// goroutines the run starts (the master, its work API, colly) inherit it,
// so that "go tool pprof -tagfocus run=api-1" shows one run's share of the
// process; the site's serving, started before, has no label.
func labeled(ctx context.Context, name string, f func(context.Context) error) error {
	var err error
	pprof.Do(ctx, pprof.Labels("run", name), func(ctx context.Context) { err = f(ctx) })
	return err
}
