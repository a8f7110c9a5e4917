package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

// TestRecordedPagesAndCounts stores page events of a first crawl and a
// recrawl, out of order and redelivered, and checks that page_validators
// keeps the latest fetch's validators with the first depth, that
// RecordedPages pages through every URL once, and that RecrawlCounts
// counts the recrawl's pages by how they were found.
func TestRecordedPagesAndCounts(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	crawl := fmt.Sprintf("recrawl-%d", time.Now().UnixNano())
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	page := func(id string, u string, at time.Time, depth int, etag, sum, revisit string) events.Envelope {
		return events.Envelope{ID: id, Page: &events.Page{Crawl: crawl, URL: u, Status: 200, Depth: depth,
			FetchedAt: at.UnixMilli(), ETag: etag, LastModified: "lm-" + etag, Checksum: sum, Revisit: revisit}}
	}
	var first []events.Envelope
	for i := range 25 {
		first = append(first, page(fmt.Sprintf("1-%d", i), fmt.Sprintf("http://a.test/%d", i), t0, i%3, "e0", "000000000000000a", ""))
	}
	if err := s.Insert(ctx, first); err != nil {
		t.Fatal(err)
	}
	run := t0.Add(time.Hour)
	later := run.Add(time.Minute)
	recrawl := []events.Envelope{
		// a changed page, then a late event of the first crawl for it: the
		// recrawl's validators stay
		page("2-0", "http://a.test/0", later, 7, "e1", "000000000000000b", events.RevisitChanged),
		page("2-1", "http://a.test/0", t0, 0, "e0", "000000000000000a", ""),
		page("2-2", "http://a.test/1", later, 0, "e0", "000000000000000a", events.RevisitUnchanged),
		page("2-3", "http://a.test/2", later, 0, "e0", "000000000000000a", events.RevisitUnchanged),
		page("2-4", "http://a.test/new", later, 1, "", "000000000000000c", ""),
	}
	if err := s.Insert(ctx, recrawl); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(ctx, recrawl[:1]); err != nil { // redelivered
		t.Fatal(err)
	}
	got := map[string]RecordedPage{}
	var after []byte
	for batches := 0; ; batches++ {
		if batches > 10 {
			t.Fatal("RecordedPages never ended")
		}
		ps, next, err := s.RecordedPages(ctx, crawl, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if next == nil {
			break
		}
		for _, p := range ps {
			if _, dup := got[p.URL]; dup {
				t.Errorf("%s returned twice", p.URL)
			}
			p.URLHash = nil
			got[p.URL] = p
		}
		after = next
	}
	want := map[string]RecordedPage{}
	for i := range 25 {
		u := fmt.Sprintf("http://a.test/%d", i)
		want[u] = RecordedPage{URL: u, Depth: i % 3, ETag: "e0", LastModified: "lm-e0", Checksum: "000000000000000a"}
	}
	want["http://a.test/0"] = RecordedPage{URL: "http://a.test/0", ETag: "e1", LastModified: "lm-e1", Checksum: "000000000000000b"}
	want["http://a.test/new"] = RecordedPage{URL: "http://a.test/new", Depth: 1, LastModified: "lm-", Checksum: "000000000000000c"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("recorded pages (-want +got):\n%s", d)
	}
	counts, err := s.RecrawlCounts(ctx, crawl, run)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(RecrawlCounts{Unchanged: 2, Changed: 1, New: 1}, counts); d != "" {
		t.Errorf("recrawl counts (-want +got):\n%s", d)
	}
}

// TestSitemapLastModForRecrawl: a page whose server sent no Last-Modified
// but whose sitemap gave a <lastmod> is recrawled with that date.
func TestSitemapLastModForRecrawl(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	crawl := fmt.Sprintf("lastmod-%d", time.Now().UnixNano())
	lastmod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	evs := []events.Envelope{
		{ID: "1-1", Page: &events.Page{Crawl: crawl, URL: "http://a.test/sm", Status: 200, FetchedAt: time.Now().UnixMilli(), LastMod: lastmod.Unix()}},
		{ID: "1-2", Page: &events.Page{Crawl: crawl, URL: "http://a.test/hdr", Status: 200, FetchedAt: time.Now().UnixMilli(),
			LastMod: lastmod.Unix(), LastModified: "Tue, 01 Oct 2024 00:00:00 GMT"}},
	}
	if err := s.Insert(ctx, evs); err != nil {
		t.Fatal(err)
	}
	ps, _, err := s.RecordedPages(ctx, crawl, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.URL] = p.LastModified
	}
	want := map[string]string{"http://a.test/sm": "Mon, 06 May 2024 07:08:09 GMT", "http://a.test/hdr": "Tue, 01 Oct 2024 00:00:00 GMT"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("recrawl Last-Modified (-want +got):\n%s", d)
	}
}
