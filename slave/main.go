// Command slave joins a redcrawl crawl and fetches its pages.
//
//	slave run [--config config.yaml] [--id ID] [--concurrency N]
//
// SIGINT or SIGTERM is a graceful leave: the slave stops claiming,
// finishes its fetches within slave.shutdown_timeout, gives back the rest
// and deregisters. Exit status: 0 ok, 1 runtime error, 2 bad usage or
// bad config.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

const usage = `usage: slave run [--config config.yaml] [--id ID] [--concurrency N]
`

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stderr, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("slave run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "config file")
	id := fs.String("id", "", "slave id (default host-pid-random)")
	conc := fs.Int("concurrency", 0, "fetches in flight (overrides slave.concurrency)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "slave run: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err == nil && *conc != 0 {
		cfg.Slave.Concurrency = *conc
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return config.ExitCode(err)
	}
	log := cfg.NewLogger(stderr)
	slog.SetDefault(log)
	if lim := cfg.SlaveMemoryLimit(); lim > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(lim)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := slaved.New(cfg, slaved.Options{ID: *id, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return 2
	}
	if err := s.Run(ctx); err != nil {
		log.Error("slave failed", "err", err)
		return 1
	}
	return 0
}
