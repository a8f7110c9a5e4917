package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// LostTasksPage returns a page of the crawl's lost tasks, newest detection
// first (empty, not nil, when there are none).
func (s *Store) LostTasksPage(ctx context.Context, crawl string, limit, offset int) ([]events.Lost, error) {
	return s.lostTasks(ctx, crawl, "detected_at DESC, id DESC", limit, offset)
}

// ProxyState is a proxy's latest event and how often it was banned.
type ProxyState struct {
	events.Proxy
	// Bans counts the proxy's cooling and retired events in the crawl.
	Bans int
}

// ProxyStates returns each proxy's latest event (across slaves) with its
// ban count, ordered by proxy.
func (s *Store) ProxyStates(ctx context.Context, crawl string) ([]ProxyState, error) {
	q := "SELECT p.crawl, p.slave_id, p.proxy, p.state, p.reason, p.errors, p.uses, p.at, a.bans FROM proxy_events p " +
		"JOIN (SELECT MAX(id) AS id, SUM(state IN ('cooling', 'retired')) AS bans FROM proxy_events " +
		"WHERE crawl = ? GROUP BY proxy) a ON p.id = a.id ORDER BY p.proxy"
	out := []ProxyState{}
	err := s.query(ctx, "proxy states", q, []any{crawl}, func(r *sql.Rows) error {
		var x ProxyState
		var at time.Time
		if err := r.Scan(&x.Crawl, &x.Slave, &x.Proxy.Proxy, &x.State, &x.Reason, &x.Errors, &x.Uses, &at, &x.Bans); err != nil {
			return err
		}
		x.At = unixMS(at)
		out = append(out, x)
		return nil
	})
	return out, err
}

// PageCounts counts the crawl's stored pages by fetch time in buckets of
// step from since: out[i] is the count in [since+i·step, since+(i+1)·step),
// up to n buckets.
func (s *Store) PageCounts(ctx context.Context, crawl string, since time.Time, step time.Duration, n int) ([]int64, error) {
	if step < time.Second || n <= 0 {
		return nil, fmt.Errorf("page counts: step %v must be >= 1s and buckets %d > 0", step, n)
	}
	out := make([]int64, n)
	sec := int64(step / time.Second)
	// TIMESTAMPDIFF on DATETIME columns does not depend on the session's
	// time zone, unlike UNIX_TIMESTAMP
	q := "SELECT FLOOR(TIMESTAMPDIFF(SECOND, ?, fetched_at) / ?) AS b, COUNT(*) FROM pages " +
		"WHERE crawl = ? AND fetched_at >= ? AND fetched_at < ? GROUP BY b"
	end := since.Add(time.Duration(n) * step)
	err := s.query(ctx, "page counts", q, []any{since.UTC(), sec, crawl, since.UTC(), end.UTC()}, func(r *sql.Rows) error {
		var b, c int64
		if err := r.Scan(&b, &c); err != nil {
			return err
		}
		if b >= 0 && b < int64(n) {
			out[b] = c
		}
		return nil
	})
	return out, err
}
