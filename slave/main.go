// Command slave joins a redcrawl crawl and fetches its pages, or tries
// the rules on one page.
//
//	slave run [--config config.yaml] [--crawl NAME] [--id ID] [--concurrency N] [--exit-when-done]
//	slave parse [--config config.yaml] [--rules DIR] [--render] [--ignore-robots] [--json] URL
//
// SIGINT or SIGTERM is a graceful leave: the slave stops claiming,
// finishes its fetches within slave.shutdown_timeout, gives back the rest
// and deregisters. Exit status: 0 ok, 1 runtime error, 2 bad usage or
// bad config.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/clientlog"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/slave/memlimit"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// runUsage is slave run's usage, above its flags.
const runUsage = `usage: slave run [--config config.yaml] [--crawl NAME] [--id ID] [--concurrency N] [--exit-when-done]

Join the crawl and fetch its pages until SIGINT or SIGTERM (a graceful
leave: finish the fetches within slave.shutdown_timeout, give back the
rest), the admin's drain or, with --exit-when-done, the crawl's end
(exit 0 once the master declared it finished).
`

const usage = runUsage + "\n" + parseUsage + `
Run "slave run -h" or "slave parse -h" for their flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "parse" {
		return runParse(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := cli.New("slave run", runUsage, stdout, stderr)
	cfgPath := fs.ConfigFile("config.yaml", "config file")
	crawl := fs.String("crawl", "", "crawl name (overrides crawl.name)")
	id := fs.String("id", "", "slave id (default host-pid-random)")
	conc := fs.Int("concurrency", 0, "fetches in flight (overrides slave.concurrency)")
	exitWhenDone := fs.Bool("exit-when-done", false, "leave and exit 0 once the crawl is finished")
	if code, ok := fs.Parse(args[1:]); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "slave run: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err == nil && (*conc != 0 || *crawl != "") {
		if *conc != 0 {
			cfg.Slave.Concurrency = *conc
		}
		if *crawl != "" {
			cfg.Crawl.Name = *crawl
		}
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return config.ExitCode(err)
	}
	log := cfg.NewLogger(stderr)
	slog.SetDefault(log)
	clientlog.InstallRedis(log) // go-redis's lines rate-limited as ours
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := slaved.New(cfg, slaved.Options{ID: *id, Logger: log, ExitWhenDone: *exitWhenDone})
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return 2
	}
	memlimit.Apply(ctx, cfg, s.HostsKnown)
	if err := s.Run(ctx); err != nil {
		var se *retry.StartError
		if errors.As(err, &se) { // one line that says what to check
			fmt.Fprintf(stderr, "slave: %v\n", err)
			return 1
		}
		log.Error("slave failed", "err", err)
		return 1
	}
	return 0
}
