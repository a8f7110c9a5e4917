package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// maxCrawls bounds Crawls' walk of each table.
const maxCrawls = 10000

// Crawls lists the crawls MySQL holds rows of (seeds, pages or items),
// sorted. Each table is walked along its (crawl, …) key one crawl at a
// time (SELECT MIN(crawl) … WHERE crawl > last): a lookup per crawl,
// whatever the rows per crawl.
func (s *Store) Crawls(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, table := range []string{"seeds", "pages", "items"} {
		last := ""
		for range maxCrawls {
			var c sql.NullString
			err := s.DB.QueryRowContext(ctx, "SELECT MIN(crawl) FROM "+table+" WHERE crawl > ?", last).Scan(&c)
			if err != nil {
				return nil, fmt.Errorf("list crawls: %s: %w", table, err)
			}
			if !c.Valid {
				break
			}
			seen[c.String], last = true, c.String
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// HasCrawl reports whether MySQL holds rows of a crawl (seeds, pages or
// items).
func (s *Store) HasCrawl(ctx context.Context, crawl string) (bool, error) {
	var one int
	err := s.DB.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM seeds WHERE crawl = ?)
		OR EXISTS(SELECT 1 FROM pages WHERE crawl = ?) OR EXISTS(SELECT 1 FROM items WHERE crawl = ?)`,
		crawl, crawl, crawl).Scan(&one)
	if err != nil {
		return false, fmt.Errorf("crawl exists: %w", err)
	}
	return one == 1, nil
}

// crawlTables are the tables whose rows belong to one crawl (a crawl
// column).
var crawlTables = []string{"pages", "exceptions", "slave_events", "heartbeats", "lost_tasks", "proxy_events",
	"duplicates", "items", "schedule_runs", "seeds", "page_validators", "api_tokens"}

// deleteChunk is the most rows one DELETE removes: a crawl of millions
// of rows goes in many short transactions, not one that holds its locks
// and undo log for minutes.
const deleteChunk = 10000

// DeleteCrawl deletes every row of a crawl, table by table, deleteChunk
// rows a statement, and returns how many it deleted (master drop, the
// demo's clean-up).
func (s *Store) DeleteCrawl(ctx context.Context, crawl string) (int64, error) {
	var n int64
	for _, t := range crawlTables {
		for {
			res, err := s.DB.ExecContext(ctx, "DELETE FROM "+t+" WHERE crawl = ? LIMIT ?", crawl, deleteChunk)
			if err != nil {
				return n, fmt.Errorf("delete crawl %s: %s: %w", crawl, t, err)
			}
			k, _ := res.RowsAffected()
			n += k
			if k < deleteChunk {
				break
			}
		}
	}
	return n, nil
}
