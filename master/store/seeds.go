package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Recorded seeds (00008_seeds.sql): the canonical seed URLs of a crawl,
// which every recrawl enqueues again. The master records them before it
// enqueues them (masterd's seed path), so a seed in the frontier is always
// a recorded one.

// seedsPerTx is how many seeds RecordSeeds writes per transaction (in
// statements of at most maxRowsPerStmt rows): a large seed list commits as
// it goes instead of holding one huge transaction.
const seedsPerTx = 10_000

// seedCols are the seeds columns RecordSeeds writes.
var seedCols = []string{"crawl", "url_hash", "url", "added_at"}

// SeedHash is seeds.url_hash of a URL: the first 16 bytes of its SHA-256
// (in SQL, UNHEX(LEFT(SHA2(url, 256), 32))).
func SeedHash(url string) []byte {
	h := sha256.Sum256([]byte(url))
	return h[:16]
}

// StorableSeed reports whether RecordSeeds can record url as it is: valid
// UTF-8 of at most 2048 characters (seeds.url), as every canonical URL is.
func StorableSeed(url string) bool {
	return utf8.ValidString(url) && utf8.RuneCountInString(url) <= maxURL
}

// RecordSeeds records seed URLs of a crawl, idempotently: a URL already
// recorded is left as it is (INSERT IGNORE on the primary key crawl,
// url_hash), so recording the same seeds again, or from two masters at
// once, changes nothing. The URLs are written seedsPerTx per transaction:
// when it fails, the earlier transactions are kept and calling it again
// with the same URLs completes the work. A URL that its column would cut
// (over 2048 characters; a canonical URL never is) or that is not UTF-8 is
// an error before anything is written: a seed is recorded as given or not
// at all.
func (s *Store) RecordSeeds(ctx context.Context, crawl string, urls []string) error {
	for _, u := range urls {
		if !StorableSeed(u) {
			return fmt.Errorf("record seeds: %.80q...: not a URL of at most %d UTF-8 characters", u, maxURL)
		}
	}
	now := datetime(time.Now().UnixMilli())
	crawl = chars(crawl, maxCrawl)
	// in primary key order: InnoDB appends to its index instead of
	// splitting pages all over it (1M seeds: 13 s instead of 22 s here)
	rows := make([][]any, len(urls))
	for i, u := range urls {
		rows[i] = []any{crawl, SeedHash(u), u, now}
	}
	slices.SortFunc(rows, func(a, b []any) int { return bytes.Compare(a[1].([]byte), b[1].([]byte)) })
	for len(rows) > 0 {
		n := min(len(rows), seedsPerTx)
		t := &table{name: "seeds", cols: seedCols, rows: rows[:n]}
		if err := s.inTx(ctx, func(tx *sql.Tx) error { return t.exec(ctx, tx, "INSERT IGNORE") }); err != nil {
			return fmt.Errorf("record seeds: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}

// inTx runs fn in a transaction, committed when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// SeedURLs returns the recorded seeds of a crawl among the first limit
// whose url_hash is after the given one (nil: from the first), in url_hash
// order, and the last url_hash read (nil when none was): a recrawl pages
// through them with it, one index range scan per batch, like
// RecordedPages.
func (s *Store) SeedURLs(ctx context.Context, crawl string, after []byte, limit int) ([]string, []byte, error) {
	if after == nil {
		after = []byte{}
	}
	var out []string
	var next []byte
	err := s.query(ctx, "seed urls", `SELECT url_hash, url FROM seeds
		WHERE crawl = ? AND url_hash > ? ORDER BY url_hash LIMIT ?`,
		[]any{crawl, after, limit}, func(r *sql.Rows) error {
			var u string
			if err := r.Scan(&next, &u); err != nil {
				return err
			}
			out = append(out, u)
			return nil
		})
	if err != nil {
		return nil, nil, err
	}
	return out, next, nil
}
