package main

// master drop: remove a crawl from Redis and MySQL.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/cli"
)

const dropUsage = `usage: master drop --crawl NAME [--config config.yaml] [--keep-rows] [--yes] [--force]

Remove a crawl: every Redis key of it, on every shard and every node of a
cluster (its queues, seen URLs, leases, counters, limits), and every MySQL
row of it (pages, items, exceptions, seeds, its work API tokens, ...)
unless --keep-rows. It asks for the crawl's name on stdin unless --yes,
and refuses without an answer (no terminal: run with --yes). It refuses
while the crawl's slaves or its master run, unless --force (they would
write the crawl again). master crawl --fresh drops the crawl and crawls it
anew in one command. Redis users made for the crawl's slaves from master
acl's rules are the Redis admin's and stay: remove them with ACL DELUSER,
or a crawl made again under this name takes them back.

Exit status: 0 dropped, 1 refused or failed, 2 bad usage or no answer.
`

func dropCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := cli.New("master drop", dropUsage, stdout, stderr)
	cfgPath, crawl := configFlags(f)
	keepRows := f.Bool("keep-rows", false, "keep the crawl's MySQL rows: remove its Redis keys only")
	yes := f.Bool("yes", false, "do not ask for confirmation")
	force := f.Bool("force", false, "drop the crawl even while its slaves or its master run")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if f.NArg() > 0 {
		fmt.Fprintf(stderr, "master drop: unexpected arguments %q\n", f.Args())
		return 2
	}
	if *crawl == "" {
		fmt.Fprintln(stderr, "master drop: say which crawl: --crawl NAME (crawl.name is not taken for it)")
		return 2
	}
	cfg, code := loadConfig(*cfgPath, *crawl, stderr)
	if cfg == nil {
		return code
	}
	setLogger(cfg.NewLogger(stderr))
	name := cfg.Crawl.Name
	if !*force {
		run, err := masterd.CrawlRunning(ctx, cfg)
		if err != nil {
			return commandErr(stderr, "master drop", err)
		}
		if run.Any() {
			fmt.Fprintf(stderr, "master drop: crawl %s is running: %s; stop them first, or --force\n", name, run)
			return 1
		}
	}
	if !*yes {
		what := "its Redis keys (every shard) and its MySQL rows"
		if *keepRows {
			what = "its Redis keys (every shard); its MySQL rows stay"
		}
		fmt.Fprintf(stderr, "Drop crawl %s: %s? This cannot be undone.\nType the crawl's name to confirm: ", name, what)
		answer, err := readAnswer(stdin)
		fmt.Fprintln(stderr)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "master drop: no answer on stdin (%v): run with --yes to drop crawl %s without asking\n", err, name)
			return 2
		case answer != name:
			fmt.Fprintf(stderr, "master drop: %q is not %q: nothing dropped\n", answer, name)
			return 1
		}
	}
	// checked above unless --force: not again, so a slave that comes up
	// meanwhile does not stop it half way
	res, err := masterd.DropCrawl(ctx, cfg, *keepRows, true)
	if err != nil {
		return commandErr(stderr, "master drop", err)
	}
	if *keepRows {
		fmt.Fprintf(stdout, "dropped crawl %s: %d Redis keys; its MySQL rows kept\n", name, res.Keys)
	} else {
		fmt.Fprintf(stdout, "dropped crawl %s: %d Redis keys, %d MySQL rows\n", name, res.Keys, res.Rows)
	}
	return 0
}

// readAnswer reads one line of stdin; no stdin, or none before its end, is
// an error.
func readAnswer(stdin io.Reader) (string, error) {
	if stdin == nil {
		return "", errors.New("none")
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		if errors.Is(err, io.EOF) {
			err = errors.New("end of input")
		}
		return "", err
	}
	return strings.TrimSpace(line), nil
}
