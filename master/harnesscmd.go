package main

// The commands that crawl a synthetic site with their own slaves, which
// are processes of the slave binary: demo and bench.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/benchsuite"
	"github.com/redcrawl/redcrawl/internal/harness/demo"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
)

// slaveBinaryFlag adds --slave-binary.
func slaveBinaryFlag(f *cli.Flags) *string {
	return f.String("slave-binary", "", "the slave binary the slaves are processes of (default: the slave beside this master)")
}

// slaveBinaryOf is the slave binary of --slave-binary, by default the one
// beside this master.
func slaveBinaryOf(flagValue string) (string, error) {
	if flagValue == "" {
		return slaveproc.Binary()
	}
	if _, err := os.Stat(flagValue); err != nil {
		return "", fmt.Errorf("--slave-binary: %w", err)
	}
	return flagValue, nil
}

func demoCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master demo", `usage: master demo [--config config.yaml] [--hosts N] [--pages N] [--slaves N] [--slave-binary bin/slave] [--keep]

Crawl a built-in demo site on loopback (127.0.0.2…) with a master in this
process and slaves that are processes of the slave binary, against the
configured Redis and MySQL, then summarize. At the end the demo crawl's
Redis keys, MySQL rows and WARC files are removed, unless --keep.
`, stdout, stderr)
	cfgPath := f.String("config", "config.yaml", "config file")
	hosts := f.Int("hosts", 5, "number of demo hosts on 127.0.0.x")
	pages := f.Int("pages", 60, "pages per host")
	slaves := f.Int("slaves", 2, "number of slaves")
	keep := f.Bool("keep", false, "keep the demo crawl's Redis keys, MySQL rows and WARC files")
	slaveBinary := slaveBinaryFlag(f)
	cfg, log, code := setup(f, args, cfgPath, nil, stderr)
	if cfg == nil {
		return code
	}
	bin, err := slaveBinaryOf(*slaveBinary)
	if err != nil {
		fmt.Fprintf(stderr, "master demo: %v\n", err)
		return 2
	}
	opt := demo.Options{Hosts: *hosts, PagesPerHost: *pages, Slaves: *slaves, SlaveBinary: bin,
		Logger: log, Out: stdout, SlaveOutput: stderr, Keep: *keep}
	if err := demo.Run(ctx, cfg, opt); err != nil {
		fmt.Fprintf(stderr, "master demo: %v\n", err)
		return 1
	}
	return 0
}

func benchCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master bench", `usage: master bench [--config config.yaml] [--hosts N] [--pages N] [--slave-counts 1,2,4] [--slave-binary bin/slave] [--out results] [flags]

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
hosts with as many pages; the master is a process of this binary, the
slaves' dns.server the loopback DNS server. It writes
broad-<stamp>.md and broad-latest.md under --out. --broad-colly adds plain
colly's crawls of both sites, the nearest peer's broad / narrow ratio.
`, stdout, stderr)
	cfgPath := f.String("config", "config.yaml", "config file")
	hosts := f.Int("hosts", 20, "number of site hosts on 127.0.0.x")
	pages := f.Int("pages", 1000, "pages per host")
	out := f.String("out", "results", "results directory")
	slaveCounts := f.String("slave-counts", "1,2,4", "slave counts to run")
	slaveBinary := slaveBinaryFlag(f)
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
	cfg, log, code := setup(f, args, cfgPath, nil, stderr)
	if cfg == nil {
		return code
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "master bench: --cpuprofile: %v\n", err)
			return 2
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintf(stderr, "master bench: --cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	counts, ok := parseCounts(*slaveCounts)
	if !ok {
		fmt.Fprintf(stderr, "master bench: --slave-counts %q: want numbers like 1,2,4\n", *slaveCounts)
		return 2
	}
	if *failing < 0 || *failing > *hosts {
		fmt.Fprintf(stderr, "master bench: --failing-hosts %d: want 0 to --hosts (%d)\n", *failing, *hosts)
		return 2
	}
	var collyCountList []int
	if *collyBinary != "" {
		if collyCountList, ok = parseCounts(*collyCounts); !ok {
			fmt.Fprintf(stderr, "master bench: --colly-slave-counts %q: want numbers like 1,2\n", *collyCounts)
			return 2
		}
	}
	dir := *out
	if dir == "" {
		dir = "results"
	}
	bin, err := slaveBinaryOf(*slaveBinary)
	if err != nil {
		fmt.Fprintf(stderr, "master bench: %v\n", err)
		return 2
	}
	if *broad {
		return broadBench(ctx, broadArgs{hosts: *broadHosts, pages: *broadPages, slaves: *broadSlaves, many: *broadMany,
			manyConc: *broadManyConc, narrow: *broadNarrow, colly: *broadColly, idle: *broadIdle, pageBytes: *pageBytes, conc: *conc,
			hostConc: *hostConc, out: dir, slaveBinary: bin}, cfg, log, stdout, stderr)
	}
	rep, err := benchsuite.Run(ctx, benchsuite.Options{Hosts: *hosts, PagesPerHost: *pages, PageBytes: *pageBytes,
		LinksPerPage: *linksPerPage, Slaves: counts, Concurrency: *conc, HostConcurrency: *hostConc,
		OutDir: dir, Config: cfg, SlaveBinary: bin, Rounds: *rounds, Latency: *latency, APILatency: *apiLatency, FailingHosts: *failing,
		API: *withAPI, Logger: log, Out: stdout,
		CollySlaveBinary: *collyBinary, CollySlaves: collyCountList, Sizes: sizes})
	if err != nil {
		fmt.Fprintf(stderr, "master bench: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, rep.Markdown())
	return 0
}

// broadArgs are bench's --broad flags.
type broadArgs struct {
	hosts, pages, many, manyConc, narrow, pageBytes, conc, hostConc int
	slaves, out, slaveBinary                                        string
	colly                                                           bool
	idle                                                            time.Duration
}

// broadBench runs `master bench --broad`, the master a process of this
// binary.
func broadBench(ctx context.Context, a broadArgs, cfg *config.Config, log *slog.Logger, stdout, stderr io.Writer) int {
	counts, ok := parseCounts(a.slaves)
	if !ok {
		fmt.Fprintf(stderr, "master bench: --broad-slaves %q: want numbers like 1,4,16\n", a.slaves)
		return 2
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--broad-hosts", a.hosts}, {"--broad-pages", a.pages}, {"--broad-many-concurrency", a.manyConc}, {"--concurrency", a.conc}} {
		if c.v < 1 {
			fmt.Fprintf(stderr, "master bench: %s %d: want at least 1\n", c.name, c.v)
			return 2
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "master bench: this binary's path (the master of the broad runs): %v\n", err)
		return 1
	}
	rep, err := benchsuite.RunBroad(ctx, benchsuite.BroadOptions{Hosts: a.hosts, PagesPerHost: a.pages, PageBytes: a.pageBytes,
		Slaves: counts, Concurrency: a.conc, Many: a.many, ManyPerSlave: a.manyConc, NarrowHosts: a.narrow,
		HostConcurrency: a.hostConc, Colly: a.colly, IdleWindow: a.idle, Config: cfg, SlaveBinary: a.slaveBinary, MasterBinary: self,
		OutDir: a.out, Logger: log, Out: stdout})
	if err != nil {
		fmt.Fprintf(stderr, "master bench: %v\n", err)
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
