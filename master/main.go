// Command master runs and administers a redcrawl crawl.
//
//	master run    [--config config.yaml] [--exit-when-done]
//	master seed   [--config config.yaml] [--crawl NAME] URL... | --file FILE | --recrawl
//	master status [--config config.yaml] [--crawl NAME] [--json]
//	master demo   [--config config.yaml] [--hosts N] [--pages N] [--slaves N] [--slave-binary bin/slave]
//	master bench  [--config config.yaml] [--hosts N] [--pages N] [--slave-counts 1,2,4] [--slave-binary bin/slave] [--out results]
//	master rules check [--config config.yaml] [DIR]
//	master migrate [--config config.yaml]
//	master acl --mysql [--user U] [--host H] [--database D] [--migrate-user M] [--password-file F]
//	master export [--config config.yaml] --crawl NAME [--rule R] [--item I] --format jsonl|csv [--out FILE]
//	master exceptions [--crawl NAME] [--since 1h] [--kind K] [--host H] [--slave S] [--json]
//	master lost | slaves [--crawl NAME] [--json]
//	master pause | resume [--crawl NAME]
//	master requeue --failed [--crawl NAME]
//	master drain --slave ID | retire-proxy --proxy URL [--crawl NAME]
//	master acl --crawl NAME [--role slave|master|admin] [--slave ID] [--password-file F]
//	master acl --mysql [...]
//
// Exit status: 0 ok, 1 runtime error, 2 bad usage or bad config.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/benchsuite"
	"github.com/redcrawl/redcrawl/internal/harness/demo"
	"github.com/redcrawl/redcrawl/internal/harness/slaveproc"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/rules"
)

