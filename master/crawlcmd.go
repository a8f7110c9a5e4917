package main

// The commands that run and read a crawl: run, seed, status, export,
// migrate and rules check.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/rules"
)

func runCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master run", `usage: master run [--config config.yaml] [--crawl NAME] [--exit-when-done]

Supervise the crawl: migrations, lost tasks, slaves, events to MySQL.
The first SIGINT or SIGTERM stops it gracefully (events still in Redis
are stored for up to 30 s); a second ends it at once, losing nothing:
the next master run stores the rest.
`, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	exitWhenDone := f.Bool("exit-when-done", false, "exit 0 once the crawl is finished")
	cfg, log, code := setup(f, args, cfgPath, crawl, stderr)
	if cfg == nil {
		return code
	}
	if f.NArg() > 0 {
		fmt.Fprintf(stderr, "master run: unexpected arguments %q\n", f.Args())
		return 2
	}
	opt := masterd.Options{ExitWhenDone: *exitWhenDone, Logger: log}
	if *exitWhenDone {
		opt.Summary = stdout // the crawl's stats once it is finished
	}
	if err := masterd.New(cfg, opt).Run(ctx); err != nil {
		var se *retry.StartError
		if errors.As(err, &se) { // one line that says what to check
			fmt.Fprintf(stderr, "master: %v\n", err)
			return 1
		}
		log.Error("master failed", "err", err)
		return 1
	}
	return 0
}

func migrateCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master migrate", `usage: master migrate [--config config.yaml]

Create the database if missing and apply the migrations (as
mysql.migrate_dsn's user when set, else mysql.dsn's).
`, stdout, stderr)
	cfgPath := f.ConfigFile("config.yaml", "config file")
	cfg, _, code := setup(f, args, cfgPath, nil, stderr)
	if cfg == nil {
		return code
	}
	if f.NArg() > 0 {
		fmt.Fprintf(stderr, "master migrate: unexpected arguments %q\n", f.Args())
		return 2
	}
	if err := masterd.Migrate(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "master migrate: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "migrations applied")
	return 0
}

func seedCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master seed", `usage: master seed [--config config.yaml] [--crawl NAME] URL... | --file FILE | --recrawl

Add seed URLs (arguments, or --file FILE with one URL a line, - for stdin),
recorded in MySQL, then enqueued (docs/operations.md: Recorded seeds);
--recrawl: fetch every recorded page again now, conditionally
(docs/operations.md: Recrawls).
`, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	file := f.String("file", "", "read URLs from FILE, one a line (- for stdin)")
	recrawlFlag := f.Bool("recrawl", false, "start a recrawl now: every recorded page again, with conditional requests")
	cfg, _, code := setup(f, args, cfgPath, crawl, stderr)
	if cfg == nil {
		return code
	}
	if *recrawlFlag {
		if f.NArg() > 0 || *file != "" {
			fmt.Fprintln(stderr, "master seed: --recrawl takes no URLs (it enqueues the recorded pages and seeds)")
			return 2
		}
		n, err := masterd.Recrawl(ctx, cfg)
		if err != nil {
			return commandErr(stderr, "master seed --recrawl", err)
		}
		fmt.Fprintf(stdout, "crawl %s: recrawl started, %d pages enqueued\n", cfg.Crawl.Name, n)
		return 0
	}
	urls := f.Args()
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
}

func statusCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master status", `usage: master status [--config config.yaml] [--crawl NAME] [--json]

Show the crawl's counters.
`, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	asJSON := f.Bool("json", false, "print JSON")
	cfg, _, code := setup(f, args, cfgPath, crawl, stderr)
	if cfg == nil {
		return code
	}
	st, err := masterd.Status(ctx, cfg)
	if err != nil {
		return commandErr(stderr, "master status", err)
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
	if l := st.Limits; l != nil {
		line := masterd.LimitString(l, "")
		if l.Over != "" {
			line += "; reached: " + l.Over
		}
		if l.EndedBy != "" {
			line += "; ended the crawl: " + masterd.LimitString(l, l.EndedBy)
		}
		fmt.Fprintf(tw, "limits\t%s\n", line)
	}
	if n := st.PrivateRefused; n != nil && *n > 0 {
		fmt.Fprintf(tw, "private addresses refused\t%d (set fetch.allow_private_networks: true to crawl loopback or intranet sites)\n", *n)
	}
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
	printSummary(stdout, st.Summary, st.SummaryError)
	return 0
}

func exportCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master export", `usage: master export [--config config.yaml] [--crawl NAME] [--rule R] [--item I] [-o FILE] [--format jsonl|json|csv] [--item-fields a,b] [--append]

