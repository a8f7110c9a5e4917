package store

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// allSeeds pages through a crawl's recorded seeds, limit at a time, and
// returns them sorted, checking that the pages come in url_hash order.
func allSeeds(t *testing.T, s *Store, crawl string, limit int) []string {
	t.Helper()
	var out []string
	var after []byte
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatal("SeedURLs never ended")
		}
		urls, next, err := s.SeedURLs(t.Context(), crawl, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if next == nil {
			break
		}
		if len(urls) > limit || bytes.Compare(next, after) <= 0 {
			t.Fatalf("page of %d seeds after %x ends at %x", len(urls), after, next)
		}
		out = append(out, urls...)
		after = next
	}
	sort.Strings(out)
	return out
}

// TestRecordSeeds records seeds in several transactions, again (a rerun
// of the same seed command), from two writers at once and for two crawls,
// and checks that SeedURLs pages through each crawl's seeds once.
func TestRecordSeeds(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	var urls []string
	for i := range seedsPerTx + 1500 { // two transactions
		urls = append(urls, fmt.Sprintf("http://h%d.test/p/%d", i%37, i))
	}
	if err := s.RecordSeeds(ctx, "c1", urls); err != nil {
		t.Fatal(err)
	}
	// the same seeds again, and overlapping ones from two writers at once
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range 2 {
		wg.Go(func() { errs[w] = s.RecordSeeds(ctx, "c1", urls[w*100:]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordSeeds(ctx, "c2", []string{"http://other.test/"}); err != nil {
		t.Fatal(err)
	}
	want := append([]string(nil), urls...)
	sort.Strings(want)
	if d := cmp.Diff(want, allSeeds(t, s, "c1", 1000)); d != "" {
		t.Errorf("c1 seeds (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"http://other.test/"}, allSeeds(t, s, "c2", 7)); d != "" {
		t.Errorf("c2 seeds (-want +got):\n%s", d)
	}
	if got := allSeeds(t, s, "none", 10); len(got) != 0 {
		t.Errorf("a crawl without seeds has %q", got)
	}
	var n int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM seeds WHERE crawl = 'c1' AND url_hash = UNHEX(LEFT(SHA2(url, 256), 32))").Scan(&n); err != nil || n != len(urls) {
		t.Errorf("%d rows whose url_hash is SHA2's (%v), want %d", n, err, len(urls))
	}
}

// TestRecordSeedsRefusesCut: a URL its column would cut is an error, and
// nothing of the call is written.
func TestRecordSeedsRefusesCut(t *testing.T) {
	s := open(t)
	long := "http://a.test/" + strings.Repeat("x", maxURL)
	for _, bad := range []string{long, "http://a.test/\xff"} {
		if err := s.RecordSeeds(t.Context(), "c", []string{"http://ok.test/", bad}); err == nil {
			t.Errorf("RecordSeeds(%.30q...) succeeded", bad)
		}
	}
	if got := allSeeds(t, s, "c", 10); len(got) != 0 {
		t.Errorf("recorded %q after a refused call", got)
	}
}
