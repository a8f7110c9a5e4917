package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// PageStats is what a crawl's stored rows say about it: the end-of-crawl
// summary's MySQL half (masterd.CrawlStats adds the Redis counters).
type PageStats struct {
	// Pages counts the page rows by status class: "2xx", "3xx", "4xx",
	// "5xx", and "other" (any other status, 0 included).
	Pages map[string]int64 `json:"pages"`
	Bytes int64            `json:"bytes"` // body bytes of every page row
	Items int64            `json:"items"` // distinct items (a re-fetch updates its row)
	// Exceptions counts the exception rows by kind.
	Exceptions map[string]int64 `json:"exceptions"`
	// FailingHosts are the hosts with the most fetch failures (exceptions
	// but those that are not a failed fetch: robots_denied, a URL not
	// fetched by the crawl's own choice; extract, rules, item_pipeline,
	// forged_event, invalid_input, api_limit), most first.
	FailingHosts []HostCount `json:"failing_hosts,omitempty"`
	// First and Last are the times of the first and the last page fetched
	// (zero when there is none).
	First time.Time `json:"first_fetch,omitzero"`
	Last  time.Time `json:"last_fetch,omitzero"`
}

// HostCount is a host and a count.
type HostCount struct {
	Host  string `json:"host"`
	Count int64  `json:"count"`
}

// notFetchFailures are the exception kinds that say nothing of a fetch
// failing on a host.
var notFetchFailures = []any{events.KindExtract, events.KindRules, events.KindItemPipeline, events.KindForgedEvent,
	events.KindInvalidInput, events.KindAPILimit, events.KindRobotsDenied}

// PageStats reads a crawl's summary from its page, item and exception
// rows, with the topHosts hosts of the most fetch failures.
func (s *Store) PageStats(ctx context.Context, crawl string, topHosts int) (PageStats, error) {
	ps := PageStats{Pages: map[string]int64{}, Exceptions: map[string]int64{}}
	var first, last sql.NullTime
	err := s.query(ctx, "page stats",
		"SELECT status DIV 100, COUNT(*), COALESCE(SUM(bytes), 0), MIN(fetched_at), MAX(fetched_at) FROM pages WHERE crawl = ? GROUP BY status DIV 100",
		[]any{crawl}, func(r *sql.Rows) error {
			var class, n, bytes int64
			var lo, hi sql.NullTime
			if err := r.Scan(&class, &n, &bytes, &lo, &hi); err != nil {
				return err
			}
			key := "other"
			if class >= 2 && class <= 5 {
				key = fmt.Sprintf("%dxx", class)
			}
			ps.Pages[key] += n
			ps.Bytes += bytes
			if lo.Valid && (!first.Valid || lo.Time.Before(first.Time)) {
				first = lo
			}
			if hi.Valid && (!last.Valid || hi.Time.After(last.Time)) {
				last = hi
			}
			return nil
		})
	if err != nil {
		return ps, err
	}
	if first.Valid {
		ps.First, ps.Last = first.Time, last.Time
	}
	if err := s.query(ctx, "exception kinds", "SELECT kind, COUNT(*) FROM exceptions WHERE crawl = ? GROUP BY kind",
		[]any{crawl}, func(r *sql.Rows) error {
			var k string
			var n int64
			if err := r.Scan(&k, &n); err != nil {
				return err
			}
			ps.Exceptions[k] = n
			return nil
		}); err != nil {
		return ps, err
	}
	if topHosts > 0 {
		args := append([]any{crawl}, notFetchFailures...)
		q := "SELECT host, COUNT(*) AS n FROM exceptions WHERE crawl = ? AND host <> '' AND kind NOT IN (?" +
			repeatMarks(len(notFetchFailures)-1) + ") GROUP BY host ORDER BY n DESC, host LIMIT " + fmt.Sprint(topHosts)
		if err := s.query(ctx, "failing hosts", q, args, func(r *sql.Rows) error {
			var h HostCount
			if err := r.Scan(&h.Host, &h.Count); err != nil {
				return err
			}
			ps.FailingHosts = append(ps.FailingHosts, h)
			return nil
		}); err != nil {
			return ps, err
		}
	}
	if err := s.query(ctx, "item count", "SELECT COUNT(*) FROM items WHERE crawl = ?", []any{crawl},
		func(r *sql.Rows) error { return r.Scan(&ps.Items) }); err != nil {
		return ps, err
	}
	return ps, nil
}

// repeatMarks returns n times ", ?".
func repeatMarks(n int) string {
	out := ""
	for range n {
		out += ", ?"
	}
	return out
}
