package e2e

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
)

// recrawlRules extracts an item from every ordinary page of the three
// hosts: its heading and, once the page is revised, its revision.
const recrawlRules = `name: revs
hosts: [127.0.0.2, 127.0.0.3, 127.0.0.4]
items:
  - name: page
    match: ['/(page/\d+)?$']
    fields:
      - {name: title, css: h1, required: true}
      - {name: rev, css: .rev}
`

// TestIncrementalRecrawl crawls a site, revises 10% of its pages, runs a
// recrawl (bin/master seed --recrawl's path) and checks that the second
// run fetched every page once, conditionally, and downloaded bodies only
// for the revised pages (the others got 304); that MySQL counts the run's
// pages as unchanged and changed; that the revised pages' items follow the
// change while the others' stay; and that an unchanged page cost one WARC
// revisit record and a changed one a response. Against a server that
// ignores conditional requests every body comes again, and the checksum
// tells the unchanged pages. It runs on one frontier shard and on three.
func TestIncrementalRecrawl(t *testing.T) {
	for _, tc := range []struct {
		name       string
		validators bool
		shards     int
		api        bool // the slave is a slave of the work API
	}{
		{"validators", true, 1, false},
		{"checksum", false, 1, false},
		{"validators-3-shards", true, 3, false},
		{"validators-work-api", true, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testIncrementalRecrawl(t, tc.validators, tc.shards, tc.api) })
	}
}

func testIncrementalRecrawl(t *testing.T, validators bool, shards int, api bool) {
	site, err := testsite.Start(testsite.Options{Hosts: 3, PagesPerHost: 40, LinksPerPage: 4, PageBytes: 1024,
		Seed: 11, Validators: validators})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	cfg := crawltest.Config(t)
	cfg.Crawl.Shards = shards
	cfg.Admin.Listen = ""
	cfg.Politeness.Delay = 5 * time.Millisecond
	cfg.Rules.Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Rules.Dir, "revs.yaml"), []byte(recrawlRules), 0o644); err != nil {
		t.Fatal(err)
	}
	warc1, warc2 := t.TempDir(), t.TempDir()
	cfg.Storage.WARCDir = warc1
	crawltest.Seed(t, cfg, site) // validates cfg
	start := func(cfg *config.Config, id string) *crawltest.SlaveHandle { return crawltest.StartSlave(t, cfg, id) }
	if api {
		a := crawltest.WithAPI(t, cfg)
		start = func(c *config.Config, id string) *crawltest.SlaveHandle {
			sc := a.Config(id)
			sc.Storage.WARCDir = c.Storage.WARCDir
			return crawltest.StartSlave(t, sc, id)
		}
	}

	// the first crawl
	crawltest.RunWithSlave(t, cfg, "rc-1", start)
	pages := map[string]bool{} // the site's ordinary pages
	for u := range site.Expected() {
		if strings.HasSuffix(u, "/") || strings.Contains(u, "/page/") {
			pages[u] = true
		}
	}
	urls := make([]string, 0, len(pages))
	for u := range pages {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	changed := map[string]bool{}
	for i, u := range urls {
		if i%10 == 3 {
			changed[u] = true
		}
	}
	if n := site.Revise(keys(changed)...); n != len(changed) || n < len(urls)/10 {
		t.Fatalf("revised %d pages of %d", n, len(urls))
	}
	site.ResetHits()

	// the recrawl, with WARC records in a directory of their own
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := masterd.Recrawl(ctx, cfg)
	if err != nil || n < len(urls) {
		t.Fatalf("recrawl enqueued %d, %v; want the %d recorded pages", n, err, len(urls))
	}
	cfg2 := *cfg
	cfg2.Storage.WARCDir = warc2
	crawltest.RunWithSlave(t, &cfg2, "rc-2", start)

	// the site's log: every page once; bodies only for revised pages
	// (validators), or for every page (a server ignoring them)
	type hit struct{ Count, Bodies int }
	got, want := map[string]hit{}, map[string]hit{}
	for _, h := range site.Hits() {
		u := h.URL()
		if !pages[u] {
			continue // robots.txt
		}
		x := got[u]
		x.Count++
		if h.Status == 200 {
			x.Bodies++
		}
		got[u] = x
	}
	for _, u := range urls {
		want[u] = hit{Count: 1, Bodies: 1}
		if validators && !changed[u] {
			want[u] = hit{Count: 1}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("recrawl requests by page (-want +got):\n%s", d)
	}

	// master status: the run's counts
	st, err := masterd.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recrawl == nil {
		t.Fatalf("master status has no recrawl counts (%s)", st.RecrawlError)
	}
	wantCounts := store.RecrawlCounts{Unchanged: int64(len(urls) - len(changed)), Changed: int64(len(changed))}
	if d := cmp.Diff(wantCounts, st.Recrawl.RecrawlCounts); d != "" || st.Recrawl.Run != 1 {
		t.Errorf("recrawl run %d counts (-want +got):\n%s", st.Recrawl.Run, d)
	}

	// items: the revised pages' follow the change, the others' stay
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gotRev, wantRev := map[string]string{}, map[string]string{}
	err = db.ExportItems(ctx, store.ItemFilter{Crawl: cfg.Crawl.Name}, func(r store.ItemRow) error {
		var d struct {
			Rev string `json:"rev"`
		}
		if err := json.Unmarshal(r.Data, &d); err != nil {
			return err
		}
		gotRev[r.URL] = d.Rev
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		wantRev[u] = ""
		if changed[u] {
			wantRev[u] = "revision 1"
		}
	}
	if d := cmp.Diff(wantRev, gotRev); d != "" {
		t.Errorf("items' revisions by page (-want +got):\n%s", d)
	}

	// WARC: a revisit record per unchanged page, a response per changed one
	if d := cmp.Diff(map[string]int{"revisit": len(urls) - len(changed), "response": len(changed)}, warcTypes(t, warc2)); d != "" {
		t.Errorf("recrawl WARC records by type (-want +got):\n%s", d)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// warcTypes counts the records of a WARC directory by WARC-Type, leaving
// out warcinfo and request records.
func warcTypes(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(io.LimitReader(zr, 1<<30))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if typ, ok := strings.CutPrefix(sc.Text(), "WARC-Type: "); ok && typ != "warcinfo" && typ != "request" {
				out[typ]++
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(fmt.Errorf("%s: %w", name, err))
		}
		f.Close()
	}
	return out
}
