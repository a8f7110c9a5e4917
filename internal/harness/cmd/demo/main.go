// Command demo is the crawl of `make demo`: a built-in demo site on
// loopback crawled with a master in this process and slaves that are
// processes of the slave binary (internal/harness/demo).
//
//	demo [--config config.yaml] [--hosts N] [--pages N] [--slaves N] [--slave-binary bin/slave] [--keep]
//
// Exit status: 0 ok, 1 the crawl failed or missed pages, 2 bad usage or
// bad config.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redcrawl/redcrawl/internal/harness/demo"
	"github.com/redcrawl/redcrawl/internal/harness/harnessmain"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/cli"
)

const usage = `usage: demo [--config config.yaml] [--hosts N] [--pages N] [--slaves N] [--slave-binary bin/slave] [--keep]

Crawl a built-in demo site on loopback (127.0.0.2…) with a master in this
process and slaves that are processes of the slave binary, against the
configured Redis and MySQL, then summarize. At the end the demo crawl's
Redis keys, MySQL rows and WARC files are removed, unless --keep.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := cli.New("demo", usage, stdout, stderr)
	cfgPath := f.String("config", "config.yaml", "config file")
	hosts := f.Int("hosts", 5, "number of demo hosts on 127.0.0.x")
	pages := f.Int("pages", 60, "pages per host")
	slaves := f.Int("slaves", 2, "number of slaves")
	keep := f.Bool("keep", false, "keep the demo crawl's Redis keys, MySQL rows and WARC files")
	slaveBinary := harnessmain.SlaveBinaryFlag(f)
	cfg, log, code := harnessmain.Setup(f, "demo", args, cfgPath, stderr)
	if cfg == nil {
		return code
	}
	bin, err := slaveproc.Find(*slaveBinary, "slave")
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	opt := demo.Options{Hosts: *hosts, PagesPerHost: *pages, Slaves: *slaves, SlaveBinary: bin,
		Logger: log, Out: stdout, SlaveOutput: stderr, Keep: *keep}
	if err := demo.Run(ctx, cfg, opt); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}
