package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestDropCommand crawls a site with a crawl of three shards, then drops
// it with master drop: it refuses while a slave of the crawl is alive
// (unless --force), without an answer on stdin (naming --yes) and with a
// wrong one; --keep-rows removes every key of every shard and keeps the
// rows; a drop confirmed by the crawl's name removes the rows of every
// table with a crawl column. master crawl --fresh then fetches the site
// again.
func TestDropCommand(t *testing.T) {
	bin := buildSlave(t)
	dir := t.TempDir()
	site, rulesDir := startCrawlSite(t, dir, testsite.Options{Hosts: 1, PagesPerHost: 20, LinksPerPage: 4, Robots: true, Seed: 5})
	t.Setenv("CRAWLER_CRAWL_SHARDS", "3")
	env := writeCrawlConfig(t, dir, rulesDir, "")
	ctx := context.Background()
	crawlArgs := []string{"crawl", "--config", env.cfgPath, "--slaves", "1", "--slave-binary", bin, site.Seeds()[0]}
	var stdout, stderr bytes.Buffer
	if code := run(crawlArgs, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("master crawl: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	keys := func() (total, shards int) {
		t.Helper()
		it := env.rdb.Scan(ctx, 0, frontier.CrawlPattern(env.crawl), 1000).Iterator()
		for it.Next(ctx) {
			total++
			if !strings.HasPrefix(it.Val(), "crawl:{"+env.crawl+"}:") {
				shards++
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return total, shards
	}
	rows := func() int64 {
		t.Helper()
		tables, err := env.db.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
			WHERE table_schema = DATABASE() AND column_name = 'crawl'`)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for tables.Next() {
			var n string
			if err := tables.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		tables.Close()
		var total int64
		for _, n := range names {
			var c int64
			if err := env.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+n+" WHERE crawl = ?", env.crawl).Scan(&c); err != nil {
				t.Fatal(err)
			}
			total += c
		}
		return total
	}
	if total, shards := keys(); total == 0 || shards == 0 {
		t.Fatalf("after the crawl: %d keys, %d of shards 1 and 2", total, shards)
	}
	if rows() == 0 {
		t.Fatal("after the crawl: no row")
	}

	// a slave of the crawl, alive
	ghost, err := frontier.NewRedis(ctx, env.rdb, frontier.Options{Crawl: env.crawl, Slave: "ghost", Shards: 3,
		HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ghost.HeartbeatControl(ctx, events.Heartbeat{Slave: "ghost"}); err != nil {
		t.Fatal(err)
	}
	drop := func(stdin string, args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		var in *strings.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		var code int
		if in == nil {
			code = run(append([]string{"drop", "--config", env.cfgPath}, args...), nil, &out, &errOut)
		} else {
			code = run(append([]string{"drop", "--config", env.cfgPath}, args...), in, &out, &errOut)
		}
		return code, out.String() + errOut.String()
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		says  string
	}{
		{"no crawl named", "", []string{"--yes"}, 2, "--crawl NAME"},
		{"a slave alive", "", []string{"--crawl", env.crawl, "--yes"}, 1, "ghost"},
		{"no answer", "", []string{"--crawl", env.crawl, "--force"}, 2, "run with --yes"},
		{"empty stdin", "\n", []string{"--crawl", env.crawl, "--force"}, 1, "nothing dropped"},
		{"a wrong answer", "other\n", []string{"--crawl", env.crawl, "--force"}, 1, "nothing dropped"},
	} {
		code, out := drop(tc.stdin, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.says) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", tc.name, code, tc.code, tc.says, out)
		}
		if total, _ := keys(); total == 0 {
			t.Fatalf("%s: the keys went", tc.name)
		}
	}
	code, out := drop(env.crawl+"\n", "--crawl", env.crawl, "--force", "--keep-rows")
	if code != 0 || !strings.Contains(out, "dropped crawl "+env.crawl) {
		t.Fatalf("drop --keep-rows: exit %d:\n%s", code, out)
	}
	if total, _ := keys(); total != 0 {
		t.Errorf("drop --keep-rows left %d keys", total)
	}
	kept := rows()
	if kept == 0 {
		t.Error("drop --keep-rows removed the rows")
	}
	code, out = drop("", "--crawl", env.crawl, "--yes")
	if code != 0 || !strings.Contains(out, "0 Redis keys") {
		t.Fatalf("drop --yes: exit %d:\n%s", code, out)
	}
	if n := rows(); n != 0 {
		t.Errorf("drop left %d of the %d rows", n, kept)
	}

	// --fresh: the keys again, dropped, and the site fetched again
	stdout.Reset()
	stderr.Reset()
	if code := run(crawlArgs, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("master crawl after the drop: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(append(crawlArgs, "--fresh"), nil, &stdout, &stderr); code != 0 {
		t.Fatalf("master crawl --fresh: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"crawl " + env.crawl + ": dropped (", "1 seeds added", "this run: 20 pages fetched"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("master crawl --fresh does not say %q:\n%s", want, stdout.String())
		}
	}
}
