// Command bench is the crawl benchmark of `make bench`: a synthetic site
// on loopback crawled with 1, 2 and 4 slaves (processes of the slave
// binary) and with plain colly, or with --broad the broad-crawl benchmark
// (internal/harness/benchsuite).
//
//	bench [--config config.yaml] [--hosts N] [--pages N] [--slave-counts 1,2,4] [--slave-binary bin/slave] [--out results] [flags]
//
// Exit status: 0 ok, 1 a crawl failed, 2 bad usage or bad config.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/benchsuite"
	"github.com/redcrawl/redcrawl/internal/harness/harnessmain"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := cli.New("bench", `usage: bench [--config config.yaml] [--hosts N] [--pages N] [--slave-counts 1,2,4] [--slave-binary bin/slave] [--out results] [flags]

Crawl a synthetic site on loopback with 1, 2 and 4 slaves (processes of
the slave binary) and with plain colly; write a Markdown table and an SVG
chart under --out. With --api each slave count crawls again with slaves of
the work API (TLS on loopback, a token each), compared side by side. With
--colly-slave-binary, the site is crawled also by slaves that run a colly
collector (slave/collyslave), beside the stock slave's.

With --broad it runs the broad-crawl benchmark instead: --broad-hosts
named hosts (h<i>.bench.test, answered by a DNS server on loopback) of
--broad-pages pages each, crawled with --broad-slaves slave counts of
--concurrency fetches in total, once with --broad-many slaves of
--broad-many-concurrency fetches each, and once on --broad-narrow-hosts
hosts with as many pages; the master is a process of the master binary
(--master-binary), the slaves' dns.server the loopback DNS server. It writes
broad-<stamp>.md and broad-latest.md under --out. --broad-colly adds plain
colly's crawls of both sites, the nearest peer's broad / narrow ratio.
`, stdout, stderr)
	cfgPath := f.String("config", "config.yaml", "config file")
	hosts := f.Int("hosts", 20, "number of site hosts on 127.0.0.x")
	pages := f.Int("pages", 1000, "pages per host")
	out := f.String("out", "results", "results directory")
	slaveCounts := f.String("slave-counts", "1,2,4", "slave counts to run")
	slaveBinary := harnessmain.SlaveBinaryFlag(f)
	masterBinary := f.String("master-binary", "", "--broad: the master binary the master is a process of (default: the master beside this program)")
	linksPerPage := f.Int("links", 8, "links per page")
	pageBytes := f.Int("page-bytes", 15000, "page size")
	conc := f.Int("concurrency", 64, "fetches in flight per slave (and colly's total); with --broad, in total")
	hostConc := f.Int("host-concurrency", 4, "requests in flight per host, both crawlers")
	latency := f.Duration("latency", 0, "the site's delay before answering each request")
	apiLatency := f.Duration("api-latency", 0, "--api: the round trip put between the work API's slaves and the master (a delaying proxy), as if they ran at a distance")
	failing := f.Int("failing-hosts", 0, "hosts with one URL that always answers 503 with Retry-After: 2")
	rounds := f.Int("rounds", 1, "repeat colly and every slave count this many times; report the median round")
	withAPI := f.Bool("api", false, "also crawl each slave count with slaves of the work API, after the direct ones in odd rounds (the first, the third, …) and before them in even ones")
	collyBinary := f.String("colly-slave-binary", "", "a colly-callback slave program (internal/harness/benchsuite/collybench), run as the slave binary is")
	collyCounts := f.String("colly-slave-counts", "1", "slave counts of the colly-callback crawls")
	broad := f.Bool("broad", false, "run the broad-crawl benchmark (many named hosts, few pages each) instead")
	broadHosts := f.Int("broad-hosts", benchsuite.DefaultBroadHosts, "--broad: hosts")
	broadPages := f.Int("broad-pages", benchsuite.DefaultBroadPages, "--broad: pages per host")
	broadSlaves := f.String("broad-slaves", "1,4,16", "--broad: slave counts, each with --concurrency fetches in total")
	broadMany := f.Int("broad-many", 0, "--broad: also a run of this many slaves (0 = none)")
	broadManyConc := f.Int("broad-many-concurrency", benchsuite.DefaultManyPerSlave, "--broad: fetches in flight per slave of the --broad-many run")
	broadNarrow := f.Int("broad-narrow-hosts", benchsuite.DefaultNarrowHosts, "--broad: hosts of the comparison run with as many pages (-1 = none)")
	broadColly := f.Bool("broad-colly", false, "--broad: also crawl the broad site and the comparison site with plain colly (in this process), the nearest peer's broad / narrow ratio")
	broadIdle := f.Duration("broad-idle", benchsuite.DefaultIdleWindow, "--broad: how long the idle commands of the master and slaves waiting on one slow page are counted")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of this process (the master, its work API and the site) to this file")
	var sizes sizeFlags
	f.Var(&sizes, "size", "LABEL=PATH: a file whose size the report lists (repeatable)")
	cfg, log, code := harnessmain.Setup(f, "bench", args, cfgPath, stderr)
	if cfg == nil {
		return code
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: --cpuprofile: %v\n", err)
			return 2
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintf(stderr, "bench: --cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	counts, ok := parseCounts(*slaveCounts)
	if !ok {
		fmt.Fprintf(stderr, "bench: --slave-counts %q: want numbers like 1,2,4\n", *slaveCounts)
		return 2
	}
	if *failing < 0 || *failing > *hosts {
		fmt.Fprintf(stderr, "bench: --failing-hosts %d: want 0 to --hosts (%d)\n", *failing, *hosts)
		return 2
	}
	var collyCountList []int
	if *collyBinary != "" {
		if collyCountList, ok = parseCounts(*collyCounts); !ok {
			fmt.Fprintf(stderr, "bench: --colly-slave-counts %q: want numbers like 1,2\n", *collyCounts)
			return 2
		}
	}
	dir := *out
	if dir == "" {
		dir = "results"
	}
	bin, err := slaveproc.Find(*slaveBinary, "slave")
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if *broad {
		master, err := slaveproc.Find(*masterBinary, "master")
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 2
		}
		return broadBench(ctx, broadArgs{masterBinary: master, hosts: *broadHosts, pages: *broadPages, slaves: *broadSlaves, many: *broadMany,
			manyConc: *broadManyConc, narrow: *broadNarrow, colly: *broadColly, idle: *broadIdle, pageBytes: *pageBytes, conc: *conc,
			hostConc: *hostConc, out: dir, slaveBinary: bin}, cfg, log, stdout, stderr)
	}
	rep, err := benchsuite.Run(ctx, benchsuite.Options{Hosts: *hosts, PagesPerHost: *pages, PageBytes: *pageBytes,
		LinksPerPage: *linksPerPage, Slaves: counts, Concurrency: *conc, HostConcurrency: *hostConc,
		OutDir: dir, Config: cfg, SlaveBinary: bin, Rounds: *rounds, Latency: *latency, APILatency: *apiLatency, FailingHosts: *failing,
		API: *withAPI, Logger: log, Out: stdout,
		CollySlaveBinary: *collyBinary, CollySlaves: collyCountList, Sizes: sizes})
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, rep.Markdown())
	return 0
}

