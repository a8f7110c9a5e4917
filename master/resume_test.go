package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// stoppingRE reads the pages in flight when master crawl was stopped.
var stoppingRE = regexp.MustCompile(`stopping: the slaves finish or hand back the (\d+) pages in flight`)

// TestCrawlStopResume stops master crawl (the program, with two slave
// processes) with SIGINT once about 30% of a site is fetched, and runs
// the same command again: the first run stops gracefully (exit 130, the
// pages in flight said, the items file written), the second finishes
// the site; no page is fetched twice but at most those in flight at the
// stop, and the items file, written by both runs with --append, holds
// every item once.
func TestCrawlStopResume(t *testing.T) {
	bin := buildMaster(t)
	dir := t.TempDir()
	site, rulesDir := startCrawlSite(t, dir, testsite.Options{Hosts: 3, PagesPerHost: 80, LinksPerPage: 4, Robots: true,
		Seed: 11, Latency: 20 * time.Millisecond})
	env := writeCrawlConfig(t, dir, rulesDir, "")
	ctx := context.Background()
	want := site.Expected()
	itemsPath := filepath.Join(dir, "items.jsonl")
	args := append([]string{"crawl", "--config", env.cfgPath, "--slaves", "2", "-o", itemsPath, "--append"}, site.HostURLs()...)
	crawl := func(stopAt int64) (code int, stdout string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if stopAt > 0 {
			statsKey := frontier.NewKeys(env.crawl).Stats
			deadline := time.Now().Add(2 * time.Minute)
			for {
				done, _ := env.rdb.HGet(ctx, statsKey, "done").Int64()
				if done >= stopAt {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("%d pages done in 2 minutes, want %d before the stop\n%s\n%s", done, stopAt, out.String(), errOut.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
		err := <-exited
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if testing.Verbose() {
			t.Logf("master crawl:\n%s", out.String())
		}
		return cmd.ProcessState.ExitCode(), out.String() + errOut.String()
	}

	code, out := crawl(int64(len(want)) * 3 / 10)
	m := stoppingRE.FindStringSubmatch(out)
	if code != 130 || m == nil || !strings.Contains(out, "run the same command again") {
		t.Fatalf("stopped crawl: exit %d, want 130 saying the pages in flight and how to go on:\n%s", code, out)
	}
	inFlight, _ := strconv.Atoi(m[1])
	first := site.HitCounts()
	if fetched := countPages(first, want); fetched >= len(want) {
		t.Fatalf("the whole site was fetched before the stop (%d pages)", fetched)
	}
	firstItems := readItems(t, itemsPath)
	if len(firstItems) == 0 {
		t.Error("the stopped run wrote no item")
	}

	code, out = crawl(0)
	if code != 0 || !strings.Contains(out, "finished") {
		t.Fatalf("the crawl again: exit %d, want 0 and finished:\n%s", code, out)
	}
	hits := site.HitCounts()
	again := 0
	for u := range want {
		if hits[u] == 0 {
			t.Errorf("%s never fetched", u)
		}
		again += hits[u] - 1
	}
	t.Logf("stopped after %d of %d pages with %d in flight; %d fetched again", countPages(first, want), len(want), inFlight, again)
	if again > inFlight {
		t.Errorf("%d pages fetched twice, more than the %d in flight at the stop", again, inFlight)
	}
	items := readItems(t, itemsPath)
	seen := map[string]int{}
	for _, it := range items {
		seen[it]++
	}
	wantItems := 0
	for u := range want {
		if strings.Contains(u, "/page/") {
			wantItems++
		}
	}
	for it, n := range seen {
		if n > 1 {
			t.Errorf("item %s %d times in the file", it, n)
		}
	}
	if len(seen) != wantItems {
		t.Errorf("%d distinct items in the file (%d from the stopped run), want %d", len(seen), len(firstItems), wantItems)
	}
}

// countPages counts the site's pages that were requested.
func countPages(hits, want map[string]int) int {
	n := 0
	for u := range want {
		if hits[u] > 0 {
			n++
		}
	}
	return n
}

// readItems reads an items file of JSON Lines: each item's rule, item
// and URL.
func readItems(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct{ Rule, Item, URL string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("items line %q: %v", sc.Text(), err)
		}
		out = append(out, rec.Rule+" "+rec.Item+" "+rec.URL)
	}
	return out
}

// TestCrawlStopAtOnce stops master crawl with a second SIGINT while its
// slaves still finish their slow pages: it exits at once (130), leaves
// the items file it was to replace as it was, and the same command again
// fetches the whole site, the killed slaves' pages once a master found
// them dead.
func TestCrawlStopAtOnce(t *testing.T) {
	bin := buildMaster(t)
	dir := t.TempDir()
	site, rulesDir := startCrawlSite(t, dir, testsite.Options{Hosts: 3, PagesPerHost: 8, LinksPerPage: 3, Robots: true,
		Seed: 12, Latency: time.Second})
	t.Setenv("CRAWLER_MASTER_DEAD_AFTER", "2s")
	env := writeCrawlConfig(t, dir, rulesDir, "")
	itemsPath := filepath.Join(dir, "items.jsonl")
	if err := os.WriteFile(itemsPath, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"crawl", "--config", env.cfgPath, "--slaves", "2", "-o", itemsPath}, site.HostURLs()...)
	cmd := exec.Command(bin, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = pw, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	ctx := context.Background()
	statsKey := frontier.NewKeys(env.crawl).Stats
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if done, _ := env.rdb.HGet(ctx, statsKey, "done").Int64(); done >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("not 3 pages done in a minute: %s", errOut.String())
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	var out strings.Builder
	for l := range lines {
		out.WriteString(l + "\n")
		if strings.HasPrefix(l, "stopping:") {
			cmd.Process.Signal(syscall.SIGINT) // while the slaves finish their pages of a second
		}
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "stopped at once") {
		t.Fatalf("stopped twice: exit %d, want 130 saying it stopped at once:\n%s\n%s", code, out.String(), errOut.String())
	}
	if b, _ := os.ReadFile(itemsPath); string(b) != "old\n" {
		t.Errorf("the items file was written: %q", b)
	}
	var stdout, stderr bytes.Buffer
	again := exec.Command(bin, args...)
	again.Stdout, again.Stderr = &stdout, &stderr
	if err := again.Run(); err != nil {
		t.Fatalf("the crawl again: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	hits := site.HitCounts()
	for u := range site.Expected() {
		if hits[u] == 0 {
			t.Errorf("%s never fetched", u)
		}
	}
	if items := readItems(t, itemsPath); len(items) != 3*7 {
		t.Errorf("%d items in the file, want %d", len(items), 3*7)
	}
}
