package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

// jsonEqual compares JSON documents by value: MySQL's JSON type returns
// them normalised (MariaDB keeps the text).
var jsonEqual = cmp.Comparer(func(a, b json.RawMessage) bool { return canonJSON(a) == canonJSON(b) })

// canonJSON re-encodes a JSON document with sorted keys and no spaces.
func canonJSON(b []byte) string {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "invalid JSON: " + string(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + string(b)
	}
	return string(out)
}

// itemRowOf is what ExportItems returns for an item stored as sent.
func itemRowOf(x events.Item) ItemRow {
	return ItemRow{Crawl: x.Crawl, Rule: x.Rule, Item: x.Item, URL: x.URL, Data: x.Data, Slave: x.Slave,
		FetchedAt: time.UnixMilli(x.FetchedAt).UTC()}
}

// storedItem is an items row with its bookkeeping columns.
type storedItem struct {
	ID                   int64
	URL, Data, Slave     string
	EventID              string
	FetchedAt            int64
	Created, Updated     time.Time
	HashOK               bool
	Rule, Item, RawCrawl string
}

func storedItems(t *testing.T, s *Store, crawl string) []storedItem {
	t.Helper()
	out := []storedItem{}
	err := s.query(t.Context(), "items", `SELECT id, crawl, rule, item, url, url_hash, data, slave_id, event_id,
		fetched_at, created_at, updated_at FROM items WHERE crawl = ? ORDER BY id`, []any{crawl},
		func(r *sql.Rows) error {
			var x storedItem
			var hash []byte
			var at time.Time
			if err := r.Scan(&x.ID, &x.RawCrawl, &x.Rule, &x.Item, &x.URL, &hash, &x.Data, &x.Slave, &x.EventID,
				&at, &x.Created, &x.Updated); err != nil {
				return err
			}
			x.FetchedAt = at.UnixMilli()
			x.HashOK = bytes.Equal(hash, URLHash(x.URL))
			out = append(out, x)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestItemsUpsert(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	const u1, u2, u3 = "http://shop.test/p/1", "http://shop.test/p/2", "http://shop.test/p/3"
	ev := func(id, url string, at int64, data, slave string) events.Envelope {
		return events.Envelope{ID: id, Item: &events.Item{Crawl: "u", Rule: "shop", Item: "product", URL: url,
			Data: json.RawMessage(data), Slave: slave, FetchedAt: at}}
	}
	// want is the data, stream id, fetch time and slave of the row per URL.
	type want struct {
		data, event string
		at          int64
		slave       string
	}
	var first []storedItem // the rows after the first step
	for i, step := range []struct {
		name      string
		batch     []events.Envelope
		want      map[string]want
		unchanged bool // no column of any row changes, updated_at included
	}{
		{"first fetch", []events.Envelope{ev("5-1", u1, 1000, `{"v":1}`, "s1")},
			map[string]want{u1: {`{"v":1}`, "5-1", 1000, "s1"}}, false},
		{"redelivered", []events.Envelope{ev("5-1", u1, 1000, `{"v":1}`, "s1")},
			map[string]want{u1: {`{"v":1}`, "5-1", 1000, "s1"}}, true},
		{"re-fetch newer", []events.Envelope{ev("5-2", u1, 2000, `{"v":2}`, "s2")},
			map[string]want{u1: {`{"v":2}`, "5-2", 2000, "s2"}}, false},
		{"older event redelivered late", []events.Envelope{ev("5-1", u1, 1000, `{"v":1}`, "s1")},
			map[string]want{u1: {`{"v":2}`, "5-2", 2000, "s2"}}, true},
		{"older fetch with a later stream id", []events.Envelope{ev("6-1", u1, 1500, `{"v":15}`, "s3")},
			map[string]want{u1: {`{"v":2}`, "5-2", 2000, "s2"}}, true},
		{"newer fetch with an earlier stream id", []events.Envelope{ev("4-9", u1, 3000, `{"v":3}`, "s9")},
			map[string]want{u1: {`{"v":3}`, "4-9", 3000, "s9"}}, false},
		{"same fetch time, later stream id", []events.Envelope{ev("7-1", u1, 3000, `{"v":"7-1"}`, "s1")},
			map[string]want{u1: {`{"v":"7-1"}`, "7-1", 3000, "s1"}}, false},
		{"same fetch time, earlier stream id", []events.Envelope{ev("7-0", u1, 3000, `{"v":"7-0"}`, "s1")},
			map[string]want{u1: {`{"v":"7-1"}`, "7-1", 3000, "s1"}}, true},
		{"stream id sequence compared as a number", []events.Envelope{
			ev("7-9", u1, 3000, `{"v":"7-9"}`, "s1"), ev("7-10", u1, 3000, `{"v":"7-10"}`, "s1")},
			map[string]want{u1: {`{"v":"7-10"}`, "7-10", 3000, "s1"}}, false},
		{"stream id time compared as a number", []events.Envelope{ev("10-0", u1, 3000, `{"v":"10-0"}`, "s1"),
			ev("9-99", u1, 3000, `{"v":"9-99"}`, "s1")},
			map[string]want{u1: {`{"v":"10-0"}`, "10-0", 3000, "s1"}}, false},
		{"newest wins in one batch, either order", []events.Envelope{
			ev("8-2", u2, 5000, `{"v":"new"}`, "s2"), ev("8-1", u2, 4000, `{"v":"old"}`, "s1"),
			ev("8-3", u3, 4000, `{"v":"old"}`, "s1"), ev("8-4", u3, 5000, `{"v":"new"}`, "s2")},
			map[string]want{u1: {`{"v":"10-0"}`, "10-0", 3000, "s1"}, u2: {`{"v":"new"}`, "8-2", 5000, "s2"},
				u3: {`{"v":"new"}`, "8-4", 5000, "s2"}}, false},
		{"whole history redelivered", []events.Envelope{
			ev("5-1", u1, 1000, `{"v":1}`, "s1"), ev("5-2", u1, 2000, `{"v":2}`, "s2"), ev("10-0", u1, 3000, `{"v":"10-0"}`, "s1"),
			ev("8-2", u2, 5000, `{"v":"new"}`, "s2"), ev("8-4", u3, 5000, `{"v":"new"}`, "s2")},
			map[string]want{u1: {`{"v":"10-0"}`, "10-0", 3000, "s1"}, u2: {`{"v":"new"}`, "8-2", 5000, "s2"},
				u3: {`{"v":"new"}`, "8-4", 5000, "s2"}}, true},
	} {
		before := storedItems(t, s, "u")
		time.Sleep(3 * time.Millisecond) // so a rewrite would change updated_at
		if err := s.Insert(ctx, step.batch); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := storedItems(t, s, "u")
		if i == 0 {
			first = after
		}
		got := map[string]want{}
		for _, r := range after {
			got[r.URL] = want{canonJSON([]byte(r.Data)), r.EventID, r.FetchedAt, r.Slave}
			if !r.HashOK {
				t.Errorf("%s: url_hash of %s is not URLHash", step.name, r.URL)
			}
			if r.Updated.Before(r.Created) {
				t.Errorf("%s: %s updated at %v, before its creation at %v", step.name, r.URL, r.Updated, r.Created)
			}
		}
		for u, w := range step.want {
			w.data = canonJSON([]byte(w.data))
			step.want[u] = w
		}
		if d := cmp.Diff(step.want, got, cmp.AllowUnexported(want{})); d != "" {
			t.Errorf("%s: items (-want +got):\n%s", step.name, d)
		}
		if step.unchanged {
			if d := cmp.Diff(before, after); d != "" {
				t.Errorf("%s: rows changed (-before +after):\n%s", step.name, d)
			}
		}
	}
	last := storedItems(t, s, "u")
	if last[0].ID != first[0].ID || !last[0].Created.Equal(first[0].Created) {
		t.Errorf("re-fetched row has id %d created %v, want id %d created %v (updated in place)",
			last[0].ID, last[0].Created, first[0].ID, first[0].Created)
	}
	if !last[0].Updated.After(first[0].Updated) {
		t.Errorf("updated_at %v not after the first fetch's %v", last[0].Updated, first[0].Updated)
	}

	// Another item rule, rule set or crawl is another row for the same URL.
	b := []events.Envelope{
		{ID: "20-1", Item: &events.Item{Crawl: "u", Rule: "shop", Item: "review", URL: u1, Data: json.RawMessage(`{}`)}},
		{ID: "20-2", Item: &events.Item{Crawl: "u", Rule: "SHOP", Item: "product", URL: u1, Data: json.RawMessage(`{}`)}},
		{ID: "20-3", Item: &events.Item{Crawl: "v", Rule: "shop", Item: "product", URL: u1, Data: json.RawMessage(`{}`)}},
	}
	for range 2 {
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]Counts{}
	for _, crawl := range []string{"u", "v"} {
		c, err := s.Counts(ctx, crawl)
		if err != nil {
			t.Fatal(err)
		}
		got[crawl] = c
	}
	if d := cmp.Diff(map[string]Counts{"u": {Items: 5}, "v": {Items: 1}}, got); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
}

func TestItemData(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	big := `"` + strings.Repeat("a", maxItemData) + `"`
	for _, c := range []struct {
		name, in string
		want     string // the stored JSON; "" for a JSON string of the input
	}{
		{"object", `{"a": 1, "b": [true, null, "x"]}`, `{"a": 1, "b": [true, null, "x"]}`},
		{"array", `[1, 2]`, `[1, 2]`},
		{"scalar", `"just text"`, `"just text"`},
		{"spaces around", " \n\t{\"a\":1}\r\n ", `{"a":1}`},
		{"nil", "", "null"},
		{"only spaces", " \n ", "null"},
		{"not json", "hello <b>world</b> & more", ""},
		{"cut json", `{"a":`, ""},
		{"two documents", `{} {}`, ""},
		{"invalid utf-8 in a string", "[\"a\xffb\"]", "[\"a\uFFFDb\"]"},
		{"invalid utf-8 outside", "\xff\xfe-\xff", `"` + "\uFFFD-\uFFFD" + `"`},
		{"control characters", "a\x00b\x01", `"a\u0000b\u0001"`},
		{"nested 31 deep", deep(31), deep(31)},
		{"nested 32 deep", deep(32), ""},
		{"objects 32 deep", strings.Repeat(`{"a":`, 32) + "1" + strings.Repeat("}", 32), ""},
		{"surrogate pair", `"\ud83d\ude00"`, `"\ud83d\ude00"`},
		{"lone high surrogate", `"\ud800"`, ""},
		{"high surrogate then other escape", `"\ud800\u0041"`, ""},
		{"lone low surrogate", `"\udc00x"`, ""},
		{"escaped backslash before u", `"\\ud800"`, `"\\ud800"`},
		{"number out of range", `[1e400]`, ""},
		{"big numbers in range", `[-1.5e308, 123456789012345678901234567890, 1e-400]`, `[-1.5e308, 123456789012345678901234567890, 1e-400]`},
		{"at the size limit", big[:maxItemData-2] + `"`, big[:maxItemData-2] + `"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := itemData(json.RawMessage(c.in))
			want := c.want
			if want == "" {
				b, err := json.Marshal(strings.ToValidUTF8(c.in, "\uFFFD"))
				if err != nil {
					t.Fatal(err)
				}
				want = string(b)
			}
			if canonJSON([]byte(got)) != canonJSON([]byte(want)) {
				t.Errorf("itemData(%.80q) = %.80q, want %.80q", c.in, got, want)
			}
			if !json.Valid([]byte(got)) || !dbJSON(got) || len(got) > maxItemData {
				t.Errorf("itemData(%.80q) = %.80q: not JSON the database takes", c.in, got)
			}
		})
	}
}

func TestItemDataTooLarge(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     string
		prefix string
	}{
		{"valid but too large", `"` + strings.Repeat("a", maxItemData) + `"`, `"\"aaaa`},
		{"invalid and too large", strings.Repeat("é", maxItemData), `"éé`},
		{"escapes that grow", strings.Repeat("\x01", maxItemData), `"\u0001\u0001`},
		{"invalid bytes that grow", strings.Repeat("\xff\x02", maxItemData/2), `"` + "\uFFFD\\u0002"},
		{"heavy escapes first", strings.Repeat("\x01", maxItemData/4) + strings.Repeat("a", maxItemData), `"\u0001`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := itemData(json.RawMessage(c.in))
			if len(got) > maxItemData || len(got) < maxItemData/8 {
				t.Errorf("itemData: %d bytes, want at most %d and not much less", len(got), maxItemData)
			}
			var str string
			if err := json.Unmarshal([]byte(got), &str); err != nil {
				t.Errorf("itemData: not a JSON string: %v", err)
			}
			if !strings.HasPrefix(got, c.prefix) {
				t.Errorf("itemData = %.40q…, want prefix %q", got, c.prefix)
			}
		})
	}
}

// TestItemDataStored stores awkward data and reads it back: the server
// accepts every row (in strict mode, without IGNORE) and holds valid JSON.
func TestItemDataStored(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	ins := []string{
		`{"title": "Tea ☕", "n": 1}`, "", "not json", `{"a":`, "[\"a\xffb\"]", "\xff",
		strings.Repeat("[", 32) + strings.Repeat("]", 32), `"\ud800"`, `[1e400]`, `"\ud83d\ude00"`,
		`"` + strings.Repeat("x", maxItemData) + `"`, strings.Repeat("\x01", maxItemData),
	}
	var b []events.Envelope
	var want []ItemRow
	for i, in := range ins {
		x := events.Item{Crawl: "d", Rule: "r", Item: "i", URL: fmt.Sprintf("http://d.test/%d", i), Data: json.RawMessage(in)}
		b = append(b, events.Envelope{ID: fmt.Sprintf("1-%d", i), Item: &x})
		r := itemRowOf(x)
		r.Data = json.RawMessage(itemData(x.Data))
		want = append(want, r)
	}
	strictInsert(t, s, b)
	if err := s.Insert(ctx, b); err != nil { // the same through Insert: a no-op redelivery
		t.Fatal(err)
	}
	got := read(t, s, "d").Items
	if d := cmp.Diff(want, got, jsonEqual); d != "" {
		t.Errorf("items (-want +got):\n%s", d)
	}
	var invalid int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM items WHERE NOT JSON_VALID(data)").Scan(&invalid); err != nil {
		t.Fatal(err)
	}
	if invalid != 0 {
		t.Errorf("%d rows with invalid JSON", invalid)
	}
	var kinds []string
	err := s.query(ctx, "json types", "SELECT JSON_TYPE(data) FROM items WHERE crawl = 'd' ORDER BY id", nil,
		func(r *sql.Rows) error {
			var k string
			if err := r.Scan(&k); err != nil {
				return err
			}
			kinds = append(kinds, k)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	wantKinds := []string{"OBJECT", "NULL", "STRING", "STRING", "ARRAY", "STRING", "STRING", "STRING", "STRING",
		"STRING", "STRING", "STRING"}
	if d := cmp.Diff(wantKinds, kinds); d != "" {
		t.Errorf("JSON types (-want +got):\n%s", d)
	}
}

func TestExportItems(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	mk := func(crawl, rule, item, url string, at int64) events.Item {
		return events.Item{Crawl: crawl, Rule: rule, Item: item, URL: url, Slave: "s1", FetchedAt: at,
			Data: json.RawMessage(fmt.Sprintf(`{"url":%q,"at":%d}`, url, at))}
	}
	xs := []events.Item{
		mk("x", "r1", "a", "http://x.test/1", 1),
		mk("x", "r1", "b", "http://x.test/1", 2),
		mk("x", "r2", "a", "http://x.test/2", 3),
		mk("y", "r1", "a", "http://y.test/1", 4),
		mk("x", "r1", "a", "http://x.test/3", 5),
		mk("x", "r1", "a", "http://x.test/1", 6), // a re-fetch of the first: updated in place, keeps its order
	}
	var b []events.Envelope
	for i := range xs {
		b = append(b, events.Envelope{ID: fmt.Sprintf("3-%d", i), Item: &xs[i]})
	}
	for _, part := range [][]events.Envelope{b[:5], b[5:]} {
		if err := s.Insert(ctx, part); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(is ...int) []ItemRow {
		out := []ItemRow{}
		for _, i := range is {
			out = append(out, itemRowOf(xs[i]))
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    ItemFilter
		want []ItemRow
	}{
		{"crawl", ItemFilter{Crawl: "x"}, rows(5, 1, 2, 4)},
		{"rule", ItemFilter{Crawl: "x", Rule: "r1"}, rows(5, 1, 4)},
		{"item", ItemFilter{Crawl: "x", Item: "a"}, rows(5, 2, 4)},
		{"rule and item", ItemFilter{Crawl: "x", Rule: "r1", Item: "a"}, rows(5, 4)},
		{"other crawl", ItemFilter{Crawl: "y"}, rows(3)},
		{"unknown rule", ItemFilter{Crawl: "x", Rule: "nope"}, rows()},
		{"case matters", ItemFilter{Crawl: "x", Rule: "R1"}, rows()},
		{"unknown crawl", ItemFilter{Crawl: "nope"}, rows()},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := []ItemRow{}
			err := s.ExportItems(ctx, c.f, func(r ItemRow) error {
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got, jsonEqual); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}

	t.Run("callback error stops", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		err := s.ExportItems(ctx, ItemFilter{Crawl: "x"}, func(ItemRow) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		})
		if err != stop || n != 2 {
			t.Errorf("ExportItems = %v after %d rows, want the callback's error after 2", err, n)
		}
	})
	t.Run("no crawl", func(t *testing.T) {
		err := s.ExportItems(ctx, ItemFilter{Rule: "r1"}, func(ItemRow) error { return nil })
		if err == nil || !strings.HasPrefix(err.Error(), "export items: ") {
			t.Errorf("ExportItems without a crawl = %v, want an error", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := s.ExportItems(cctx, ItemFilter{Crawl: "x"}, func(ItemRow) error { return nil })
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), `export items of crawl "x": `) {
			t.Errorf("ExportItems with a canceled context = %v", err)
		}
	})
}

// TestExportItemsStreams reads many items while the callback uses the
// store: rows arrive one at a time on their own connection.
func TestExportItemsStreams(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	const n = 3000
	var b []events.Envelope
	for i := range n {
		b = append(b, events.Envelope{ID: fmt.Sprintf("1-%d", i), Item: &events.Item{Crawl: "big", Rule: "r", Item: "i",
			URL: fmt.Sprintf("http://big.test/%d", i), Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), FetchedAt: int64(i)}})
	}
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	var urls []string
	err := s.ExportItems(ctx, ItemFilter{Crawl: "big"}, func(r ItemRow) error {
		if len(urls)%1000 == 0 { // another query while the export is open
			if _, err := s.Counts(ctx, "big"); err != nil {
				return err
			}
		}
		urls = append(urls, r.URL)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("http://big.test/%d", i)
	}
	if d := cmp.Diff(want, urls); d != "" {
		t.Errorf("urls (-want +got):\n%s", d)
	}
}

// TestMigrateItemsKeepsRows upgrades a database with rows from version 2:
// the rows stay with the new columns at their defaults, the items table
// arrives with its keys, and Down returns to version 2 keeping the rows.
func TestMigrateItemsKeepsRows(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	p, err := s.provider()
	if err != nil {
		t.Fatal(err)
	}
	columns := func(table string) []string {
		t.Helper()
		var cols []string
		err := s.query(ctx, "columns", `SELECT column_name FROM information_schema.columns
			WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position`, []any{table},
			func(r *sql.Rows) error {
				var c string
				if err := r.Scan(&c); err != nil {
					return err
				}
				cols = append(cols, c)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return cols
	}
	v2 := map[string][]string{
		"pages": {"id", "crawl", "event_id", "url", "url_hash", "final_url", "status", "content_type", "bytes",
			"depth", "attempt", "links", "duration_ms", "fetched_at", "slave_id", "content_hash",
			"charset", "warc", "proxy", "handler", "checksum"},
		"heartbeats": {"id", "crawl", "event_id", "slave_id", "host", "pid", "at", "started_at", "pages", "errors",
			"in_flight", "bytes", "rss", "pages_per_sec", "concurrency", "state"},
		"exceptions": {"id", "crawl", "event_id", "kind", "url", "host", "slave_id", "attempt", "status", "message", "at"},
	}
	v3 := map[string][]string{
		"pages":      append(slices.Clone(v2["pages"]), "rendered", "rule"),
		"heartbeats": append(slices.Clone(v2["heartbeats"]), "render", "rules_version"),
		"exceptions": append(slices.Clone(v2["exceptions"]), "snapshot"),
		"items": {"id", "crawl", "rule", "item", "url", "url_hash", "data", "slave_id", "fetched_at", "event_id",
			"created_at", "updated_at"},
	}
	// the latest version: 00006_robots_meta.sql adds two pages columns,
	// 00007_recrawl.sql one
	latest := maps.Clone(v3)
	latest["pages"] = append(slices.Clone(v3["pages"]), "robots", "canonical", "revisit")
	check := func(when string, want map[string][]string) {
		t.Helper()
		got := map[string][]string{}
		for tb := range v3 {
			if cols := columns(tb); cols != nil {
				got[tb] = cols
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("columns %s (-want +got):\n%s", when, d)
		}
	}

	if _, err := p.DownTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	check("at version 2", v2)
	for _, q := range []string{
		`INSERT INTO pages (crawl, event_id, url, url_hash, status, fetched_at, content_hash, charset)
			VALUES ('old', '1-1', 'http://a.test/', UNHEX(LEFT(SHA2('http://a.test/', 256), 16)), 200, '1970-01-01 00:00:01', 'h', 'utf-8')`,
		`INSERT INTO heartbeats (crawl, event_id, slave_id, at, started_at, state)
			VALUES ('old', '1-2', 's1', '1970-01-01 00:00:02', '1970-01-01 00:00:01', 'running')`,
		`INSERT INTO exceptions (crawl, event_id, kind, message, at) VALUES ('old', '1-3', 'dns', 'm', '1970-01-01 00:00:03')`,
	} {
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	wantOld := snapshot{
		Pages:      []events.Page{{Crawl: "old", URL: "http://a.test/", Status: 200, FetchedAt: 1000, ContentHash: "h", Charset: "utf-8"}},
		Heartbeats: []events.Heartbeat{{Crawl: "old", Slave: "s1", At: 2000, StartedAt: 1000, State: "running"}},
		Exceptions: []events.Exception{{Crawl: "old", Kind: events.KindDNS, Message: "m", At: 3000}},
		Slaves:     []events.Slave{}, Lost: []events.Lost{}, Proxies: []events.Proxy{}, Duplicates: []events.Duplicate{},
		Items: []ItemRow{}, URLs: map[string]int{"http://a.test/": 1},
		Counts: Counts{Pages: 1, Heartbeats: 1, Exceptions: 1},
	}

	for round := range 2 {
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("round %d: up: %v", round, err)
		}
		check(fmt.Sprintf("round %d: after up", round), latest)
		if d := cmp.Diff(wantOld, read(t, s, "old"), jsonEqual); d != "" {
			t.Errorf("round %d: old rows after up (-want +got):\n%s", round, d)
		}
		// The old rows keep their event ids: redeliveries are still ignored;
		// new events use the new columns and table.
		b := []events.Envelope{
			{ID: "1-1", Page: &events.Page{Crawl: "old", URL: "http://a.test/", Rendered: true}},
			{ID: "1-2", Heartbeat: &events.Heartbeat{Crawl: "old", Slave: "s1", Render: true}},
			{ID: "1-3", Exception: &events.Exception{Crawl: "old", Kind: events.KindRender, Snapshot: "x.html"}},
			{ID: "2-1", Item: &events.Item{Crawl: "new", Rule: "r", Item: "i", URL: "http://a.test/", Data: json.RawMessage(`{}`)}},
		}
		if err := s.Insert(ctx, b); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if d := cmp.Diff(wantOld, read(t, s, "old"), jsonEqual); d != "" {
			t.Errorf("round %d: old rows after redelivery (-want +got):\n%s", round, d)
		}
		if c, _ := s.Counts(ctx, "new"); c != (Counts{Items: 1}) {
			t.Errorf("round %d: counts of the new crawl %+v, want 1 item", round, c)
		}

		var keys []string
		err := s.query(ctx, "indexes", `SELECT DISTINCT index_name FROM information_schema.statistics
			WHERE table_schema = DATABASE() AND table_name = 'items'`, nil,
			func(r *sql.Rows) error {
				var k string
				if err := r.Scan(&k); err != nil {
					return err
				}
				keys = append(keys, k)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		if d := cmp.Diff([]string{"PRIMARY", "ix_items_fetched", "uk_items_url"}, keys); d != "" {
			t.Errorf("round %d: indexes of items (-want +got):\n%s", round, d)
		}
		// data takes only JSON (MariaDB: a JSON_VALID check; MySQL: the JSON type).
		if _, err := s.DB.ExecContext(ctx, `INSERT INTO items (crawl, rule, item, url, url_hash, data, fetched_at,
			event_id, created_at, updated_at) VALUES ('bad', 'r', 'i', 'u', 'hhhhhhhh', '{"a":', NOW(), '1-1', NOW(), NOW())`); err == nil {
			t.Errorf("round %d: items.data took invalid JSON", round)
		}

		if _, err := p.DownTo(ctx, 2); err != nil {
			t.Fatalf("round %d: down: %v", round, err)
		}
		check(fmt.Sprintf("round %d: after down", round), v2)
		var n int
		if err := s.DB.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM pages) + (SELECT COUNT(*) FROM heartbeats) + "+
			"(SELECT COUNT(*) FROM exceptions)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("round %d: %d old rows after down, want 3", round, n)
		}
	}
}
