package store

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

// TestCrawls: the crawls MySQL holds rows of are listed and found, and
// DeleteCrawl removes every row of one crawl (every table with a crawl
// column is in crawlTables) and none of another's.
func TestCrawls(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	var tables []string
	rows, err := s.DB.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = DATABASE() AND column_name = 'crawl' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	slices.Sort(tables)
	want := slices.Clone(crawlTables)
	slices.Sort(want)
	if d := cmp.Diff(want, tables); d != "" {
		t.Errorf("crawlTables differ from the tables with a crawl column (-crawlTables +schema):\n%s", d)
	}

	if got, err := s.Crawls(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Crawls of an empty database = %q, %v", got, err)
	}
	if err := s.RecordSeeds(ctx, "b", []string{"http://b.test/"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(ctx, []events.Envelope{
		{ID: "1-1", Page: &events.Page{Crawl: "a", URL: "http://a.test/", FetchedAt: 1}},
		{ID: "1-2", Item: &events.Item{Crawl: "c", Rule: "r", Item: "i", URL: "http://c.test/", Data: []byte(`{}`), FetchedAt: 1}},
		{ID: "1-3", Exception: &events.Exception{Crawl: "a", Kind: events.KindDNS, URL: "http://a.test/x", At: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Crawls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "b", "c"}, got); d != "" {
		t.Errorf("Crawls (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		crawl string
		want  bool
	}{{"a", true}, {"b", true}, {"c", true}, {"d", false}} {
		if has, err := s.HasCrawl(ctx, c.crawl); err != nil || has != c.want {
			t.Errorf("HasCrawl(%s) = %v, %v; want %v", c.crawl, has, err, c.want)
		}
	}
	n, err := s.DeleteCrawl(ctx, "a")
	if err != nil || n < 2 { // the page (and what it wrote beside it) and the exception
		t.Errorf("DeleteCrawl(a) = %d, %v; want 2 rows or more", n, err)
	}
	if c, err := s.Counts(ctx, "a"); err != nil || c.Pages+c.Exceptions > 0 {
		t.Errorf("rows of a left: %+v, %v", c, err)
	}
	if got, _ := s.Crawls(ctx); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("Crawls after deleting a = %q", got)
	}
}
