package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// itemCols are the columns Insert writes to items.
var itemCols = []string{
	"crawl", "rule", "item", "url", "url_hash", "data", "slave_id", "fetched_at", "event_id", "created_at", "updated_at",
}

// itemNewer is true, in an ON DUPLICATE KEY UPDATE clause, when the incoming
// item (VALUES(...)) is newer than the stored row: a later fetched_at, or
// the same fetched_at and a later stream id. Stream ids ("<ms>-<seq>", at
// most 39 digits a part, after the "<slave>/" of a slave's stream) compare
// as numbers once both parts are padded to 40 digits. An exact redelivery is not newer, so it changes nothing (not
// even updated_at), and the stored row is the newest of all the events
// whatever order they arrive in.
const itemNewer = "(VALUES(fetched_at) > fetched_at OR (VALUES(fetched_at) = fetched_at AND " +
	"(LPAD(SUBSTRING_INDEX(SUBSTRING_INDEX(VALUES(event_id), '/', -1), '-', 1), 40, '0'), LPAD(SUBSTRING_INDEX(VALUES(event_id), '-', -1), 40, '0')) > " +
	"(LPAD(SUBSTRING_INDEX(SUBSTRING_INDEX(event_id, '/', -1), '-', 1), 40, '0'), LPAD(SUBSTRING_INDEX(event_id, '-', -1), 40, '0'))))"

// itemUpsert ends the items INSERT. MySQL evaluates the assignments left to
// right, each seeing the columns the earlier ones set (MariaDB does too,
// unless SIMULTANEOUS_ASSIGNMENT is set, when all see the old row). So
// event_id and fetched_at, which itemNewer reads, come last and event_id
// before fetched_at: once event_id holds the incoming id, itemNewer is
// still true for fetched_at exactly when the incoming fetched_at is later,
// and when it is equal fetched_at needs no change. Either order of
// evaluation gives the same row.
var itemUpsert = func() string {
	var sets []string
	for _, c := range []string{"url", "data", "slave_id", "updated_at", "event_id", "fetched_at"} {
		sets = append(sets, fmt.Sprintf("%s = IF(%s, VALUES(%s), %s)", c, itemNewer, c, c))
	}
	return "ON DUPLICATE KEY UPDATE " + strings.Join(sets, ", ")
}()

func itemRow(id string, x *events.Item, now time.Time) []any {
	return []any{
		chars(x.Crawl, maxCrawl), chars(x.Rule, maxRule), chars(x.Item, maxRule),
		chars(x.URL, maxURL), URLHash(x.URL), itemData(x.Data), chars(x.Slave, maxSlave),
		datetime(x.FetchedAt), id, now, now,
	}
}

// maxJSONDepth is the deepest nesting of arrays and objects that MariaDB's
// JSON_VALID accepts (it rejects 32); MySQL's limit is 100.
const maxJSONDepth = 31

// itemData returns the text to store in items.data for an item's data: the
// data itself when it is JSON that both MariaDB and MySQL accept and at most
// maxItemData bytes; JSON null when it is empty; otherwise a JSON string
// holding the data as text, cut to fit maxItemData. Invalid UTF-8 becomes
// U+FFFD first.
func itemData(raw json.RawMessage) string {
	s := strings.ToValidUTF8(string(raw), "\uFFFD")
	t := strings.Trim(s, " \t\r\n")
	if t == "" {
		return "null"
	}
	if len(t) <= maxItemData && json.Valid([]byte(t)) && dbJSON(t) {
		return t
	}
	return jsonString(s, maxItemData)
}

// jsonString encodes s, valid UTF-8, as a JSON string of at most limit
// bytes, cutting s on a character boundary if need be.
func jsonString(s string, limit int) string {
	n := len(s)
	for {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(text(s, n)) //nolint:errcheck // a string always encodes
		out := strings.TrimSuffix(b.String(), "\n")
		if len(out) <= limit || n == 0 {
			return out
		}
		// Shrink in proportion (escapes make some characters longer than
		// others, so it may take a few rounds); n falls every round.
		n = max(0, min(n-1, int(int64(n)*int64(limit)/int64(len(out)))))
	}
}