// broadArgs are bench's --broad flags.
type broadArgs struct {
	hosts, pages, many, manyConc, narrow, pageBytes, conc, hostConc int
	slaves, out, slaveBinary, masterBinary                          string
	colly                                                           bool
	idle                                                            time.Duration
}

// broadBench runs `bench --broad`, the master a process of the master
// binary.
func broadBench(ctx context.Context, a broadArgs, cfg *config.Config, log *slog.Logger, stdout, stderr io.Writer) int {
	counts, ok := parseCounts(a.slaves)
	if !ok {
		fmt.Fprintf(stderr, "bench: --broad-slaves %q: want numbers like 1,4,16\n", a.slaves)
		return 2
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--broad-hosts", a.hosts}, {"--broad-pages", a.pages}, {"--broad-many-concurrency", a.manyConc}, {"--concurrency", a.conc}} {
		if c.v < 1 {
			fmt.Fprintf(stderr, "bench: %s %d: want at least 1\n", c.name, c.v)
			return 2
		}
	}
	rep, err := benchsuite.RunBroad(ctx, benchsuite.BroadOptions{Hosts: a.hosts, PagesPerHost: a.pages, PageBytes: a.pageBytes,
		Slaves: counts, Concurrency: a.conc, Many: a.many, ManyPerSlave: a.manyConc, NarrowHosts: a.narrow,
		HostConcurrency: a.hostConc, Colly: a.colly, IdleWindow: a.idle, Config: cfg, SlaveBinary: a.slaveBinary, MasterBinary: a.masterBinary,
		OutDir: a.out, Logger: log, Out: stdout})
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, rep.Markdown())
	return 0
}

// parseCounts parses slave counts such as "1,2,4".
func parseCounts(list string) ([]int, bool) {
	var counts []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, false
		}
		counts = append(counts, n)
	}
	return counts, true
}

// sizeFlags are bench's --size LABEL=PATH flags.
type sizeFlags []benchsuite.Size

func (s *sizeFlags) String() string { return fmt.Sprint(*s) }

func (s *sizeFlags) Set(v string) error {
	label, path, ok := strings.Cut(v, "=")
	if !ok || label == "" || path == "" {
		return fmt.Errorf("%q: want LABEL=PATH", v)
	}
	*s = append(*s, benchsuite.Size{Label: label, Path: path})
	return nil
}
