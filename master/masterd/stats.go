package masterd

// The end-of-crawl summary: what master run --exit-when-done, master
// status, master crawl and the demo (bin/demo) print.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// topFailingHosts is how many hosts the summary names by their failures.
const topFailingHosts = 5

// CrawlStats is a crawl's summary: the Redis counters (Done, Failed,
// Duplicates, Retries, Finished) with what its MySQL rows say (pages by
// status class, bytes, items, exceptions, failing hosts, elapsed time).
type CrawlStats struct {
	Crawl    string `json:"crawl"`
	Finished bool   `json:"finished"`
	// Done is the tasks completed with a page (the frontier's count),
	// Failed those given up after their retries (no page, or an error
	// status every attempt).
	Done   int64 `json:"done"`
	Failed int64 `json:"failed"`
	// Pages counts the page rows by status class: 2xx, 3xx, 4xx, 5xx and
	// other (no status: 0).
	Pages      map[string]int64 `json:"pages"`
	Bytes      int64            `json:"bytes"`
	Items      int64            `json:"items"`
	Duplicates int64            `json:"duplicates"` // pages whose content an earlier page had
	Retries    int64            `json:"retries"`    // fetches tried again
	// Exceptions counts the exception rows by kind.
	Exceptions   map[string]int64  `json:"exceptions"`
	FailingHosts []store.HostCount `json:"failing_hosts,omitempty"`
	// Elapsed is from the first page fetched to the last (to now while
	// the crawl runs); PagesPerSec the page rows over it.
	Elapsed     time.Duration `json:"elapsed_ns"`
	PagesPerSec float64       `json:"pages_per_sec"`
	// Limits are the crawl's limits and their counts (crawl.max_pages,
	// max_items, max_duration), nil without; Limits.EndedBy names the one
	// that ended the crawl.
	Limits *frontier.LimitStats `json:"limits,omitempty"`
}

// EndedBy names the limit that ended the crawl, "" when none did.
func (c CrawlStats) EndedBy() string {
	if c.Limits == nil {
		return ""
	}
	return c.Limits.EndedBy
}

// PageCount is the number of page rows, every status class.
func (c CrawlStats) PageCount() int64 {
	var n int64
	for _, v := range c.Pages {
		n += v
	}
	return n
}

// SetElapsed sets the elapsed time (a caller that timed the crawl itself)
// and the rate it gives.
func (c *CrawlStats) SetElapsed(d time.Duration) {
	c.Elapsed = d
	c.PagesPerSec = 0
	if d > 0 {
		c.PagesPerSec = float64(c.PageCount()) / d.Seconds()
	}
}

// ReadCrawlStats reads the summary of cfg's crawl from Redis and MySQL.
func ReadCrawlStats(ctx context.Context, cfg *config.Config) (CrawlStats, error) {
	f, closeFn, err := open(ctx, cfg)
	if err != nil {
		return CrawlStats{}, err
	}
	defer closeFn()
	st, err := f.Stats(ctx)
	if err != nil {
		return CrawlStats{}, err
	}
	db, err := OpenStore(ctx, cfg)
	if err != nil {
		return CrawlStats{}, err
	}
	defer db.Close()
	return crawlStats(ctx, st, db, time.Now())
}

// crawlStats joins the frontier's counters st with the crawl's rows in db;
// now ends the elapsed time of a crawl not finished.
func crawlStats(ctx context.Context, st frontier.Stats, db *store.Store, now time.Time) (CrawlStats, error) {
	ps, err := db.PageStats(ctx, st.Crawl, topFailingHosts)
	if err != nil {
		return CrawlStats{}, fmt.Errorf("crawl stats: %w", err)
	}
	c := CrawlStats{Crawl: st.Crawl, Finished: st.Finished, Done: st.Done, Failed: st.Failed, Pages: ps.Pages,
		Bytes: ps.Bytes, Items: ps.Items, Duplicates: st.Duplicates, Retries: st.Retried, Exceptions: ps.Exceptions,
		FailingHosts: ps.FailingHosts, Limits: st.Limits}
	if !ps.First.IsZero() {
		end := ps.Last
		if !st.Finished && now.After(end) {
			end = now
		}
		c.SetElapsed(end.Sub(ps.First))
	}
	return c, nil
}

// Render writes the summary as a table of human lines.
func (c CrawlStats) Render(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	state := "running"
	if c.Finished {
		state = "finished"
		if by := c.EndedBy(); by != "" {
			state = "finished by its limit " + LimitString(c.Limits, by)
		}
	}
	fmt.Fprintf(tw, "crawl %s\t%s, %s elapsed, %.1f pages/s\n", c.Crawl, state, c.Elapsed.Round(100*time.Millisecond), c.PagesPerSec)
	var classes []string
	for _, k := range []string{"2xx", "3xx", "4xx", "5xx", "other"} {
		if n := c.Pages[k]; n > 0 || k != "other" {
			classes = append(classes, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(tw, "pages\t%d (%s); failed %d (given up after retries)\n", c.PageCount(), strings.Join(classes, ", "), c.Failed)
	fmt.Fprintf(tw, "bytes\t%s\n", humanBytes(c.Bytes))
	fmt.Fprintf(tw, "items\t%d\n", c.Items)
	fmt.Fprintf(tw, "duplicates\t%d (content seen before: links not followed again)\n", c.Duplicates)
	fmt.Fprintf(tw, "retries\t%d\n", c.Retries)
	fmt.Fprintf(tw, "exceptions\t%s\n", countList(c.Exceptions))
	hosts := make([]string, len(c.FailingHosts))
	for i, h := range c.FailingHosts {
		hosts[i] = fmt.Sprintf("%s %d", h.Host, h.Count)
	}
	if len(hosts) == 0 {
		hosts = []string{"none"}
	}
	fmt.Fprintf(tw, "top hosts by failures\t%s\n", strings.Join(hosts, ", "))
	tw.Flush()
}

// LimitString renders one of a crawl's limits, "max_pages 100" (name ""
// lists every limit set, with the counts: "max_pages 100 (57 taken),
// max_items 10 (3)").
func LimitString(l *frontier.LimitStats, name string) string {
	if l == nil {
		return ""
	}
	switch name {
	case frontier.LimitMaxPages:
		return fmt.Sprintf("max_pages %d", l.MaxPages)
	case frontier.LimitMaxItems:
		return fmt.Sprintf("max_items %d", l.MaxItems)
	case frontier.LimitMaxDuration:
		return "max_duration"
	}
	var out []string
	if l.MaxPages > 0 {
		out = append(out, fmt.Sprintf("max_pages %d (%d taken)", l.MaxPages, l.Pages))
	}
	if l.MaxItems > 0 {
		out = append(out, fmt.Sprintf("max_items %d (%d found)", l.MaxItems, l.Items))
	}
	if l.Timed {
		out = append(out, "max_duration")
	}
	return strings.Join(out, ", ")
}

// countList renders counts by name, most first ("none" when empty).
func countList(m map[string]int64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	if len(keys) == 0 {
		return "none"
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(out, ", ")
}

// humanBytes renders a byte count in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), "B"
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
