package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// fencedRE matches a fenced code block, indented or not: the indent, the
// info string and the body.
var fencedRE = regexp.MustCompile("(?ms)^( *)```([a-z]*)\n(.*?)^ *```")

// readmeSection returns the README's section under heading (to the next
// "## " heading).
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// codeBlocks returns a section's code blocks of an info string, their
// indent taken off.
func codeBlocks(sec, info string) []string {
	var out []string
	for _, m := range fencedRE.FindAllStringSubmatch(sec, -1) {
		if m[2] != info {
			continue
		}
		var lines []string
		for _, l := range strings.Split(m[3], "\n") {
			lines = append(lines, strings.TrimPrefix(l, m[1]))
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	return out
}

// TestReadmeFirstCrawl runs README's "Crawling your own site for the first
// time" as written, with the site on loopback: its config and rule file
// (docs.example.org made the test site's host; Redis, MySQL, the crawl
// name and shorter delays from CRAWLER_ variables), then its bin/master
// crawl command. As written (allow_private_networks false) it fetches
// nothing and exits 1 naming fetch.allow_private_networks; with it true it
// crawls the site, writes an item per page to -o and exits 0.
func TestReadmeFirstCrawl(t *testing.T) {
	sec := readmeSection(t, "## Crawling your own site for the first time")
	yamls := codeBlocks(sec, "yaml")
	if len(yamls) != 2 {
		t.Fatalf("the section has %d yaml blocks, want 2 (the config and the rule file)", len(yamls))
	}
	var cmd []string
	for _, block := range codeBlocks(sec, "sh") {
		for _, l := range strings.Split(block, "\n") {
			if strings.HasPrefix(l, "bin/master crawl ") {
				cmd = strings.Fields(l)[1:]
			}
		}
	}
	if cmd == nil {
		t.Fatal("the section has no bin/master crawl command")
	}
	if !strings.Contains(sec, "fetch.allow_private_networks") {
		t.Error("the section does not name fetch.allow_private_networks")
	}

	bin := buildSlave(t)
	site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 12, LinksPerPage: 3, Robots: true, Seed: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	seed := site.Seeds()[0]
	host := strings.Split(strings.TrimPrefix(seed, "http://"), ":")[0]
	dir := t.TempDir()
	rulesDir := filepath.Join(dir, "rules")
	if err := os.Mkdir(rulesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "my.yaml")
	for path, block := range map[string]string{cfgPath: yamls[0], filepath.Join(rulesDir, "mysite.yaml"): yamls[1]} {
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(block, "docs.example.org", host)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rules.LoadDir(rulesDir, rules.LoadOptions{}); err != nil {
		t.Fatalf("the section's rule file: %v", err)
	}
	redisURL := "redis://127.0.0.1:6379/0"
	if v := os.Getenv("REDCRAWL_TEST_REDIS"); v != "" {
		redisURL = v
	}
	dsn := storetest.DSN(t)
	for k, v := range map[string]string{"CRAWLER_REDIS_URL": redisURL, "CRAWLER_MYSQL_DSN": dsn,
		"CRAWLER_RULES_DIR": rulesDir, "CRAWLER_POLITENESS_DELAY": "20ms", "CRAWLER_MASTER_QUIESCENCE": "500ms",
		"CRAWLER_SLAVE_HEARTBEAT_INTERVAL": "300ms", "CRAWLER_SLAVE_SHUTDOWN_TIMEOUT": "5s",
		"CRAWLER_LEASE_RETRY_BASE": "200ms", "CRAWLER_DEDUP_EXPECTED_URLS": "10000"} {
		t.Setenv(k, v)
	}
	itemsPath := filepath.Join(dir, "items.jsonl")
	args := []string{cmd[0], "--slave-binary", bin} // "crawl"
	for _, a := range cmd[1:] {
		switch {
		case a == "my.yaml":
			a = cfgPath
		case a == "items.jsonl":
			a = itemsPath
		case strings.HasPrefix(a, "https://docs.example.org/"):
			a = seed
		}
		args = append(args, a)
	}

	crawlAs := func(allowPrivate string) (int, string, string) {
		t.Helper()
		name := testutil.CrawlName("readme")
		t.Setenv("CRAWLER_CRAWL_NAME", name)
		t.Setenv("CRAWLER_FETCH_ALLOW_PRIVATE_NETWORKS", allowPrivate)
		deleteCrawlAfter(t, redisURL, name)
		var stdout, stderr bytes.Buffer
		code := run(args, nil, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, out, errOut := crawlAs("false"); code != 1 || !strings.Contains(errOut, "fetch.allow_private_networks") {
		t.Errorf("as written, on loopback: exit %d, want 1 naming fetch.allow_private_networks\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut := crawlAs("true")
	if code != 0 || !strings.Contains(out, "this run: 12 pages fetched") || !strings.Contains(out, "12 items written to "+itemsPath) {
		t.Fatalf("with fetch.allow_private_networks: exit %d, want 0, 12 pages and items\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	f, err := os.Open(itemsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var rec struct {
			Rule string
			Data struct{ Title, Heading string }
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Rule != "mysite" || !strings.HasPrefix(rec.Data.Title, "Host 0 page ") ||
			rec.Data.Heading != rec.Data.Title {
			t.Errorf("item %s: %+v %v", sc.Text(), rec, err)
		}
	}
	if n != 12 {
		t.Errorf("%d items, want 12 (one per page)", n)
	}

	// docs/operations.md's SQL runs on what the crawl stored
	ops, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	queries := codeBlocks(string(ops), "sql")
	if len(queries) == 0 {
		t.Fatal("docs/operations.md has no sql block")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range queries {
		rows, err := db.Query(strings.ReplaceAll(q, "'news'", "'"+os.Getenv("CRAWLER_CRAWL_NAME")+"'"))
		if err != nil {
			t.Errorf("docs/operations.md:\n%s\n%v", q, err)
			continue
		}
		rows.Close()
	}
}

// deleteCrawlAfter deletes a crawl's Redis keys when the test ends.
func deleteCrawlAfter(t *testing.T, redisURL, crawl string) {
	t.Cleanup(func() {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		testutil.DeleteCrawl(context.Background(), rdb, crawl)
	})
}
