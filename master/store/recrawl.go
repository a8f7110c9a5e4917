package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Incremental recrawls (00007_recrawl.sql): every page event updates its
// URL's page_validators row, which a recrawl reads back (RecordedPages),
// and the pages of a recrawl run are counted by pages.revisit
// (RecrawlCounts).

// validatorCols are page_validators' columns as Insert writes them.
var validatorCols = []string{"crawl", "url_hash", "url", "depth", "etag", "last_modified", "checksum", "fetched_at"}

// validatorUpsert ends the page_validators INSERT: the latest fetch's
// validators win, whatever the order events are stored in (a redelivered
// or late event changes nothing); url and depth stay the first fetch's.
// fetched_at comes last, since MySQL evaluates the assignments left to
// right, each seeing the columns the earlier ones set.
var validatorUpsert = func() string {
	const newer = "VALUES(fetched_at) >= fetched_at"
	var sets []string
	for _, c := range []string{"etag", "last_modified", "checksum"} {
		sets = append(sets, fmt.Sprintf("%s = IF(%s, VALUES(%s), %s)", c, newer, c, c))
	}
	sets = append(sets, "fetched_at = GREATEST(fetched_at, VALUES(fetched_at))")
	return "ON DUPLICATE KEY UPDATE " + strings.Join(sets, ", ")
}()

func validatorRow(p *events.Page) []any {
	return []any{
		chars(p.Crawl, maxCrawl), URLHash(p.URL), chars(p.URL, maxURL), integer(p.Depth),
		chars(p.ETag, maxETag), chars(lastModified(p), maxLastMod), chars(p.Checksum, maxChecksum),
		datetime(p.FetchedAt),
	}
}

// lastModified is the Last-Modified a recrawl sends for a page: the
// server's, else the <lastmod> of the sitemap that listed it (as an HTTP
// date), so a sitemap's lastmod is used by recrawls even when the server
// sends no Last-Modified of its own.
func lastModified(p *events.Page) string {
	if p.LastModified != "" || p.LastMod <= 0 {
		return p.LastModified
	}
	return time.Unix(p.LastMod, 0).UTC().Format(http.TimeFormat)
}

// RecordedPage is a page the crawl recorded, with what its last fetch
// learned (page_validators).
type RecordedPage struct {
	URL          string
	URLHash      []byte
	Depth        int
	ETag         string
	LastModified string
	Checksum     string
}

// RecordedPages returns the recorded pages of a crawl among the first
// limit whose url_hash is after the given one (nil: from the first), in
// url_hash order, and the last url_hash read (nil when none was): a
// recrawl pages through them with it, one index range scan per batch,
// whatever the crawl's size. A URL cut to its column size is left out (it
// could not be fetched as recorded).
func (s *Store) RecordedPages(ctx context.Context, crawl string, after []byte, limit int) ([]RecordedPage, []byte, error) {
	if after == nil {
		after = []byte{}
	}
	var out []RecordedPage
	var next []byte
	err := s.query(ctx, "recorded pages", `SELECT url_hash, url, depth, etag, last_modified, checksum
		FROM page_validators WHERE crawl = ? AND url_hash > ? ORDER BY url_hash LIMIT ?`,
		[]any{crawl, after, limit}, func(r *sql.Rows) error {
			var p RecordedPage
			if err := r.Scan(&p.URLHash, &p.URL, &p.Depth, &p.ETag, &p.LastModified, &p.Checksum); err != nil {
				return err
			}
			next = p.URLHash
			if bytes.Equal(URLHash(p.URL), p.URLHash) {
				out = append(out, p)
			}
			return nil
		})
	if err != nil {
		return nil, nil, err
	}
	return out, next, nil
}

// RecrawlCounts are the pages a recrawl run fetched, by how it found them.
type RecrawlCounts struct {
	Unchanged int64 `json:"unchanged"`
	Changed   int64 `json:"changed"`
	New       int64 `json:"new"`
}

// RecrawlCounts counts the pages of a crawl fetched since a recrawl run
// started, by pages.revisit: unchanged, changed, and new (fetched without
// a recrawl's validators).
func (s *Store) RecrawlCounts(ctx context.Context, crawl string, since time.Time) (RecrawlCounts, error) {
	var c RecrawlCounts
	err := s.query(ctx, "recrawl counts", `SELECT revisit, COUNT(*) FROM pages
		WHERE crawl = ? AND fetched_at >= ? GROUP BY revisit`,
		[]any{crawl, since.UTC()}, func(r *sql.Rows) error {
			var kind string
			var n int64
			if err := r.Scan(&kind, &n); err != nil {
				return err
			}
			switch kind {
			case events.RevisitUnchanged:
				c.Unchanged += n
			case events.RevisitChanged:
				c.Changed += n
			default:
				c.New += n
			}
			return nil
		})
	return c, err
}
