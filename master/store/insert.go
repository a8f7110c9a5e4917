package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Statement size limits for the multi-row inserts: well under the 65,535
// placeholders of a prepared statement and MariaDB's default 16 MiB
// max_allowed_packet.
const (
	maxRowsPerStmt  = 1000
	maxBytesPerStmt = 4 << 20
)

// Insert writes a batch of events in one transaction, with one or more
// multi-row INSERT IGNORE statements per table. Rows are keyed by (crawl,
// stream id), so a batch redelivered after a crash between the commit and
// the stream ack inserts nothing twice. An empty batch is a no-op.
//
// Items are the exception: items holds one row per (crawl, rule, item, URL),
// and an item event updates that row when it is newer than the one stored
// (see itemUpsert), so a re-fetch replaces the data and a redelivered or
// older event changes nothing. Item data that is not JSON the database
// accepts is stored as a JSON string (itemData).
//
// Each envelope is stored by whichever record pointers it has set (Type is
// not consulted); an envelope with none is skipped. The crawl column comes
// from the record's Crawl field. Over-long strings are cut to their column
// size, invalid UTF-8 is replaced, out-of-range numbers and times are
// clamped and NaN/Inf become 0, so bad data never fails the batch (which the
// sink would otherwise retry forever). The only input errors are envelope
// ids that are not stream ids ("<ms>-<seq>", or "<tag>/<ms>-<seq>":
// validEventID), since cutting an id would merge distinct events.
func (s *Store) Insert(ctx context.Context, batch []events.Envelope) error {
	ts, err := buildTables(batch)
	if err != nil {
		return err
	}
	if ts.empty() {
		return nil
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		// Always the same table order, so concurrent writers lock alike.
		for _, t := range ts.all() {
			if err := t.exec(ctx, tx, "INSERT IGNORE"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	return nil
}

// buildTables turns a batch into sanitised rows per table.
func buildTables(batch []events.Envelope) (*tables, error) {
	ts := newTables()
	now := datetime(time.Now().UnixMilli())
	for i := range batch {
		e := &batch[i]
		if !validEventID(e.ID) {
			return nil, fmt.Errorf("insert events: envelope %d: invalid stream id %q", i, e.ID)
		}
		if p := e.Page; p != nil {
			ts.pages.add(pageRow(e.ID, p))
			ts.validators.add(validatorRow(p))
		}
		if x := e.Exception; x != nil {
			ts.exceptions.add(exceptionRow(e.ID, x))
		}
		if x := e.Slave; x != nil {
			ts.slaves.add(slaveRow(e.ID, x))
		}
		if x := e.Heartbeat; x != nil {
			ts.heartbeats.add(heartbeatRow(e.ID, x))
		}
		if x := e.Lost; x != nil {
			ts.lost.add(lostRow(e.ID, x))
		}
		if x := e.Proxy; x != nil {
			ts.proxies.add(proxyRow(e.ID, x))
		}
		if x := e.Duplicate; x != nil {
			ts.duplicates.add(duplicateRow(e.ID, x))
		}
		if x := e.Item; x != nil {
			ts.items.add(itemRow(e.ID, x, now))
		}
	}
	return ts, nil
}

// validEventID reports whether id looks like an event id: a Redis stream
// id "<ms>-<seq>", after a tag naming its stream when the crawl has
// several: "<tag>/<ms>-<seq>" (validTag), at most maxEventID long.
func validEventID(id string) bool {
	if id == "" || len(id) > maxEventID {
		return false
	}
	// an event of another stream than the crawl's: its name first
	// (00005_stream_tags.sql)
	if tag, rest, ok := strings.Cut(id, "/"); ok {
		if !validTag(tag) {
			return false
		}
		id = rest
	}
	ms, seq, ok := strings.Cut(id, "-")
	// each part a uint64: at most 20 digits
	return ok && digits(ms) && digits(seq) && len(ms) <= 20 && len(seq) <= 20
}

// validTag: a stream's tag, a slave id (1 to 64 of A-Z a-z 0-9 _ . -), a
// shard ("~" and 1 to 4 digits: a sharded crawl's shard k) or both, slave
// first: "s1", "~3", "s1~3". Two shards' streams hand out the same ids, as
// two slaves' do; the tag keeps their events apart.
func validTag(s string) bool {
	slave, shard, sharded := strings.Cut(s, "~")
	if sharded && (len(shard) > 4 || !digits(shard)) {
		return false
	}
	if slave == "" && !sharded || len(slave) > 64 {
		return false
	}
	for i := 0; i < len(slave); i++ {
		c := slave[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// URLHash is the pages.url_hash (and duplicates.url_hash) of url: the first 8 bytes of its SHA-256,
// over the full URL even when the stored url is cut to 2048 characters. In
// SQL, UNHEX(LEFT(SHA2(url, 256), 16)) gives the same for a stored URL that
// was not cut.
func URLHash(url string) []byte {
	h := sha256.Sum256([]byte(url))
	return h[:8]
}

func pageRow(id string, p *events.Page) []any {
	return []any{
		chars(p.Crawl, maxCrawl), id,
		chars(p.URL, maxURL), URLHash(p.URL), chars(p.FinalURL, maxURL),
		smallint(p.Status), chars(p.ContentType, maxContentType), p.Bytes,
		integer(p.Depth), integer(p.Attempt), integer(p.Links), integer64(p.DurationMS),
		datetime(p.FetchedAt), chars(p.Slave, maxSlave), chars(p.ContentHash, maxContentHash),
		chars(p.Charset, maxCharset), chars(p.WARC, maxWARC), chars(p.Proxy, maxProxy),
		chars(p.Handler, maxHandler), chars(p.Checksum, maxChecksum),
		p.Rendered, chars(p.RuleSet, maxRule),
		chars(p.Robots, maxRobots), chars(p.Canonical, maxURL), chars(p.Revisit, maxRevisit),
	}
}

func exceptionRow(id string, x *events.Exception) []any {
	return []any{
		chars(x.Crawl, maxCrawl), id,
		chars(x.Kind, maxKind), chars(x.URL, maxURL), chars(x.Host, maxHost),
		chars(x.Slave, maxSlave), integer(x.Attempt), smallint(x.Status),
		text(x.Message, maxTextBytes), datetime(x.At), chars(x.Snapshot, maxSnapshot),
	}
}

func slaveRow(id string, x *events.Slave) []any {
	return []any{
		chars(x.Crawl, maxCrawl), id,
		chars(x.Slave, maxSlave), chars(x.Kind, maxSlaveKind), chars(x.Host, maxHost),
		datetime(x.At), text(x.Detail, maxTextBytes),
	}
}

func heartbeatRow(id string, x *events.Heartbeat) []any {
	return []any{
		chars(x.Crawl, maxCrawl), id,
		chars(x.Slave, maxSlave), chars(x.Host, maxHost), integer(x.PID),
		datetime(x.At), datetime(x.StartedAt),
		x.Pages, x.Errors, x.InFlight, x.Bytes, x.RSS, finite(x.PagesPerSec),
		integer(x.Concurrency), chars(x.State, maxState),
		x.Render, chars(x.RulesVersion, maxRulesVer),
	}
}

func lostRow(id string, x *events.Lost) []any {
	return []any{
		chars(x.Crawl, maxCrawl), id,
		chars(x.URL, maxURL), chars(x.Slave, maxSlave),
		datetime(x.LeasedAt), datetime(x.DetectedAt),
		integer(x.Attempt), chars(x.Reason, maxReason),
	}
}

func proxyRow(id string, x *events.Proxy) []any {
	return []any{
		chars(x.Crawl, maxCrawl), id,
		chars(x.Slave, maxSlave), chars(x.Proxy, maxProxy), chars(x.State, maxProxyState),
		text(x.Reason, maxTextBytes), integer(x.Errors), integer(x.Uses), datetime(x.At),
	}
}

func duplicateRow(id string, x *events.Duplicate) []any {
	return []any{
		chars(x.Crawl, maxCrawl), id,
		chars(x.URL, maxURL), URLHash(x.URL), chars(x.FirstURL, maxURL),
		chars(x.ContentHash, maxChecksum), chars(x.Slave, maxSlave), datetime(x.At),
	}
}

// tables collects one batch's rows per table.
type tables struct {
	pages, exceptions, slaves, heartbeats, lost, proxies, duplicates, items, validators *table
}

func newTables() *tables {
	return &tables{
		pages: &table{name: "pages", cols: []string{
			"crawl", "event_id", "url", "url_hash", "final_url", "status", "content_type", "bytes",
			"depth", "attempt", "links", "duration_ms", "fetched_at", "slave_id", "content_hash",
			"charset", "warc", "proxy", "handler", "checksum", "rendered", "rule",
			"robots", "canonical", "revisit"}},
		exceptions: &table{name: "exceptions", cols: []string{
			"crawl", "event_id", "kind", "url", "host", "slave_id", "attempt", "status", "message", "at", "snapshot"}},
		slaves: &table{name: "slave_events", cols: []string{
			"crawl", "event_id", "slave_id", "kind", "host", "at", "detail"}},
		heartbeats: &table{name: "heartbeats", cols: []string{
			"crawl", "event_id", "slave_id", "host", "pid", "at", "started_at",
			"pages", "errors", "in_flight", "bytes", "rss", "pages_per_sec", "concurrency", "state",
			"render", "rules_version"}},
		lost: &table{name: "lost_tasks", cols: []string{
			"crawl", "event_id", "url", "slave_id", "leased_at", "detected_at", "attempt", "reason"}},
		proxies: &table{name: "proxy_events", cols: []string{
			"crawl", "event_id", "slave_id", "proxy", "state", "reason", "errors", "uses", "at"}},
		duplicates: &table{name: "duplicates", cols: []string{
			"crawl", "event_id", "url", "url_hash", "first_url", "content_hash", "slave_id", "at"}},
		items:      &table{name: "items", cols: itemCols, suffix: itemUpsert},
		validators: &table{name: "page_validators", cols: validatorCols, suffix: validatorUpsert},
	}
}

func (ts *tables) all() []*table {
	return []*table{ts.pages, ts.exceptions, ts.slaves, ts.heartbeats, ts.lost, ts.proxies, ts.duplicates, ts.items, ts.validators}
}

func (ts *tables) empty() bool {
	for _, t := range ts.all() {
		if len(t.rows) > 0 {
			return false
		}
	}
	return true
}

// table is the pending rows of one table.
type table struct {
	name   string
	cols   []string
	suffix string // appended to each INSERT, e.g. an ON DUPLICATE KEY UPDATE clause
	rows   [][]any
}

func (t *table) add(row []any) {
	if len(row) != len(t.cols) {
		panic(fmt.Sprintf("store: %s row has %d values for %d columns", t.name, len(row), len(t.cols)))
	}
	t.rows = append(t.rows, row)
}

// exec inserts the rows in as few statements as the size limits allow;
// verb is "INSERT IGNORE" (or "INSERT" in tests, to prove the rows need no
// server-side adjustment).
func (t *table) exec(ctx context.Context, tx *sql.Tx, verb string) error {
	maxRows := min(maxRowsPerStmt, 65535/len(t.cols))
	for start := 0; start < len(t.rows); {
		end, size := start, 0
		for end < len(t.rows) && end-start < maxRows {
			n := rowSize(t.rows[end])
			if end > start && size+n > maxBytesPerStmt {
				break
			}
			size += n
			end++
		}
		if err := t.insert(ctx, tx, verb, t.rows[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func (t *table) insert(ctx context.Context, tx *sql.Tx, verb string, rows [][]any) error {
	var q strings.Builder
	q.WriteString(verb)
	q.WriteString(" INTO ")
	q.WriteString(t.name)
	q.WriteString(" (")
	q.WriteString(strings.Join(t.cols, ", "))
	q.WriteString(") VALUES ")
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.cols)), ", ") + ")"
	args := make([]any, 0, len(rows)*len(t.cols))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(tuple)
		args = append(args, r...)
	}
	if t.suffix != "" {
		q.WriteString(" ")
		q.WriteString(t.suffix)
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("%d rows into %s: %w", len(rows), t.name, err)
	}
	return nil
}

// rowSize estimates a row's bytes on the wire.
func rowSize(row []any) int {
	n := 0
	for _, v := range row {
		switch v := v.(type) {
		case string:
			n += len(v) + 4
		case []byte:
			n += len(v) + 4
		default:
			n += 12
		}
	}
	return n
}
