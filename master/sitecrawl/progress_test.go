package sitecrawl

import (
	"bytes"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
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

// TestProgressLeft checks the time left on the progress line: none
// without work or a rate; at the pace politeness allows the hosts with
// queued work until the crawl's own rate is known; then at that rate over
// the last rateWindow.
func TestProgressLeft(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := frontier.Stats{Done: 130, Queued: 60, InFlight: 8}
	for _, tc := range []struct {
		name     string
		hostRate float64
		recent   []sample
		st       frontier.Stats
		want     string
	}{
		{"no rate", 0, nil, st, ""},
		{"politeness, one host", 0.8, nil, st, ", about 1:25 left"},
		{"politeness, 4 hosts", 0.8, nil, frontier.Stats{Done: 130, Queued: 60, InFlight: 8, Hosts: 4}, ", about 0:21 left"},
		{"too soon for a rate", 0.8, []sample{{t0.Add(8 * time.Second), 120}}, st, ", about 1:25 left"},
		{"the crawl's rate", 0.8, []sample{{t0, 100}}, st, ", about 0:23 left"},
		// from the newest sample at least rateWindow old: 90 pages in 35s
		{"the last 30s", 0.8, []sample{{t0.Add(-50 * time.Second), 0}, {t0.Add(-25 * time.Second), 40}, {t0, 100}}, st,
			", about 0:26 left"},
		{"no work", 0.8, nil, frontier.Stats{Done: 130}, ""},
	} {
		p := &progress{start: t0, done0: 100, hostRate: tc.hostRate, recent: tc.recent}
		line := p.line(tc.st, t0.Add(10*time.Second))
		_, got, _ := strings.Cut(line, ", 0:10")
		if got != tc.want {
			t.Errorf("%s: %q, want the time left %q", tc.name, line, tc.want)
		}
	}
}

// TestPace checks the line that says at the start what sets a crawl's
// pace: the config's politeness, or the rule set of the seed's host.
func TestPace(t *testing.T) {
	dir := t.TempDir()
	rule := "name: mine\nhosts: [mine.test]\npoliteness:\n  delay: 100ms\n  concurrency: 4\n"
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := rules.LoadDir(dir, rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	noDelay := config.Default()
	noDelay.Politeness.Delay = 0
	for _, tc := range []struct {
		cfg  *config.Config
		url  string
		want string
		rate float64
	}{
		{&cfg, "http://docs.example.org/", "pace: at most 1 request at a time to a host, 1s apart plus 25% on average: about 0.8 pages/s a host. " +
			"On a site you own, lower politeness.delay and raise politeness.host_concurrency to go faster", 0.8},
		{&cfg, "http://mine.test/", "pace: at most 4 requests at a time to a host, 100ms apart plus 25% on average: about 32.0 pages/s a host. " +
			"On a site you own, lower the politeness delay of rule set mine and raise its concurrency to go faster", 32},
		{&noDelay, "http://docs.example.org/", "pace: at most 1 request at a time to a host, no delay between them (politeness.delay is 0)", 0},
	} {
		u, _ := url.Parse(tc.url)
		p := paceOf(tc.cfg, set, u)
		if got := p.String(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.url, got, tc.want)
		}
		if got := p.perHost(); math.Abs(got-tc.rate) > 1e-9 {
			t.Errorf("%s: %v pages/s a host, want %v", tc.url, got, tc.rate)
		}
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
