package main

// master crawl: one command that crawls a site (master/sitecrawl).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/redcrawl/redcrawl/master/sitecrawl"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/cli"
)

const crawlUsage = `usage: master crawl [--config config.yaml] [--crawl NAME] [--slaves N] [-o items.jsonl|.json|.csv] [--item-fields a,b] [--append] [--fresh] [--max-pages N] [--max-items N] [--max-duration D] [--slave-binary bin/slave] URL...

Crawl a site with one command: seed the URLs, run a master here and N
slaves (processes of the slave binary beside this master) until the crawl
is finished, with a progress line and an estimate of the time left; write
the items to -o (JSON Lines, JSON or CSV by the extension) and print the
crawl's stats. -o replaces FILE, once the crawl ends, with every item
stored under the crawl's name, from earlier runs too; --append adds this
run's items to it instead. Each item is written in its envelope, {"crawl",
"rule", "item", "url", "fetched_at", "data": {the fields}}; --item-fields
a,b writes flat rows of those fields instead. The same Redis, MySQL,
config and rule files as master run and slave run, which can continue the
crawl on more machines; no dashboard or work API (master run serves
them). A site on loopback or an intranet needs
fetch.allow_private_networks: true.

Politeness sets the pace, said at the start: at the default
politeness.delay of 1s a site of one host is fetched at about a page a
second. --max-pages, --max-items and --max-duration end the crawl early
(crawl.max_pages, max_items, max_duration), --fresh drops the crawl first
(as master drop) and crawls it anew. The first Ctrl-C or SIGTERM stops
gracefully (the pages in flight finished or handed back, every event
stored, -o written), a second at once; the same command again goes on
where the crawl stopped. --verbose logs the master's and the slaves' info
lines.

Exit status: 0 when pages were fetched, 1 when nothing was (or the crawl
could not run), 2 bad usage or bad config, 130 (143) when stopped by
SIGINT (SIGTERM).
`

func crawlCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master crawl", crawlUsage, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	slaves := f.Int("slaves", 2, "slave processes")
	out := f.String("o", "", "write the crawl's items to FILE (replaced): .jsonl, .json or .csv")
	appendTo := f.Bool("append", false, "with -o: add this run's items to FILE (a JSON array continued, CSV rows under its header) instead of replacing it with every item")
	fields := f.String("item-fields", "", "with -o: flat rows of these item fields (comma-separated; url and the other envelope names allowed), no envelope")
	slaveBinary := f.String("slave-binary", "", "the slave binary the slaves are processes of (default: the slave beside this master)")
	fresh := f.Bool("fresh", false, "drop the crawl first (as master drop: its Redis keys and MySQL rows) and crawl it anew")
	verbose := f.Bool("verbose", false, "log the master's and the slaves' info lines too (default: warnings and errors)")
	maxPages := f.Int64("max-pages", 0, "end the crawl once it claimed this many pages (over crawl.max_pages; 0 = no limit)")
	maxItems := f.Int64("max-items", 0, "end the crawl once its pages gave this many items (over crawl.max_items; 0 = no limit)")
	maxDuration := f.Duration("max-duration", 0, "end the crawl this long after it starts (over crawl.max_duration; 0 = no limit)")
	// flags may follow the URLs
	var urls []string
	for rest := args; ; {
		if code, ok := f.Parse(rest); !ok {
			return code
		}
		if f.NArg() == 0 {
			break
		}
		urls = append(urls, f.Arg(0))
		rest = f.Args()[1:]
	}
	opt := sitecrawl.Options{Seeds: urls, Slaves: *slaves, Out: *out, Stdout: stdout, SlaveOutput: stderr,
		Terminal: isTerminal(stdout), Fresh: *fresh, Append: *appendTo}
	opt.ItemFields = splitFields(*fields)
	if *slaves < 1 {
		fmt.Fprintf(stderr, "master crawl: --slaves %d: want 1 to 64\n", *slaves)
		return 2
	}
	if err := sitecrawl.CheckOptions(opt); err != nil {
		fmt.Fprintf(stderr, "master crawl: %v\n", err)
		return 2
	}
	cfg, code := loadConfig(*cfgPath, *crawl, stderr)
	if cfg == nil {
		return code
	}
	if f.Given("max-pages") || f.Given("max-items") || f.Given("max-duration") {
		if f.Given("max-pages") {
			cfg.Crawl.MaxPages = *maxPages
		}
		if f.Given("max-items") {
			cfg.Crawl.MaxItems = *maxItems
		}
		if f.Given("max-duration") {
			cfg.Crawl.MaxDuration = *maxDuration
		}
		if err := cfg.Validate(); err != nil {
			fmt.Fprintf(stderr, "master crawl: %v\n", err)
			return 2
		}
	}
	if !*verbose {
		cfg.Log.Level = "warn" // the progress line says how it goes
	}
	log := cfg.NewLogger(stderr)
	slog.SetDefault(log)
	opt.Logger = log
	bin, err := slaveproc.Find(*slaveBinary, "slave")
	if err != nil {
		fmt.Fprintf(stderr, "master crawl: %v\n", err)
		return 2
	}
	opt.SlaveBinary = bin
	// the first Ctrl-C or SIGTERM stops the crawl gracefully, the second
	// at once (main's context, cancelled by the first, is not used)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stop := make(chan struct{})
	opt.Stop = stop
	runCtx, atOnce := context.WithCancel(context.WithoutCancel(ctx))
	defer atOnce()
	var got atomic.Value // the first signal
	go func() {
		select {
		case sig := <-sigs:
			got.Store(sig)
		case <-runCtx.Done():
			return
		}
		close(stop)
		select {
		case <-sigs:
			atOnce()
		case <-runCtx.Done():
		}
	}()
	res, err := sitecrawl.Run(runCtx, cfg, opt)
	atOnce()
	if err != nil {
		fmt.Fprintf(stderr, "master crawl: %v\n", err)
		return 1
	}
	if res.Interrupted {
		sig, _ := got.Load().(os.Signal)
		return exitSignaled(sig)
	}
	if res.Fetched == 0 {
		fmt.Fprintf(stderr, "master crawl: no page fetched: %s\n", sitecrawl.Hint(res.Stats, res.Seed))
		return 1
	}
	return 0
}

// exitSignaled is the exit status of a command a signal stopped: 128 and
// its number, as a shell says (130 after Ctrl-C).
func exitSignaled(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