Write the extracted items of the crawl out of MySQL, as master crawl -o
does: every item stored under the crawl's name, from every run, the latest
fetch of each URL. The format is -o's extension (.jsonl JSON Lines, .json
one JSON array, .csv CSV) or --format (jsonl without either). Each item is
written in its envelope: {"crawl", "rule", "item", "url", "fetched_at",
"data": {the fields}}, in CSV a row an item, the envelope's columns and
then a column a field; --item-fields a,b writes flat rows of those fields
instead (url and the envelope's other names allowed). -o replaces FILE,
once the export is complete; --append adds the items to it (a JSON array
continued, CSV rows under its header, whose columns they must fit).
Without -o the items go to stdout.
`, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	rule := f.String("rule", "", "only items of this rule set")
	item := f.String("item", "", "only items of this item rule")
	out := f.String("o", "", "write to FILE instead of stdout (replaced, or added to with --append)")
	format := f.String("format", "", "jsonl, json or csv (default: -o's extension, else jsonl)")
	fields := f.String("item-fields", "", "flat rows of these item fields (comma-separated; url and the other envelope names allowed), no envelope")
	appendTo := f.Bool("append", false, "with -o: add the items to FILE instead of replacing it")
	cfg, _, code := setup(f, args, cfgPath, crawl, stderr)
	if cfg == nil {
		return code
	}
	usageErr := func(msg string) int {
		fmt.Fprintf(stderr, "master export: %s\n", msg)
		return 2
	}
	fm := *format
	if fm == "" && *out != "" {
		if fm = masterd.FormatOfPath(*out); fm == "" {
			return usageErr(fmt.Sprintf("-o %s: the extension does not say the format (.jsonl, .json or .csv): give --format", *out))
		}
	}
	if fm == "" {
		fm = "jsonl"
	}
	if !slices.Contains(masterd.ExportFormats, fm) {
		return usageErr(fmt.Sprintf("--format %q must be jsonl, json or csv", fm))
	}
	if *appendTo && *out == "" {
		return usageErr("--append goes with -o FILE")
	}
	opt := masterd.ExportOptions{Crawl: cfg.Crawl.Name, Rule: *rule, Item: *item, Format: fm, Fields: splitFields(*fields)}
	var n int
	var err error
	if *out == "" {
		n, err = masterd.Export(ctx, cfg, opt, stdout)
	} else {
		var file *masterd.ExportFile
		if file, err = masterd.OpenExport(*out, fm, *appendTo); err == nil {
			n, err = file.Write(ctx, cfg, opt)
		}
	}
	if err != nil {
		return commandErr(stderr, "master export", err)
	}
	fmt.Fprintf(stderr, "exported %d items\n", n)
	return 0
}

// splitFields reads a comma-separated list of item fields.
func splitFields(s string) []string {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

func rulesCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	const synopsis = "usage: master rules check [--config config.yaml] [DIR]\n"
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(stdout, synopsis)
			return 0
		}
		fmt.Fprint(stderr, synopsis)
		return 2
	}
	f := cli.New("master rules check", synopsis+`
Validate the rule files of DIR (default rules.dir) without running
anything: exit 2 with every error as file:line:col.
`, stdout, stderr)
	cfgPath := f.ConfigFile("config.yaml", "config file (for rules.dir and the proxy pool names)")
	if code, ok := f.Parse(args[1:]); !ok {
		return code
	}
	return rulesCheck(*cfgPath, f.Args(), stdout, stderr)
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

// printSummary prints a crawl's stats after a blank line, or why they are
// missing.
func printSummary(w io.Writer, sum *masterd.CrawlStats, why string) {
	fmt.Fprintln(w)
	if sum == nil {
		fmt.Fprintf(w, "stats from mysql unavailable: %s\n", why)
		return
	}
	sum.Render(w)
}

// commandErr prints a command's error and returns its exit status: 2 for
// an unknown crawl (bad usage), 1 otherwise.
func commandErr(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	var uc *masterd.UnknownCrawlError
	if errors.As(err, &uc) {
		return 2
	}
	return 1
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