// dbJSON reports whether s, which json.Valid accepts, is also accepted by
// MariaDB's JSON_VALID and MySQL's JSON type, which are stricter: nesting
// at most maxJSONDepth deep, no unpaired UTF-16 surrogate escapes, and
// numbers within float64's range.
func dbJSON(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[' || c == '{':
			depth++
			if depth > maxJSONDepth {
				return false
			}
		case c == ']' || c == '}':
			depth--
		case c == '"':
			for i++; s[i] != '"'; i++ {
				if s[i] != '\\' {
					continue
				}
				i++
				if s[i] != 'u' {
					continue
				}
				r := hex4(s[i+1 : i+5])
				i += 4
				if r < 0xD800 || r > 0xDFFF {
					continue
				}
				if r >= 0xDC00 || i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
					return false // a low surrogate first, or a high one alone
				}
				if r2 := hex4(s[i+3 : i+7]); r2 < 0xDC00 || r2 > 0xDFFF {
					return false
				}
				i += 6
			}
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(s) && strings.IndexByte("+-.eE0123456789", s[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(s[i:j], 64); err != nil {
				return false
			}
			i = j - 1
		}
	}
	return true
}

// hex4 parses the four hex digits of a \u escape (-1 if they are not).
func hex4(s string) int {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return -1
	}
	return int(v)
}

// ItemFilter selects the items ExportItems reads.
type ItemFilter struct {
	Crawl string // required, matched exactly
	Rule  string // rule set name, exact match; empty matches any
	Item  string // item rule name, exact match; empty matches any
	// Since, when set, matches only the items stored or updated at or
	// after it (updated_at: the master's clock when the row was written)
	Since time.Time
}

// ItemRow is one stored item: the newest data extracted for one URL by one
// item rule of one rule set.
type ItemRow struct {
	Crawl     string
	Rule      string
	Item      string
	URL       string // cut to 2048 characters
	Data      json.RawMessage
	Slave     string
	FetchedAt time.Time // UTC, millisecond precision
}

// ExportItems calls fn for each item matching f, in insertion order (by
// id), streaming the rows from the server: only the current row is held in
// memory. It stops at the first error of fn and returns it as is. Data is
// the stored JSON text (MySQL returns its JSON type normalised: keys
// sorted, spaces changed).
func (s *Store) ExportItems(ctx context.Context, f ItemFilter, fn func(ItemRow) error) error {
	if f.Crawl == "" {
		return errors.New("export items: no crawl given")
	}
	where := []string{"crawl = ?"}
	args := []any{f.Crawl}
	if f.Rule != "" {
		where = append(where, "rule = ?")
		args = append(args, f.Rule)
	}
	if f.Item != "" {
		where = append(where, "item = ?")
		args = append(args, f.Item)
	}
	if !f.Since.IsZero() {
		where = append(where, "updated_at >= ?")
		args = append(args, f.Since.UTC().Truncate(time.Millisecond))
	}
	q := "SELECT crawl, rule, item, url, data, slave_id, fetched_at FROM items WHERE " +
		strings.Join(where, " AND ") + " ORDER BY id"
	rows, err := s.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("export items of crawl %q: %w", f.Crawl, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ItemRow
		var data []byte
		if err := rows.Scan(&r.Crawl, &r.Rule, &r.Item, &r.URL, &data, &r.Slave, &r.FetchedAt); err != nil {
			return fmt.Errorf("export items of crawl %q: scan: %w", f.Crawl, err)
		}
		r.Data = data
		r.FetchedAt = r.FetchedAt.UTC()
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export items of crawl %q: %w", f.Crawl, err)
	}
	return nil
}