const usage = `usage: master <command> [flags]

commands:
  run     supervise the crawl (migrations, lost tasks, slaves, events to MySQL)
  seed    add seed URLs (arguments, or --file FILE with one URL a line, - for stdin),
          recorded in MySQL, then enqueued (README: Recorded seeds);
          --recrawl: fetch every recorded page again now, conditionally (README: Incremental recrawls)
  status  show the crawl's counters (--json for machine-readable output)
  demo    crawl a built-in demo site on loopback with a master and slaves (processes of
          the slave binary beside this master), then summarize
  bench   crawl a synthetic site with 1, 2 and 4 slaves and with plain colly; write a
          Markdown table and an SVG chart under results/
  rules check [DIR]
          validate the rule files (default rules.dir) without running anything;
          exit 2 with file:line errors
  export  stream extracted items out of MySQL (--format jsonl or csv, --out FILE)
  migrate create the database if missing and apply the migrations (as mysql.migrate_dsn's
          user when set, else mysql.dsn's)
  acl --crawl NAME --role slave|master|admin [--slave ID] [--password-file F]
          print the Redis ACL rules of a role of a crawl (one user per slave)
  acl --mysql [--user U] [--host H] [--database D] [--migrate-user M] [--password-file F]
          print the MySQL/MariaDB users and GRANTs of least privilege

admin commands (human tables, --json for JSON):
  exceptions [--since 1h] [--until D] [--kind K] [--host H] [--slave S] [--limit N] [--offset N]
  lost       list lost tasks (leases taken back)
  slaves     list slaves with their last heartbeat
  pause | resume
             stop or restart handing out tasks
  requeue --failed
             put failed tasks back with their attempts reset
  drain --slave ID
             ask a slave to finish its tasks and leave
  retire-proxy --proxy URL
             retire a proxy on every slave

Run "master <command> -h" for the command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, args := args[0], args[1:]
	if _, ok := adminCommands[cmd]; ok {
		return adminCmd(ctx, cmd, args, stdout, stderr)
	}
	if cmd == "acl" {
		return aclCmd(args, stdout, stderr)
	}
	fs := flag.NewFlagSet("master "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "config file")
	var crawl *string
	if cmd == "seed" || cmd == "status" || cmd == "export" {
		crawl = fs.String("crawl", "", "crawl name (overrides crawl.name)")
	}
	if cmd == "rules" {
		if len(args) == 0 || args[0] != "check" {
			fmt.Fprint(stderr, "usage: master rules check [--config config.yaml] [DIR]\n")
			return 2
		}
		cmd, args = "rules check", args[1:]
		fs = flag.NewFlagSet("master rules check", flag.ContinueOnError)
		fs.SetOutput(stderr)
		cfgPath = fs.String("config", "config.yaml", "config file (for rules.dir and the proxy pool names)")
	}
	var (
		exitWhenDone = fs.Bool("exit-when-done", false, "run: exit 0 once the crawl is finished")
		file         = fs.String("file", "", "seed: read URLs from FILE, one a line (- for stdin)")
		recrawlFlag  = fs.Bool("recrawl", false, "seed: start a recrawl now: every recorded page again, with conditional requests")
		asJSON       = fs.Bool("json", false, "status: print JSON")
		hosts        = fs.Int("hosts", 5, "demo: number of demo hosts on 127.0.0.x")
		pages        = fs.Int("pages", 60, "demo: pages per host")
		slaves       = fs.Int("slaves", 2, "demo: number of slaves")
		rule         = fs.String("rule", "", "export: only items of this rule set")
		item         = fs.String("item", "", "export: only items of this item rule")
		format       = fs.String("format", "jsonl", "export: jsonl or csv")
		out          = fs.String("out", "", "export: write to FILE instead of stdout; bench: results directory")
		slaveCounts  = fs.String("slave-counts", "1,2,4", "bench: slave counts to run")
		slaveBinary  = fs.String("slave-binary", "", "demo, bench: the slave binary their slaves are processes of (default: the slave beside this master)")
		linksPerPage = fs.Int("links", 8, "bench: links per page")
		pageBytes    = fs.Int("page-bytes", 15000, "bench: page size")
		conc         = fs.Int("concurrency", 64, "bench: fetches in flight per slave (and colly's total)")
		hostConc     = fs.Int("host-concurrency", 4, "bench: requests in flight per host, both crawlers")
		latency      = fs.Duration("latency", 0, "bench: the site's delay before answering each request")
		rounds       = fs.Int("rounds", 1, "bench: repeat colly and every slave count this many times; report the median round")
	)
	switch cmd {
	case "run", "seed", "status", "demo", "rules check", "export", "bench", "migrate":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "master: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cmd == "rules check" {
		return rulesCheck(*cfgPath, fs.Args(), stdout, stderr)
	}
	cfg, err := config.Load(*cfgPath)
	if err == nil && crawl != nil && *crawl != "" {
		cfg.Crawl.Name = *crawl
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "master: %v\n", err)
		return config.ExitCode(err)
	}
	log := cfg.NewLogger(stderr)
	slog.SetDefault(log)

	switch cmd {
	case "run":
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "master run: unexpected arguments %q\n", fs.Args())
			return 2
		}
		if err := masterd.New(cfg, masterd.Options{ExitWhenDone: *exitWhenDone, Logger: log}).Run(ctx); err != nil {
			log.Error("master failed", "err", err)
			return 1
		}
		return 0
	case "migrate":
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "master migrate: unexpected arguments %q\n", fs.Args())
			return 2
		}
		if err := masterd.Migrate(ctx, cfg); err != nil {
			fmt.Fprintf(stderr, "master migrate: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "migrations applied")
		return 0
	case "seed":
		if *recrawlFlag {
			if fs.NArg() > 0 || *file != "" {
				fmt.Fprintln(stderr, "master seed: --recrawl takes no URLs (it enqueues the recorded pages and seeds)")
				return 2
			}
			n, err := masterd.Recrawl(ctx, cfg)
			if err != nil {
				fmt.Fprintf(stderr, "master seed --recrawl: %v\n", err)
				return 1
			}
			fmt.Fprintf(stdout, "crawl %s: recrawl started, %d pages enqueued\n", cfg.Crawl.Name, n)
			return 0
		}
		urls := fs.Args()
		if *file != "" {
			more, err := readLines(*file, stdin)
			if err != nil {
				fmt.Fprintf(stderr, "master seed: %v\n", err)
				return 2
			}
			urls = append(urls, more...)
		}
		if len(urls) == 0 {
			fmt.Fprintln(stderr, "master seed: no URLs (give them as arguments or with --file)")
			return 2
		}
		res, err := masterd.Seed(ctx, cfg, urls)
		for _, r := range res.Rejected {
			fmt.Fprintf(stderr, "rejected %s\n", printable(r))
		}
		if err != nil {
			fmt.Fprintf(stderr, "master seed: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "crawl %s: %d added, %d already seen, %d rejected\n", cfg.Crawl.Name, res.Added, res.Seen, len(res.Rejected))
		if res.Added+res.Seen == 0 && len(res.Rejected) > 0 {
			return 2
		}
		return 0
	case "status":
		st, err := masterd.Status(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "master status: %v\n", err)
			return 1
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(st)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		rv := st.RulesVersion
		if rv == "" {
			rv = "none"
		}
		shards := "1"
		if n := len(st.Shards); n > 1 {
			var parts []string
			for _, s := range st.Shards {
				parts = append(parts, fmt.Sprintf("%d: %d queued, %d in flight", s.Shard, s.Queued, s.InFlight))
			}
			shards = fmt.Sprintf("%d (%s)", n, strings.Join(parts, "; "))
		}
		fmt.Fprintf(tw, "crawl\t%s\nqueued\t%d (render %d)\nin flight\t%d\nretry\t%d\ndone\t%d\nfailed\t%d\nseen\t%d\nlost\t%d\nduplicates\t%d\ntrap links dropped\t%d\nslaves alive\t%d (render-capable %d)\npages/s\t%.1f\nrules version\t%s\npaused\t%v\nfinished\t%v\n",
			st.Crawl, st.Queued, st.RenderQueued, st.InFlight, st.Retry, st.Done, st.Failed, st.Seen, st.Lost, st.Duplicates,
			st.TrapDropped, st.SlavesAlive, st.RenderSlaves, st.PagesPerSec, rv, st.Paused, st.Finished)
		fmt.Fprintf(tw, "shards\t%s\n", shards)
		if only, due := st.OnlyRetries(time.Now()); only {
			fmt.Fprintf(tw, "waiting\tonly on %d retries; the next is due in %s\n", st.Retry, due.Round(100*time.Millisecond))
		} else if st.Retry > 0 && st.NextRetryAt > 0 {
			fmt.Fprintf(tw, "next retry\tdue in %s\n", max(time.Until(time.UnixMilli(st.NextRetryAt)), 0).Round(100*time.Millisecond))
		}
		switch {
		case st.Recrawl != nil:
			r := st.Recrawl
			fmt.Fprintf(tw, "recrawl\trun %d since %s: %d unchanged, %d changed, %d new\n",
				r.Run, r.Started.Format(time.RFC3339), r.Unchanged, r.Changed, r.New)
		case st.RecrawlError != "":
			fmt.Fprintf(tw, "recrawl\trun %d: counts unavailable (%s)\n", st.RecrawlRun, st.RecrawlError)
		}
		tw.Flush()
		return 0
	case "export":
		if *crawl == "" {
			fmt.Fprintln(stderr, "master export: --crawl is required")
			return 2
		}
		if *format != "jsonl" && *format != "csv" {
			fmt.Fprintf(stderr, "master export: --format %q must be jsonl or csv\n", *format)
			return 2
		}
		w := stdout
		if *out != "" {
			f, err := os.Create(*out)
			if err != nil {
				fmt.Fprintf(stderr, "master export: %v\n", err)
				return 1
			}
			defer f.Close()
			w = f
		}
		n, err := masterd.Export(ctx, cfg, masterd.ExportOptions{Crawl: cfg.Crawl.Name, Rule: *rule, Item: *item,
			Format: *format}, w)
		if err != nil {
			fmt.Fprintf(stderr, "master export: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "exported %d items\n", n)
		return 0
	case "bench":
		var counts []int
		for _, f := range strings.Split(*slaveCounts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "master bench: --slave-counts %q: want numbers like 1,2,4\n", *slaveCounts)
				return 2
			}
			counts = append(counts, n)
		}
		dir := *out
		if dir == "" {
			dir = "results"
		}
		bh, bp := *hosts, *pages
		if !flagSet(fs, "hosts") {
			bh = 20
		}
		if !flagSet(fs, "pages") {
			bp = 1000
		}
		bin, err := slaveBinaryOf(*slaveBinary)
		if err != nil {
			fmt.Fprintf(stderr, "master bench: %v\n", err)
			return 2
		}
		rep, err := benchsuite.Run(ctx, benchsuite.Options{Hosts: bh, PagesPerHost: bp, PageBytes: *pageBytes,
			LinksPerPage: *linksPerPage, Slaves: counts, Concurrency: *conc, HostConcurrency: *hostConc,
			OutDir: dir, Config: cfg, SlaveBinary: bin, Rounds: *rounds, Latency: *latency, Logger: log, Out: stdout})
		if err != nil {
			fmt.Fprintf(stderr, "master bench: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, rep.Markdown())
		return 0
	case "demo":
		bin, err := slaveBinaryOf(*slaveBinary)
		if err != nil {
			fmt.Fprintf(stderr, "master demo: %v\n", err)
			return 2
		}
		opt := demo.Options{Hosts: *hosts, PagesPerHost: *pages, Slaves: *slaves, SlaveBinary: bin,
			Logger: log, Out: stdout, SlaveOutput: stderr}
		if err := demo.Run(ctx, cfg, opt); err != nil {
			fmt.Fprintf(stderr, "master demo: %v\n", err)
			return 1
		}
		return 0
	}
	return 2
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

// flagSet reports whether a flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// rulesCheck validates a rule directory: exit 0 when valid, 2 with every
// error (file:line: message) otherwise.
func rulesCheck(cfgPath string, args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintf(stderr, "master rules check: one directory at most, got %q\n", args)
		return 2
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		if _, statErr := os.Stat(cfgPath); statErr != nil && len(args) == 1 {
			def := config.Default() // checking a directory needs no config file
			cfg, err = &def, nil
		} else {
			fmt.Fprintf(stderr, "master: %v\n", err)
			return config.ExitCode(err)
		}
	}
	dir := cfg.Rules.Dir
	if len(args) == 1 {
		dir = args[0]
	}
	if dir == "" {
		fmt.Fprintln(stderr, "master rules check: no directory (rules.dir is empty)")
		return 2
	}
	set, err := rules.LoadDir(dir, rules.LoadOptions{ProxyPools: cfg.ProxyPoolNames()})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintf(stdout, "%s: %d files, %d rule sets, version %s\n", dir, len(set.Files), len(set.Sets), set.Version)
	return 0
}

func readLines(path string, stdin io.Reader) ([]string, error) {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read seeds: %w", err)
		}
		defer f.Close()
		r = f
	}
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read seeds from %s: %w", path, err)
	}
	return out, nil
}
