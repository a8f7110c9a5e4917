package slaved_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
)

// TestRobotsMetaSite crawls the test site's /meta/ pages, with default
// options and then with crawl.obey_rel_nofollow, crawl.follow_canonical and
// four shards, stores the events in MySQL and checks what each page said
// about itself: the pages rows' robots and canonical columns, WARC records
// only for the pages that allow them, links followed or not (as the site
// saw it), br and zstd pages decoded and their bombs cut at the cap.
func TestRobotsMetaSite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name      string
		obeyRel   bool
		canonical bool
		shards    int
	}{
		{name: "defaults", shards: 1},
		{name: "rel nofollow, canonical, 4 shards", obeyRel: true, canonical: true, shards: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 10, Robots: true, Meta: true, Seed: 5}, 0)
			defer stop()
			cfg := testConfig(t, site)
			cfg.Fetch.MaxBodyBytes = 1 << 20
			cfg.Crawl.ObeyRelNoFollow = tc.obeyRel
			cfg.Crawl.FollowCanonical = tc.canonical
			cfg.Crawl.Shards = tc.shards
			cfg.Storage.WARCDir = t.TempDir()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			res := crawl(t, cfg, site, 1, 2*time.Minute)
			m := site.Meta()
			hits := site.HitCounts()
			for u, want := range site.Expected() {
				if hits[u] != want {
					t.Errorf("%s fetched %d times, want %d", u, hits[u], want)
				}
			}

			// the rows in MySQL
			ctx := context.Background()
			st, err := store.OpenMigrated(ctx, storetest.DSN(t), "")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Insert(ctx, res.events); err != nil {
				t.Fatal(err)
			}
			type row struct {
				Robots, Canonical string
				Stored            bool
			}
			rows := map[string]row{}
			q := "SELECT url, robots, canonical, warc FROM pages WHERE crawl = ?"
			r, err := st.DB.QueryContext(ctx, q, cfg.Crawl.Name)
			if err != nil {
				t.Fatal(err)
			}
			for r.Next() {
				var u, warc string
				var x row
				if err := r.Scan(&u, &x.Robots, &x.Canonical, &warc); err != nil {
					t.Fatal(err)
				}
				x.Stored = warc != ""
				rows[u] = x
			}
			r.Close()
			warcURLs := warcResponseURLs(t, cfg.Storage.WARCDir)
			for _, p := range m.Pages {
				want := row{Robots: p.Robots, Canonical: p.Canonical, Stored: p.Stored}
				if diff := cmp.Diff(want, rows[p.URL]); diff != "" {
					t.Errorf("%s: pages row (-want +got):\n%s", p.URL, diff)
				}
				if warcURLs[p.URL] != p.Stored {
					t.Errorf("%s: WARC response record %v, want %v", p.URL, warcURLs[p.URL], p.Stored)
				}
				if p.Target != "" {
					want := 0
					if p.Followed {
						want = 1
					}
					if hits[p.Target] != want {
						t.Errorf("%s: its link %s fetched %d times, want %d", p.URL, p.Target, hits[p.Target], want)
					}
				}
			}
			// rel=nofollow, ugc, sponsored
			if hits[m.RelPlain] != 1 {
				t.Errorf("%s fetched %d times, want 1", m.RelPlain, hits[m.RelPlain])
			}
			for _, u := range m.RelNoFollow {
				want := 1
				if tc.obeyRel {
					want = 0
				}
				if hits[u] != want {
					t.Errorf("%s (a rel link) fetched %d times, want %d", u, hits[u], want)
				}
			}
			// canonical: enqueued and the page a duplicate of it, or neither
			dups, err := st.Duplicates(ctx, cfg.Crawl.Name)
			if err != nil {
				t.Fatal(err)
			}
			var canonDups []string
			for _, d := range dups {
				if d.FirstURL == m.CanonicalMain {
					canonDups = append(canonDups, d.URL)
				}
			}
			wantHits, wantDups := 0, []string(nil)
			if tc.canonical {
				wantHits, wantDups = 1, []string{m.Hub + "canonical-dup"}
			}
			if hits[m.CanonicalMain] != wantHits {
				t.Errorf("%s fetched %d times, want %d", m.CanonicalMain, hits[m.CanonicalMain], wantHits)
			}
			if diff := cmp.Diff(wantDups, canonDups); diff != "" {
				t.Errorf("duplicates of the canonical URL (-want +got):\n%s", diff)
			}
			// compression: the pages were decoded (their links followed),
			// the bombs cut at the cap
			for _, u := range []string{m.BrotliTarget, m.ZstdTarget} {
				if hits[u] != 1 {
					t.Errorf("%s (linked from an encoded page) fetched %d times, want 1", u, hits[u])
				}
			}
			exc := res.exceptionsByURL()
			for _, u := range []string{m.BombBrotli, m.BombZstd} {
				if !has(exc[u], events.KindTooLarge) {
					t.Errorf("%s: exceptions %v, want %s", u, exc[u], events.KindTooLarge)
				}
			}
		})
	}
}

// warcTarget finds the target of a WARC response record.
var warcTarget = regexp.MustCompile(`WARC-Type: response\r\n(?:[^\r\n]+\r\n)*?WARC-Target-URI: ([^\r\n]+)\r\n`)

// warcResponseURLs returns the target URIs of the response records of the
// finished WARC files in dir.
func warcResponseURLs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	out := map[string]bool{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr) // every gzip member: small files in tests
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, rec := range bytes.Split(b, []byte("WARC/1.")) {
			if m := warcTarget.FindSubmatch(rec); m != nil {
				out[string(m[1])] = true
			}
		}
	}
	return out
}
