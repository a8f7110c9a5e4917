// Command collybench is the colly-callback slave of the benchmark (make
// bench, benchsuite.Options.CollySlaveBinary): a colly collector that
// Visits every a[href], as the benchmark's plain colly crawl does, run as
// a slave by slave/collyslave. It is started as bin/slave is:
//
//	collybench run [--config config.yaml] [--id ID]
//
// The collector is Async: the callbacks of the pages in flight run at
// once, as colly's own crawl parses its pages in parallel.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/slave/collyslave"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

const usage = `usage: collybench run [--config config.yaml] [--id ID]

Join the crawl as a slave whose pages a colly collector handles: every
a[href] is a Visit, a link for the frontier.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "run" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := cli.New("collybench run", usage, stdout, stderr)
	cfgPath := fs.String("config", "config.yaml", "config file")
	id := fs.String("id", "", "slave id (default host-pid-random)")
	if code, ok := fs.Parse(args[1:]); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "collybench run: unexpected arguments %q\n", fs.Args())
		return 2
	}
	return collyslave.Main(*cfgPath, collector(), slaved.Options{ID: *id})
}

// collector follows every link.
func collector() *colly.Collector {
	c := colly.NewCollector(colly.Async(true))
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	return c
}
