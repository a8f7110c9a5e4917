package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// noLimit is MySQL's idiom for "all rows" when only an offset is wanted.
const noLimit = "18446744073709551615"

// ExceptionFilter selects exceptions of one crawl. Empty strings and zero
// times match anything; Crawl is always matched exactly (including "").
type ExceptionFilter struct {
	Crawl  string
	Kind   string    // exact match, e.g. events.KindDNS
	Host   string    // exact match
	Slave  string    // exact match
	Since  time.Time // inclusive
	Until  time.Time // exclusive
	Limit  int       // at most this many rows; 0 or less means no limit
	Offset int       // rows to skip, for paging
	// NewestFirst reverses the order (the dashboard's).
	NewestFirst bool
}

// Exceptions returns the crawl's exceptions matching f, oldest first (ties
// in insertion order; newest first with f.NewestFirst), so Limit and
// Offset page through a stable order. The slice is empty, not nil, when
// nothing matches.
func (s *Store) Exceptions(ctx context.Context, f ExceptionFilter) ([]events.Exception, error) {
	where, args := f.where()
	order := " ORDER BY at, id"
	if f.NewestFirst {
		order = " ORDER BY at DESC, id DESC"
	}
	q := "SELECT crawl, kind, url, host, slave_id, attempt, status, message, at, snapshot FROM exceptions WHERE " +
		where + order + limitClause(f.Limit, f.Offset)
	out := []events.Exception{}
	err := s.query(ctx, "exceptions", q, args, func(r *sql.Rows) error {
		var x events.Exception
		var at time.Time
		if err := r.Scan(&x.Crawl, &x.Kind, &x.URL, &x.Host, &x.Slave, &x.Attempt, &x.Status, &x.Message, &at,
			&x.Snapshot); err != nil {
			return err
		}
		x.At = unixMS(at)
		out = append(out, x)
		return nil
	})
	return out, err
}

// CountExceptions counts the exceptions matching f (Limit and Offset
// ignored).
func (s *Store) CountExceptions(ctx context.Context, f ExceptionFilter) (int, error) {
	where, args := f.where()
	n := 0
	err := s.query(ctx, "exception count", "SELECT COUNT(*) FROM exceptions WHERE "+where, args,
		func(r *sql.Rows) error { return r.Scan(&n) })
	return n, err
}

// where renders the filter as a WHERE condition and its arguments.
func (f ExceptionFilter) where() (string, []any) {
	where := []string{"crawl = ?"}
	args := []any{f.Crawl}
	for _, c := range []struct {
		col, v string
	}{{"kind", f.Kind}, {"host", f.Host}, {"slave_id", f.Slave}} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, f.Since.UTC())
	}
	if !f.Until.IsZero() {
		where = append(where, "at < ?")
		args = append(args, f.Until.UTC())
	}
	return strings.Join(where, " AND "), args
}

// LostTasks returns up to limit (0 or less: all) lost tasks of the crawl,
// oldest detection first (empty, not nil, when there are none).
func (s *Store) LostTasks(ctx context.Context, crawl string, limit int) ([]events.Lost, error) {
	return s.lostTasks(ctx, crawl, "detected_at, id", limit, 0)
}

// lostTasks reads lost tasks in an order (an ORDER BY list).
func (s *Store) lostTasks(ctx context.Context, crawl, order string, limit, offset int) ([]events.Lost, error) {
	q := "SELECT crawl, url, slave_id, leased_at, detected_at, attempt, reason FROM lost_tasks " +
		"WHERE crawl = ? ORDER BY " + order + limitClause(limit, offset)
	out := []events.Lost{}
	err := s.query(ctx, "lost tasks", q, []any{crawl}, func(r *sql.Rows) error {
		var x events.Lost
		var leased, detected time.Time
		if err := r.Scan(&x.Crawl, &x.URL, &x.Slave, &leased, &detected, &x.Attempt, &x.Reason); err != nil {
			return err
		}
		x.LeasedAt, x.DetectedAt = unixMS(leased), unixMS(detected)
		out = append(out, x)
		return nil
	})
	return out, err
}

// SlaveEvents returns the crawl's slave join, leave and death events, oldest
// first (empty, not nil, when there are none).
func (s *Store) SlaveEvents(ctx context.Context, crawl string) ([]events.Slave, error) {
	q := "SELECT crawl, slave_id, kind, host, at, detail FROM slave_events WHERE crawl = ? ORDER BY at, id"
	out := []events.Slave{}
	err := s.query(ctx, "slave events", q, []any{crawl}, func(r *sql.Rows) error {
		var x events.Slave
		var at time.Time
		if err := r.Scan(&x.Crawl, &x.Slave, &x.Kind, &x.Host, &at, &x.Detail); err != nil {
			return err
		}
		x.At = unixMS(at)
		out = append(out, x)
		return nil
	})
	return out, err
}

