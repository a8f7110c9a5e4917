package sitecrawl

import (
	"bytes"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestProgressLine(t *testing.T) {
	start := time.Unix(1000, 0)
	st := frontier.Stats{Done: 130, Failed: 2, Queued: 60, InFlight: 8, Retry: 0}
	for _, tc := range []struct {
		terminal bool
		want     string
	}{
		{false, "progress: done 130, queued 60, in flight 8, retry 0, failed 2, 10.0 pages/s, 0:10"},
		{true, "[###############---------]  66% done 130, queued 60, in flight 8, retry 0, failed 2, 10.0 pages/s, 0:10"},
	} {
		p := &progress{terminal: tc.terminal, start: start, done0: 30}
		if got := p.line(st, start.Add(10*time.Second)); got != tc.want {
			t.Errorf("terminal %v:\n got %q\nwant %q", tc.terminal, got, tc.want)
		}
	}
	var b bytes.Buffer
	p := &progress{w: &b, terminal: true, start: time.Now()}
	p.show(st)
	p.show(st)
	p.end()
	if got := b.String(); bytes.Count(b.Bytes(), []byte("\r\033[K")) != 2 || got[len(got)-1] != '\n' {
		t.Errorf("terminal output %q: want two redraws in place and a newline at the end", got)
	}
	if got := clock(3723 * time.Second); got != "1:02:03" {
		t.Errorf("clock = %q", got)
	}
}

func TestHint(t *testing.T) {
	for _, tc := range []struct {
		st   masterd.CrawlStats
		seed masterd.SeedResult
		want string
	}{
		{masterd.CrawlStats{Crawl: "c"}, masterd.SeedResult{Seen: 1}, "every start URL was already seen by crawl c: start it again with --fresh (drops it first), crawl under another name (--crawl NAME) or recrawl it (master seed --recrawl --crawl c)"},
		{masterd.CrawlStats{Crawl: "c", Limits: &frontier.LimitStats{MaxPages: 10, EndedBy: "max_pages"}}, masterd.SeedResult{Seen: 1},
			"crawl c was ended by its limit max_pages 10: run it with a higher one to go on"},
		{masterd.CrawlStats{Crawl: "c", Exceptions: map[string]int64{"blocked": 1}}, masterd.SeedResult{Added: 1}, "fetches to private addresses were refused: a site on loopback or an intranet needs fetch.allow_private_networks: true"},
		{masterd.CrawlStats{Crawl: "c", Exceptions: map[string]int64{"dns": 1}}, masterd.SeedResult{Added: 1}, "see what failed: master exceptions --crawl c"},
	} {
		if got := Hint(tc.st, tc.seed); got != tc.want {
			t.Errorf("Hint:\n got %q\nwant %q", got, tc.want)
		}
	}
}
