package collyslave

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/memlimit"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// Main is a slave's main in one call, for a package main that used to call
// c.Visit and c.Wait: it loads the config file (CRAWLER_* environment
// variables override it; "" is the defaults and the environment), runs c
// as a slave of the crawl until SIGINT or SIGTERM (a graceful leave: the
// fetches in flight finish within slave.shutdown_timeout, the rest is
// given back) or an admin's drain, and returns the exit status of the
// stock slave: 0, 1 after a runtime error, 2 for a bad config or a
// collector setting a distributed crawl cannot hold (written to stderr).
// opt.Logger defaults to the config's log settings on stderr.
func Main(configPath string, c *colly.Collector, opt slaved.Options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, configPath, c, opt, os.Stderr)
}

func run(ctx context.Context, configPath string, c *colly.Collector, opt slaved.Options, stderr io.Writer) int {
	cfg, err := config.Load(configPath)
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return config.ExitCode(err)
	}
	if opt.Logger == nil {
		opt.Logger = cfg.NewLogger(stderr)
		slog.SetDefault(opt.Logger)
	}
	lctx, stopLimit := context.WithCancel(ctx) // the limit is followed while the slave runs
	defer stopLimit()
	memlimit.Apply(lctx, cfg, nil) // no DNS cache of its own to count hosts by
	s, err := New(cfg, c, opt)
	if err != nil {
		fmt.Fprintf(stderr, "slave: %v\n", err)
		return 2
	}
	if err := s.Run(ctx); err != nil {
		opt.Logger.Error("slave failed", "err", err)
		return 1
	}
	return 0
}