// ProxyEvents returns up to limit (0 or less: all) proxy state changes of
// the crawl, oldest first (ties in insertion order; empty, not nil, when
// there are none).
func (s *Store) ProxyEvents(ctx context.Context, crawl string, limit int) ([]events.Proxy, error) {
	q := "SELECT crawl, slave_id, proxy, state, reason, errors, uses, at FROM proxy_events " +
		"WHERE crawl = ? ORDER BY at, id" + limitClause(limit, 0)
	out := []events.Proxy{}
	err := s.query(ctx, "proxy events", q, []any{crawl}, func(r *sql.Rows) error {
		var x events.Proxy
		var at time.Time
		if err := r.Scan(&x.Crawl, &x.Slave, &x.Proxy, &x.State, &x.Reason, &x.Errors, &x.Uses, &at); err != nil {
			return err
		}
		x.At = unixMS(at)
		out = append(out, x)
		return nil
	})
	return out, err
}

// Duplicates returns the crawl's duplicate pages, oldest first (ties in
// insertion order; empty, not nil, when there are none).
func (s *Store) Duplicates(ctx context.Context, crawl string) ([]events.Duplicate, error) {
	q := "SELECT crawl, url, first_url, content_hash, slave_id, at FROM duplicates WHERE crawl = ? ORDER BY at, id"
	out := []events.Duplicate{}
	err := s.query(ctx, "duplicates", q, []any{crawl}, func(r *sql.Rows) error {
		var x events.Duplicate
		var at time.Time
		if err := r.Scan(&x.Crawl, &x.URL, &x.FirstURL, &x.ContentHash, &x.Slave, &at); err != nil {
			return err
		}
		x.At = unixMS(at)
		out = append(out, x)
		return nil
	})
	return out, err
}

// Counts is the number of rows a crawl has in each event table.
type Counts struct {
	Pages       int64
	Exceptions  int64
	SlaveEvents int64
	Heartbeats  int64
	Lost        int64
	ProxyEvents int64
	Duplicates  int64
	Items       int64 // distinct items (a re-fetch updates its row)
}

// Counts returns the crawl's row count per table, from one consistent
// snapshot.
func (s *Store) Counts(ctx context.Context, crawl string) (Counts, error) {
	var c Counts
	err := s.DB.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM pages WHERE crawl = ?),
		(SELECT COUNT(*) FROM exceptions WHERE crawl = ?),
		(SELECT COUNT(*) FROM slave_events WHERE crawl = ?),
		(SELECT COUNT(*) FROM heartbeats WHERE crawl = ?),
		(SELECT COUNT(*) FROM lost_tasks WHERE crawl = ?),
		(SELECT COUNT(*) FROM proxy_events WHERE crawl = ?),
		(SELECT COUNT(*) FROM duplicates WHERE crawl = ?),
		(SELECT COUNT(*) FROM items WHERE crawl = ?)`,
		crawl, crawl, crawl, crawl, crawl, crawl, crawl, crawl,
	).Scan(&c.Pages, &c.Exceptions, &c.SlaveEvents, &c.Heartbeats, &c.Lost, &c.ProxyEvents, &c.Duplicates, &c.Items)
	if err != nil {
		return Counts{}, fmt.Errorf("count rows of crawl %q: %w", crawl, err)
	}
	return c, nil
}

// PageURLs returns, for each URL the crawl fetched, how many page rows it
// has (1 everywhere when every page was stored exactly once). URLs longer
// than the column appear cut.
func (s *Store) PageURLs(ctx context.Context, crawl string) (map[string]int, error) {
	// Grouping by the hash too keeps URLs apart that the collation's
	// trailing-space padding would merge.
	q := "SELECT url, COUNT(*) FROM pages WHERE crawl = ? GROUP BY url_hash, url"
	out := map[string]int{}
	err := s.query(ctx, "page urls", q, []any{crawl}, func(r *sql.Rows) error {
		var u string
		var n int
		if err := r.Scan(&u, &n); err != nil {
			return err
		}
		out[u] += n
		return nil
	})
	return out, err
}

// query runs q and calls scan for each row; what names the read in errors.
func (s *Store) query(ctx context.Context, what, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := s.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("read %s: scan: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// limitClause renders LIMIT/OFFSET; limit <= 0 means no limit.
func limitClause(limit, offset int) string {
	l := noLimit
	if limit > 0 {
		l = fmt.Sprint(limit)
	}
	if limit <= 0 && offset <= 0 {
		return ""
	}
	if offset > 0 {
		return fmt.Sprintf(" LIMIT %s OFFSET %d", l, offset)
	}
	return " LIMIT " + l
}

// CountItems returns the number of the crawl's items (rows of items).
func (s *Store) CountItems(ctx context.Context, crawl string) (int64, error) {
	var n int64
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM items WHERE crawl = ?", crawl).Scan(&n); err != nil {
		return 0, fmt.Errorf("count items of crawl %q: %w", crawl, err)
	}
	return n, nil
}
