package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
)

// wantTables is every table a fully migrated database has.
var wantTables = []string{"api_tokens", "duplicates", "exceptions", "goose_db_version", "heartbeats", "items", "lost_tasks",
	"page_validators", "pages", "proxy_events", "schedule_runs", "seeds", "slave_events"}

// open returns a migrated store on a fresh database.
func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// missingDSN returns a DSN naming a database that does not exist yet (and
// is dropped when the test ends), plus an admin pool on the server.
func missingDSN(t *testing.T, suffix string) (string, *sql.DB) {
	t.Helper()
	cfg, err := mysql.ParseDSN(storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.DBName + "_" + suffix
	admin := adminDB(t, cfg)
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + quoteIdent(name)); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN(), admin
}

// adminDB opens a pool on cfg's server without a database.
func adminDB(t *testing.T, cfg *mysql.Config) *sql.DB {
	t.Helper()
	c := cfg.Clone()
	c.DBName = ""
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// tableNames lists the tables of the store's database.
func tableNames(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.DB.QueryContext(t.Context(),
		"SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// in Go's order: information_schema sorts by its own collation
	// ("pages" before "page_validators")
	slices.Sort(out)
	return out
}

// versions returns the database's goose version and the newest embedded one.
func versions(t *testing.T, s *Store) (db, latest int64) {
	t.Helper()
	p, err := s.provider()
	if err != nil {
		t.Fatal(err)
	}
	db, err = p.GetDBVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	src := p.ListSources()
	if len(src) == 0 {
		t.Fatal("no embedded migrations")
	}
	return db, src[len(src)-1].Version
}

func TestOpenCreatesAndMigrates(t *testing.T) {
	ctx := t.Context()
	dsn, admin := missingDSN(t, "new")
	cfg, _ := mysql.ParseDSN(dsn)

	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var charset string
	if err := admin.QueryRowContext(ctx,
		"SELECT default_character_set_name FROM information_schema.schemata WHERE schema_name = ?", cfg.DBName,
	).Scan(&charset); err != nil {
		t.Fatalf("database not created: %v", err)
	}
	if charset != "utf8mb4" {
		t.Errorf("database charset %q, want utf8mb4", charset)
	}
	if d := cmp.Diff(wantTables, tableNames(t, s)); d != "" {
		t.Errorf("tables (-want +got):\n%s", d)
	}
	v1, latest := versions(t, s)
	if v1 != latest {
		t.Errorf("version %d after Open, want %d", v1, latest)
	}
	batch := []events.Envelope{{ID: "1-0", Page: &events.Page{Crawl: "c", URL: "http://a.test/"}}}
	if err := s.Insert(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A second Open finds everything in place and keeps the data.
	s2, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	defer s2.Close()
	if v2, _ := versions(t, s2); v2 != v1 {
		t.Errorf("version %d after second Open, want %d", v2, v1)
	}
	c, err := s2.Counts(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.Pages != 1 {
		t.Errorf("pages after reopen = %d, want 1", c.Pages)
	}
}

func TestOpenConcurrent(t *testing.T) {
	ctx := t.Context()
	dsn, _ := missingDSN(t, "conc")
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	s := stores[0]
	v, latest := versions(t, s)
	if v != latest {
		t.Errorf("version %d, want %d", v, latest)
	}
	// Each migration applied once: one goose row per version plus version 0.
	var rows int64
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM goose_db_version").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	p, _ := s.provider()
	if want := int64(len(p.ListSources()) + 1); rows != want {
		t.Errorf("goose_db_version has %d rows, want %d", rows, want)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	base, err := mysql.ParseDSN(storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := adminDB(t, base)

	// A user who may log in but not create databases.
	user := base.DBName + "_u"
	account := "'" + user + "'@'%'" // user is [a-z0-9_]: safe to quote so
	if _, err := admin.ExecContext(ctx, "CREATE USER "+account+" IDENTIFIED BY 'pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP USER IF EXISTS " + account) })
	noRight := base.Clone()
	noRight.User, noRight.Passwd = user, "pw"
	// Without any right on a database, connecting to it is refused (1044)
	// before the server says it is missing; a grant on the missing database
	// gets the user to "unknown database" and so to CREATE DATABASE.
	if _, err := admin.ExecContext(ctx, "GRANT SELECT ON "+quoteIdent(base.DBName+"_nope")+".* TO "+account); err != nil {
		t.Fatal(err)
	}
	noRight.DBName = base.DBName + "_nope"

	unreachable := base.Clone()
	unreachable.Addr = "127.0.0.1:1"
	unreachable.Timeout = time.Second

	for _, c := range []struct {
		name, dsn, want string
	}{
		{"bad dsn", "root@tcp(127.0.0.1:3306", "parse dsn"},
		{"no database", "root@tcp(127.0.0.1:3306)/", "no database name"},
		{"unreachable", unreachable.FormatDSN(), "open store: connect to 127.0.0.1:1/"},
		{"no create right", noRight.FormatDSN(), "may not create it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(ctx, c.dsn)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "open store: ") {
				t.Errorf("error %q lacks the operation", err)
			}
		})
	}
}

// snapshot is everything stored for one crawl.
type snapshot struct {
	Pages      []events.Page
	Exceptions []events.Exception
	Slaves     []events.Slave
	Heartbeats []events.Heartbeat
	Lost       []events.Lost
	Proxies    []events.Proxy
	Duplicates []events.Duplicate
	Items      []ItemRow
	URLs       map[string]int
	Counts     Counts
}

// read reads back a crawl through the public readers, plus pages and
// heartbeats, which have none.
func read(t *testing.T, s *Store, crawl string) snapshot {
	t.Helper()
	ctx := t.Context()
	var sn snapshot
	var err error
	if sn.Exceptions, err = s.Exceptions(ctx, ExceptionFilter{Crawl: crawl}); err != nil {
		t.Fatal(err)
	}
	if sn.Slaves, err = s.SlaveEvents(ctx, crawl); err != nil {
		t.Fatal(err)
	}
	if sn.Lost, err = s.LostTasks(ctx, crawl, 0); err != nil {
		t.Fatal(err)
	}
	if sn.Proxies, err = s.ProxyEvents(ctx, crawl, 0); err != nil {
		t.Fatal(err)
	}
	if sn.Duplicates, err = s.Duplicates(ctx, crawl); err != nil {
		t.Fatal(err)
	}
	if sn.URLs, err = s.PageURLs(ctx, crawl); err != nil {
		t.Fatal(err)
	}
	if sn.Counts, err = s.Counts(ctx, crawl); err != nil {
		t.Fatal(err)
	}
	sn.Items = []ItemRow{}
	if err := s.ExportItems(ctx, ItemFilter{Crawl: crawl}, func(r ItemRow) error {
		sn.Items = append(sn.Items, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sn.Pages = []events.Page{}
	err = s.query(ctx, "pages", `SELECT crawl, url, final_url, status, content_type, bytes, depth,
		fetched_at, slave_id, content_hash, duration_ms, attempt, links, url_hash,
		charset, warc, proxy, handler, checksum, rendered, rule, robots, canonical
		FROM pages WHERE crawl = ? ORDER BY id`, []any{crawl}, func(r *sql.Rows) error {
		var p events.Page
		var at time.Time
		var hash []byte
		if err := r.Scan(&p.Crawl, &p.URL, &p.FinalURL, &p.Status, &p.ContentType, &p.Bytes, &p.Depth,
			&at, &p.Slave, &p.ContentHash, &p.DurationMS, &p.Attempt, &p.Links, &hash,
			&p.Charset, &p.WARC, &p.Proxy, &p.Handler, &p.Checksum, &p.Rendered, &p.RuleSet,
			&p.Robots, &p.Canonical); err != nil {
			return err
		}
		p.FetchedAt = at.UnixMilli()
		if utf8.RuneCountInString(p.URL) < maxURL { // a cut URL keeps the hash of the full one
			if d := cmp.Diff(URLHash(p.URL), hash); d != "" {
				t.Errorf("url_hash of %q (-want +got):\n%s", p.URL, d)
			}
		}
		sn.Pages = append(sn.Pages, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.query(ctx, "duplicate hashes", "SELECT url, url_hash FROM duplicates WHERE crawl = ? ORDER BY id",
		[]any{crawl}, func(r *sql.Rows) error {
			var u string
			var hash []byte
			if err := r.Scan(&u, &hash); err != nil {
				return err
			}
			if utf8.RuneCountInString(u) < maxURL {
				if d := cmp.Diff(URLHash(u), hash); d != "" {
					t.Errorf("duplicates url_hash of %q (-want +got):\n%s", u, d)
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	sn.Heartbeats = []events.Heartbeat{}
	err = s.query(ctx, "heartbeats", `SELECT crawl, slave_id, host, pid, at, started_at, pages, errors,
		in_flight, bytes, rss, pages_per_sec, concurrency, state, render, rules_version
		FROM heartbeats WHERE crawl = ? ORDER BY id`, []any{crawl}, func(r *sql.Rows) error {
		var h events.Heartbeat
		var at, started time.Time
		if err := r.Scan(&h.Crawl, &h.Slave, &h.Host, &h.PID, &at, &started, &h.Pages, &h.Errors,
			&h.InFlight, &h.Bytes, &h.RSS, &h.PagesPerSec, &h.Concurrency, &h.State, &h.Render, &h.RulesVersion); err != nil {
			return err
		}
		h.At, h.StartedAt = at.UnixMilli(), started.UnixMilli()
		sn.Heartbeats = append(sn.Heartbeats, h)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

// mixed returns one batch with every record type, for crawl.
func mixed(crawl string) ([]events.Envelope, snapshot) {
	const t0 = 1_700_000_000_123
	pages := []events.Page{
		{Crawl: crawl, URL: "http://a.test/", FinalURL: "https://a.test/", Status: 200, ContentType: "text/html; charset=utf-8",
			Bytes: 5120, Depth: 0, FetchedAt: t0, Slave: "s1", ContentHash: strings.Repeat("ab", 32), DurationMS: 87, Attempt: 1, Links: 12,
			Charset: "utf-8", WARC: "s1-20231114-00001.warc.gz:48213", Proxy: "http://***@p1.test:8080", Handler: "html",
			Checksum: "0123456789abcdef"},
		{Crawl: crawl, URL: "http://a.test/Ünïcode?q=1", FinalURL: "http://a.test/Ünïcode?q=1", Status: 404,
			FetchedAt: t0 + 5, Slave: "s2", Attempt: 2, Charset: "windows-1252", Proxy: events.ProxyDirect, Handler: "store"},
		{Crawl: crawl, URL: "http://a.test/X", Status: 200, FetchedAt: t0 + 6}, // differs from .../x only by case
		{Crawl: crawl, URL: "http://a.test/x", Status: 200, FetchedAt: t0 + 7},
		{Crawl: crawl, URL: "http://a.test/p/1", Status: 200, FetchedAt: t0 + 8, Rendered: true, RuleSet: "shop"},
		{Crawl: crawl, URL: "http://a.test/p/1?sort=asc", Status: 200, FetchedAt: t0 + 9, Robots: "noindex,nofollow",
			Canonical: "http://a.test/p/1"},
	}
	excs := []events.Exception{
		{Crawl: crawl, Kind: events.KindDNS, URL: "http://b.test/", Host: "b.test", Slave: "s1", Attempt: 1,
			Message: "lookup b.test: no such host", At: t0 + 1},
		{Crawl: crawl, Kind: events.KindHTTPStatus, URL: "http://a.test/gone", Host: "a.test", Slave: "s2", Attempt: 3,
			Status: 503, Message: "503 Service Unavailable 🚧", At: t0 + 2},
		{Crawl: crawl, Kind: events.KindRenderTimeout, URL: "http://a.test/p/2", Host: "a.test", Slave: "s1",
			Message: "no network idle after 30s", Snapshot: "snapshots/s1/0001.html", At: t0 + 12},
	}
	slaves := []events.Slave{
		{Crawl: crawl, Slave: "s1", Kind: events.SlaveJoin, Host: "box1", At: t0 - 1000},
		{Crawl: crawl, Slave: "s1", Kind: events.SlaveDeath, Host: "box1", At: t0 + 9000, Detail: "no heartbeat for 30s"},
	}
	hbs := []events.Heartbeat{
		{Crawl: crawl, Slave: "s1", Host: "box1", PID: 4242, At: t0 + 3, StartedAt: t0 - 1000, Pages: 10, Errors: 1,
			InFlight: 4, Bytes: 1 << 20, RSS: 64 << 20, PagesPerSec: 2.5, Concurrency: 8, State: "running"},
		{Crawl: crawl, Slave: "s2", Host: "box2", PID: 7, At: t0 + 4, State: "draining", Render: true, RulesVersion: "9f86d081"},
	}
	lost := []events.Lost{
		{Crawl: crawl, URL: "http://c.test/slow", Slave: "s1", LeasedAt: t0 - 60_000, DetectedAt: t0 + 8, Attempt: 1, Reason: events.LostSlaveDead},
	}
	proxies := []events.Proxy{
		{Crawl: crawl, Slave: "s1", Proxy: "http://***@p1.test:8080", State: events.ProxyAdded, At: t0 - 900},
		{Crawl: crawl, Slave: "s1", Proxy: "http://***@p1.test:8080", State: events.ProxyUp, Uses: 1, At: t0 - 800},
		{Crawl: crawl, Slave: "s2", Proxy: "socks5://10.0.0.9:1080", State: events.ProxyCooling,
			Reason: "ban detected: HTTP 403 ×3 🚫", Errors: 3, Uses: 250, At: t0 + 9},
	}
	dups := []events.Duplicate{
		{Crawl: crawl, URL: "http://a.test/index.html", FirstURL: "http://a.test/", ContentHash: "0123456789abcdef",
			Slave: "s2", At: t0 + 10},
		{Crawl: crawl, URL: "http://a.test/Ünïcode?q=2", FirstURL: "http://a.test/Ünïcode?q=1", ContentHash: "fedcba9876543210",
			Slave: "s1", At: t0 + 11},
	}
	items := []events.Item{
		{Crawl: crawl, Rule: "shop", Item: "product", URL: "http://a.test/p/1",
			Data: json.RawMessage(`{"title": "Tea ☕", "price": 3.5, "tags": ["a", "b"]}`), Slave: "s1", FetchedAt: t0 + 8},
		{Crawl: crawl, Rule: "shop", Item: "review", URL: "http://a.test/p/1", Data: json.RawMessage(`{"stars":5}`),
			Slave: "s1", FetchedAt: t0 + 8},
		{Crawl: crawl, Rule: "news", Item: "article", URL: "http://a.test/Ünïcode?q=1", Data: json.RawMessage(`[]`),
			Slave: "s2", FetchedAt: t0 + 13},
	}
	var b []events.Envelope
	id := 0
	next := func() string { id++; return fmt.Sprintf("%d-%d", t0, id) }
	for i := range pages {
		b = append(b, events.Envelope{ID: next(), Type: events.TypePage, Page: &pages[i]})
	}
	for i := range excs {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeException, Exception: &excs[i]})
	}
	for i := range slaves {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeSlave, Slave: &slaves[i]})
	}
	for i := range hbs {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeHeartbeat, Heartbeat: &hbs[i]})
	}
	for i := range lost {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeLost, Lost: &lost[i]})
	}
	for i := range proxies {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeProxy, Proxy: &proxies[i]})
	}
	for i := range dups {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeDuplicate, Duplicate: &dups[i]})
	}
	var rows []ItemRow
	for i := range items {
		b = append(b, events.Envelope{ID: next(), Type: events.TypeItem, Item: &items[i]})
		rows = append(rows, itemRowOf(items[i]))
	}
	b = append(b, events.Envelope{ID: next(), Type: events.TypePage}) // nothing to store: skipped
	urls := map[string]int{}
	for _, p := range pages {
		urls[p.URL]++
	}
	return b, snapshot{
		Pages: pages, Exceptions: excs, Slaves: slaves, Heartbeats: hbs, Lost: lost, Proxies: proxies, Duplicates: dups,
		Items: rows, URLs: urls,
		Counts: Counts{Pages: int64(len(pages)), Exceptions: int64(len(excs)), SlaveEvents: int64(len(slaves)),
			Heartbeats: int64(len(hbs)), Lost: int64(len(lost)), ProxyEvents: int64(len(proxies)), Duplicates: int64(len(dups)),
			Items: int64(len(items))},
	}
}

func TestInsertRoundTrip(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	b1, want1 := mixed("c1")
	b2, want2 := mixed("c2") // same stream ids, other crawl

	// Half of b1 again plus fresh ids: only the fresh ones are new.
	partial := append([]events.Envelope{}, b1[:len(b1)/2]...)
	for _, e := range b1 {
		if e.Page != nil {
			p := *e.Page
			p.URL += "#more"
			partial = append(partial, events.Envelope{ID: "1800000000000-" + e.ID[strings.IndexByte(e.ID, '-')+1:], Page: &p})
		}
	}
	wantPartial := want1.Counts
	wantPartial.Pages *= 2

	empty := Counts{}
	for _, step := range []struct {
		name     string
		batch    []events.Envelope
		want1    Counts
		want2    Counts
		checkAll bool
	}{
		{"empty batch", nil, empty, empty, false},
		{"mixed batch", b1, want1.Counts, empty, true},
		{"redelivered", b1, want1.Counts, empty, true},
		{"same ids other crawl", b2, want1.Counts, want2.Counts, true},
		{"other crawl redelivered", b2, want1.Counts, want2.Counts, true},
		{"partly redelivered", partial, wantPartial, want2.Counts, false},
		{"all redelivered at once", slices.Concat(b1, b2, partial), wantPartial, want2.Counts, false},
	} {
		if err := s.Insert(ctx, step.batch); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := map[string]Counts{"c1": read(t, s, "c1").Counts, "c2": read(t, s, "c2").Counts}
		if d := cmp.Diff(map[string]Counts{"c1": step.want1, "c2": step.want2}, got); d != "" {
			t.Errorf("%s: counts (-want +got):\n%s", step.name, d)
		}
		if step.checkAll {
			for crawl, want := range map[string]snapshot{"c1": want1, "c2": want2} {
				if got := read(t, s, crawl); got.Counts != empty {
					if d := cmp.Diff(want, got, jsonEqual); d != "" {
						t.Errorf("%s: crawl %s (-want +got):\n%s", step.name, crawl, d)
					}
				}
			}
		}
	}
	urls, err := s.PageURLs(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	for u, n := range urls {
		if n != 1 {
			t.Errorf("url %q stored %d times", u, n)
		}
	}
	if len(urls) != int(wantPartial.Pages) {
		t.Errorf("%d distinct urls, want %d", len(urls), wantPartial.Pages)
	}
}

func TestInsertRejectsBadIDs(t *testing.T) {
	s := open(t)
	for _, id := range []string{"", "abc", "1-", "-1", "1-2-3", "1 -2", "12345678901234567890-123456789012345678901",
		"/1-2", "s1/", "s 1/1-2", "s1/x-2", "s{1}/1-2", "s1/1-2/3", strings.Repeat("s", 65) + "/1-2",
		"~/1-2", "s1~/1-2", "~12345/1-2", "~a/1-2", "~1~2/1-2", "s1~2~/1-2", "~-1/1-2", "~0", "~0-1"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			batch := []events.Envelope{
				{ID: "1-1", Page: &events.Page{Crawl: "c", URL: "http://ok.test/"}},
				{ID: id, Page: &events.Page{Crawl: "c", URL: "http://bad.test/"}},
			}
			err := s.Insert(t.Context(), batch)
			if err == nil || !strings.Contains(err.Error(), "insert events: envelope 1: invalid stream id") {
				t.Fatalf("Insert error = %v, want invalid stream id", err)
			}
			if c, _ := s.Counts(t.Context(), "c"); c.Pages != 0 {
				t.Errorf("%d pages stored from a rejected batch", c.Pages)
			}
		})
	}
}

func TestValidEventID(t *testing.T) {
	long := strings.Repeat("s", 64)
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"1-2", true},
		{"18446744073709551615-18446744073709551615", true},
		{"s1/1-2", true},
		{long + "/18446744073709551615-18446744073709551615", true},
		// a shard's stream (sharded crawls) and a slave's stream of a shard
		{"~0/1-2", true},
		{"~9999/1700000000000-31", true},
		{"s1~3/1-2", true},
		{"a_b.c-d~12/1-2", true},
		{long + "~9999/1700000000000-18446744073709551615", true},
		{long + "~9999/12345678901234567890-1234567890123456789", true},   // 110 characters
		{long + "~9999/12345678901234567890-12345678901234567890", false}, // 111: over the column
		{"~/1-2", false},
		{"~12345/1-2", false},
		{"s~x/1-2", false},
		{"s~1~2/1-2", false},
		{"~1/", false},
		{"~1", false},
		{"", false},
	} {
		if got := validEventID(tc.id); got != tc.want {
			t.Errorf("validEventID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// TestInsertShardTags stores the same stream id from two shards' streams
// (and from a slave's stream in each) as four rows, and each again as
// nothing: the tag keeps them apart, UNIQUE (crawl, event_id) keeps a
// redelivery out.
func TestInsertShardTags(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	var batch []events.Envelope
	for _, id := range []string{"~0/1700000000000-5000", "~1/1700000000000-5000", "s1~0/1700000000000-5000", "s1~1/1700000000000-5000"} {
		batch = append(batch, events.Envelope{ID: id, Page: &events.Page{Crawl: "c", URL: "http://x.test/" + id}})
	}
	for range 2 {
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	urls, err := s.PageURLs(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, e := range batch {
		want[e.Page.URL] = 1
	}
	if d := cmp.Diff(want, urls); d != "" {
		t.Errorf("page urls (-want +got):\n%s", d)
	}
}

func TestInsertIsOneTransaction(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	b, want := mixed("c")
	ts, err := buildTables(b)
	if err != nil {
		t.Fatal(err)
	}
	// Make each table of the batch fail in turn (the last one too): the
	// other inserts must roll back.
	for _, tb := range ts.all() {
		if _, err := s.DB.ExecContext(ctx, "RENAME TABLE "+tb.name+" TO "+tb.name+"_away"); err != nil {
			t.Fatal(err)
		}
		err := s.Insert(ctx, b)
		if _, err := s.DB.ExecContext(ctx, "RENAME TABLE "+tb.name+"_away TO "+tb.name); err != nil {
			t.Fatal(err)
		}
		if prefix := fmt.Sprintf("insert events: %d rows into %s", len(tb.rows), tb.name); err == nil || !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("Insert error = %v, want a failure on %s", err, tb.name)
		}
		if c, err := s.Counts(ctx, "c"); err != nil || c != (Counts{}) {
			t.Errorf("after failed batch on %s: counts %+v, %v; want none", tb.name, c, err)
		}
	}
	if err := s.Insert(ctx, b); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if c, _ := s.Counts(ctx, "c"); c != want.Counts {
		t.Errorf("after retry: counts %+v, want %+v", c, want.Counts)
	}
}

func TestInsertTruncates(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	long := func(s string, n int) string { return strings.Repeat(s, n) }
	cutURL := "http://a.test/" + long("a", 3000)
	minT := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxT := time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()

	for _, c := range []struct {
		name string
		in   events.Envelope
		want snapshot // only the non-empty parts are compared
	}{{
		name: "long url cut to 2048 characters",
		in:   events.Envelope{Page: &events.Page{Crawl: "t1", URL: cutURL, FinalURL: long("é", 3000)}},
		want: snapshot{Pages: []events.Page{{Crawl: "t1", URL: cutURL[:2048], FinalURL: long("é", 2048)}}},
	}, {
		name: "cut on a character boundary, 4-byte characters kept",
		in: events.Envelope{Exception: &events.Exception{Crawl: "t2", Kind: long("k", 40), URL: long("a", 2047) + "€€",
			Host: long("😀", 300), Slave: long("s", 200), Message: long("é", 40000)}},
		want: snapshot{Exceptions: []events.Exception{{Crawl: "t2", Kind: long("k", 32), URL: long("a", 2047) + "€",
			Host: long("😀", 255), Slave: long("s", 128), Message: long("é", 32767)}}},
	}, {
		name: "invalid utf-8 replaced",
		in:   events.Envelope{Exception: &events.Exception{Crawl: "t3", Host: "h\xff\xfe.test", Message: "bad \xc3 byte"}},
		want: snapshot{Exceptions: []events.Exception{{Crawl: "t3", Host: "h\uFFFD.test", Message: "bad \uFFFD byte"}}},
	}, {
		name: "numbers and times clamped",
		in: events.Envelope{Page: &events.Page{Crawl: "t4", URL: "u", Status: 70000, Depth: -1 << 40, Attempt: 1 << 40,
			Links: 1 << 33, DurationMS: 1 << 50, FetchedAt: 1 << 62, ContentHash: long("f", 100), ContentType: long("t", 300)}},
		want: snapshot{Pages: []events.Page{{Crawl: "t4", URL: "u", Status: math.MaxInt16, Depth: math.MinInt32,
			Attempt: math.MaxInt32, Links: math.MaxInt32, DurationMS: math.MaxInt32, FetchedAt: maxT,
			ContentHash: long("f", 64), ContentType: long("t", 255)}}},
	}, {
		name: "heartbeat NaN, Inf and early times",
		in: events.Envelope{Heartbeat: &events.Heartbeat{Crawl: "t5", Slave: "s", PagesPerSec: math.NaN(),
			At: -1 << 62, StartedAt: -1, State: long("x", 20), PID: 1 << 40}},
		want: snapshot{Heartbeats: []events.Heartbeat{{Crawl: "t5", Slave: "s", At: minT, StartedAt: -1,
			State: long("x", 16), PID: math.MaxInt32}}},
	}, {
		name: "heartbeat +Inf",
		in:   events.Envelope{Heartbeat: &events.Heartbeat{Crawl: "t6", PagesPerSec: math.Inf(1)}},
		want: snapshot{Heartbeats: []events.Heartbeat{{Crawl: "t6"}}},
	}, {
		name: "slave and lost strings",
		in: events.Envelope{Slave: &events.Slave{Crawl: "t7", Slave: long("s", 129), Kind: long("k", 17), Host: long("h", 256),
			Detail: long("d", 70000)}, Lost: &events.Lost{Crawl: "t7", URL: long("u", 2049), Slave: "s", Reason: long("r", 33)}},
		want: snapshot{
			Slaves: []events.Slave{{Crawl: "t7", Slave: long("s", 128), Kind: long("k", 16), Host: long("h", 255), Detail: long("d", 65535)}},
			Lost:   []events.Lost{{Crawl: "t7", URL: long("u", 2048), Slave: "s", Reason: long("r", 32)}},
		},
	}, {
		name: "crawl name cut to 64",
		in:   events.Envelope{Lost: &events.Lost{Crawl: long("c", 70), URL: "u"}},
		want: snapshot{Lost: []events.Lost{{Crawl: long("c", 64), URL: "u"}}},
	}, {
		name: "page fetch pipeline fields",
		in: events.Envelope{Page: &events.Page{Crawl: "t8", URL: "u", Charset: long("c", 65), WARC: long("w", 600),
			Proxy: long("p", 513) + "\xff", Handler: long("é", 33), Checksum: long("0", 17)}},
		want: snapshot{Pages: []events.Page{{Crawl: "t8", URL: "u", Charset: long("c", 64), WARC: long("w", 512),
			Proxy: long("p", 512), Handler: long("é", 32), Checksum: long("0", 16)}}},
	}, {
		name: "proxy event strings, numbers and times",
		in: events.Envelope{Proxy: &events.Proxy{Crawl: "t9", Slave: long("s", 200), Proxy: long("😀", 600),
			State: long("x", 17), Reason: long("r", 70000), Errors: 1 << 40, Uses: -1 << 40, At: 1 << 62}},
		want: snapshot{Proxies: []events.Proxy{{Crawl: "t9", Slave: long("s", 128), Proxy: long("😀", 512),
			State: long("x", 16), Reason: long("r", 65535), Errors: math.MaxInt32, Uses: math.MinInt32, At: maxT}}},
	}, {
		name: "proxy reason cut on a character boundary",
		in:   events.Envelope{Proxy: &events.Proxy{Crawl: "t10", Reason: "bad \xc3 " + long("€", 30000)}},
		want: snapshot{Proxies: []events.Proxy{{Crawl: "t10", Reason: "bad \uFFFD " + long("€", 21842)}}}, // 8 + 3×21842 ≤ 65535
	}, {
		name: "duplicate strings and times",
		in: events.Envelope{Duplicate: &events.Duplicate{Crawl: "t11", URL: cutURL, FirstURL: long("é", 2100),
			ContentHash: long("a", 40), Slave: long("s", 129), At: -1 << 62}},
		want: snapshot{Duplicates: []events.Duplicate{{Crawl: "t11", URL: cutURL[:2048], FirstURL: long("é", 2048),
			ContentHash: long("a", 16), Slave: long("s", 128), At: minT}}},
	}, {
		name: "item strings and times",
		in: events.Envelope{Item: &events.Item{Crawl: "t12", Rule: long("r", 129), Item: long("é", 200) + "\xff",
			URL: cutURL, Data: json.RawMessage("{\"a\":\"b\xffc\"}"), Slave: long("s", 129), FetchedAt: 1 << 62}},
		want: snapshot{Items: []ItemRow{{Crawl: "t12", Rule: long("r", 128), Item: long("é", 128), URL: cutURL[:2048],
			Data: json.RawMessage("{\"a\":\"b\uFFFDc\"}"), Slave: long("s", 128), FetchedAt: time.UnixMilli(maxT).UTC()}}},
	}, {
		name: "rule, render and snapshot fields",
		in: events.Envelope{
			Page:      &events.Page{Crawl: "t13", URL: "u", Rendered: true, RuleSet: long("r", 129) + "\xff"},
			Exception: &events.Exception{Crawl: "t13", Kind: events.KindRenderNavigation, Snapshot: long("😀", 513)},
			Heartbeat: &events.Heartbeat{Crawl: "t13", Render: true, RulesVersion: long("v", 65)},
		},
		want: snapshot{
			Pages:      []events.Page{{Crawl: "t13", URL: "u", Rendered: true, RuleSet: long("r", 128)}},
			Exceptions: []events.Exception{{Crawl: "t13", Kind: events.KindRenderNavigation, Snapshot: long("😀", 512)}},
			Heartbeats: []events.Heartbeat{{Crawl: "t13", Render: true, RulesVersion: long("v", 64)}},
		},
	}, {
		name: "robots and canonical fields",
		in:   events.Envelope{Page: &events.Page{Crawl: "t14", URL: "u", Robots: long("n", 33), Canonical: cutURL}},
		want: snapshot{Pages: []events.Page{{Crawl: "t14", URL: "u", Robots: long("n", 32), Canonical: cutURL[:2048]}}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			c.in.ID = "1-1"
			crawl := c.want.crawl()

			// The sanitised rows must go in even without IGNORE, in strict
			// mode: nothing is left for the server to adjust.
			strictInsert(t, s, []events.Envelope{c.in})

			got := read(t, s, crawl)
			if c.want.Pages == nil {
				c.want.Pages = []events.Page{}
			}
			for _, p := range c.want.Pages {
				if c.want.URLs == nil {
					c.want.URLs = map[string]int{}
				}
				c.want.URLs[p.URL]++
			}
			if c.want.URLs == nil {
				c.want.URLs = map[string]int{}
			}
			if c.want.Exceptions == nil {
				c.want.Exceptions = []events.Exception{}
			}
			if c.want.Slaves == nil {
				c.want.Slaves = []events.Slave{}
			}
			if c.want.Heartbeats == nil {
				c.want.Heartbeats = []events.Heartbeat{}
			}
			if c.want.Lost == nil {
				c.want.Lost = []events.Lost{}
			}
			if c.want.Proxies == nil {
				c.want.Proxies = []events.Proxy{}
			}
			if c.want.Duplicates == nil {
				c.want.Duplicates = []events.Duplicate{}
			}
			if c.want.Items == nil {
				c.want.Items = []ItemRow{}
			}
			c.want.Counts = Counts{Pages: int64(len(c.want.Pages)), Exceptions: int64(len(c.want.Exceptions)),
				SlaveEvents: int64(len(c.want.Slaves)), Heartbeats: int64(len(c.want.Heartbeats)), Lost: int64(len(c.want.Lost)),
				ProxyEvents: int64(len(c.want.Proxies)), Duplicates: int64(len(c.want.Duplicates)), Items: int64(len(c.want.Items))}
			if d := cmp.Diff(c.want, got, jsonEqual); d != "" {
				t.Errorf("stored (-want +got):\n%s", d)
			}

			// Insert itself takes the same data (a no-op now: same id).
			if err := s.Insert(ctx, []events.Envelope{c.in}); err != nil {
				t.Fatal(err)
			}
			if cs, _ := s.Counts(ctx, crawl); cs != c.want.Counts {
				t.Errorf("counts after Insert %+v, want %+v", cs, c.want.Counts)
			}
		})
	}

	// The hash of a cut URL is that of the full one, so lookups by the
	// real URL still find the page (or duplicate).
	for _, q := range []string{
		"SELECT url_hash FROM pages WHERE crawl = 't1'",
		"SELECT url_hash FROM duplicates WHERE crawl = 't11'",
		"SELECT url_hash FROM items WHERE crawl = 't12'",
	} {
		var hash []byte
		if err := s.DB.QueryRowContext(ctx, q).Scan(&hash); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(URLHash(cutURL), hash); d != "" {
			t.Errorf("%s: url_hash of the cut url (-want +got):\n%s", q, d)
		}
	}
}

// strictInsert stores batch like Insert, but with plain INSERT in strict
// mode, so any value the server would have to adjust fails.
func strictInsert(t *testing.T, s *Store, batch []events.Envelope) {
	t.Helper()
	ctx := t.Context()
	ts, err := buildTables(batch)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO'"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION sql_mode = DEFAULT")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, tb := range ts.all() {
		if err := tb.exec(ctx, tx, "INSERT"); err != nil {
			t.Fatalf("strict insert: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestInsertLargeBatch(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	const pages, excs = 2500, 700
	msg := strings.Repeat("m", 60_000) // 700 × 60 kB: several statements by size
	var b []events.Envelope
	for i := range pages {
		b = append(b, events.Envelope{ID: fmt.Sprintf("2-%d", i), Page: &events.Page{Crawl: "big", URL: fmt.Sprintf("http://big.test/%d", i)}})
	}
	for i := range excs {
		b = append(b, events.Envelope{ID: fmt.Sprintf("3-%d", i), Exception: &events.Exception{Crawl: "big", Kind: events.KindOther, Message: msg}})
	}
	for range 2 {
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Counts(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Counts{Pages: pages, Exceptions: excs}, c); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	urls, err := s.PageURLs(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for i := range pages {
		want[fmt.Sprintf("http://big.test/%d", i)] = 1
	}
	if d := cmp.Diff(want, urls); d != "" {
		t.Errorf("page urls (-want +got):\n%s", d)
	}
}

func TestExceptionsFilter(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(sec int) int64 { return t0.Add(time.Duration(sec) * time.Second).UnixMilli() }
	type ex struct {
		msg, kind, host, slave string
		sec                    int
	}
	var b []events.Envelope
	for i, e := range []ex{
		{"e0", events.KindDNS, "a.test", "s1", 0},
		{"e1", events.KindTimeout, "a.test", "s2", 10},
		{"e2", events.KindDNS, "b.test", "s1", 20},
		{"e3", events.KindHTTPStatus, "a.test", "s1", 30},
		{"e4", events.KindDNS, "a.test", "s2", 30}, // same time as e3: insertion order
		{"e5", events.KindTimeout, "b.test", "s2", 40},
		{"e6", events.KindDNS, "a.test", "s1", 50},
	} {
		b = append(b, events.Envelope{ID: fmt.Sprintf("9-%d", i), Exception: &events.Exception{
			Crawl: "f", Kind: e.kind, Host: e.host, Slave: e.slave, Message: e.msg, At: at(e.sec)}})
	}
	b = append(b, events.Envelope{ID: "9-99", Exception: &events.Exception{Crawl: "other", Kind: events.KindDNS, Host: "a.test", Message: "x", At: at(0)}})
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	ts := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	for _, c := range []struct {
		name string
		f    ExceptionFilter
		want []string
	}{
		{"all", ExceptionFilter{Crawl: "f"}, []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6"}},
		{"other crawl", ExceptionFilter{Crawl: "other"}, []string{"x"}},
		{"unknown crawl", ExceptionFilter{Crawl: "nope"}, []string{}},
		{"kind", ExceptionFilter{Crawl: "f", Kind: events.KindDNS}, []string{"e0", "e2", "e4", "e6"}},
		{"host", ExceptionFilter{Crawl: "f", Host: "b.test"}, []string{"e2", "e5"}},
		{"slave", ExceptionFilter{Crawl: "f", Slave: "s2"}, []string{"e1", "e4", "e5"}},
		{"kind host slave", ExceptionFilter{Crawl: "f", Kind: events.KindDNS, Host: "a.test", Slave: "s1"}, []string{"e0", "e6"}},
		{"since inclusive", ExceptionFilter{Crawl: "f", Since: ts(30)}, []string{"e3", "e4", "e5", "e6"}},
		{"until exclusive", ExceptionFilter{Crawl: "f", Until: ts(30)}, []string{"e0", "e1", "e2"}},
		{"range", ExceptionFilter{Crawl: "f", Since: ts(10), Until: ts(41)}, []string{"e1", "e2", "e3", "e4", "e5"}},
		{"range in another zone", ExceptionFilter{Crawl: "f", Since: ts(10).In(time.FixedZone("X", 5*3600)), Until: ts(20)}, []string{"e1"}},
		{"range and kind", ExceptionFilter{Crawl: "f", Kind: events.KindDNS, Since: ts(10), Until: ts(50)}, []string{"e2", "e4"}},
		{"page 1", ExceptionFilter{Crawl: "f", Limit: 3}, []string{"e0", "e1", "e2"}},
		{"page 2", ExceptionFilter{Crawl: "f", Limit: 3, Offset: 3}, []string{"e3", "e4", "e5"}},
		{"page 3", ExceptionFilter{Crawl: "f", Limit: 3, Offset: 6}, []string{"e6"}},
		{"past the end", ExceptionFilter{Crawl: "f", Limit: 3, Offset: 9}, []string{}},
		{"offset without limit", ExceptionFilter{Crawl: "f", Offset: 5}, []string{"e5", "e6"}},
		{"filtered page", ExceptionFilter{Crawl: "f", Kind: events.KindDNS, Limit: 2, Offset: 1}, []string{"e2", "e4"}},
		{"case matters", ExceptionFilter{Crawl: "f", Host: "A.TEST"}, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Exceptions(ctx, c.f)
			if err != nil {
				t.Fatal(err)
			}
			msgs := []string{}
			for _, e := range got {
				msgs = append(msgs, e.Message)
			}
			if d := cmp.Diff(c.want, msgs); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}

	lost := []events.Envelope{
		{ID: "5-1", Lost: &events.Lost{Crawl: "f", URL: "u2", DetectedAt: at(20)}},
		{ID: "5-2", Lost: &events.Lost{Crawl: "f", URL: "u1", DetectedAt: at(10)}},
		{ID: "5-3", Lost: &events.Lost{Crawl: "f", URL: "u3", DetectedAt: at(30)}},
	}
	if err := s.Insert(ctx, lost); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit int
		want  []string
	}{{0, []string{"u1", "u2", "u3"}}, {2, []string{"u1", "u2"}}, {-1, []string{"u1", "u2", "u3"}}} {
		got, err := s.LostTasks(ctx, "f", c.limit)
		if err != nil {
			t.Fatal(err)
		}
		urls := []string{}
		for _, l := range got {
			urls = append(urls, l.URL)
		}
		if d := cmp.Diff(c.want, urls); d != "" {
			t.Errorf("lost tasks limit %d (-want +got):\n%s", c.limit, d)
		}
	}
}

func TestMigrationsDownUp(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	b, _ := mixed("c")
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	p, err := s.provider()
	if err != nil {
		t.Fatal(err)
	}
	_, latest := versions(t, s)
	for round := range 2 {
		if _, err := p.DownTo(ctx, 0); err != nil {
			t.Fatalf("round %d: down: %v", round, err)
		}
		if d := cmp.Diff([]string{"goose_db_version"}, tableNames(t, s)); d != "" {
			t.Errorf("round %d: tables after down (-want +got):\n%s", round, d)
		}
		if v, _ := versions(t, s); v != 0 {
			t.Errorf("round %d: version %d after down, want 0", round, v)
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("round %d: up: %v", round, err)
		}
		if d := cmp.Diff(wantTables, tableNames(t, s)); d != "" {
			t.Errorf("round %d: tables after up (-want +got):\n%s", round, d)
		}
		if v, _ := versions(t, s); v != latest {
			t.Errorf("round %d: version %d after up, want %d", round, v, latest)
		}
		if err := s.Insert(ctx, b); err != nil {
			t.Fatalf("round %d: insert after up: %v", round, err)
		}
	}
}

// TestColumnLimits checks the truncation limits against the live schema.
func TestColumnLimits(t *testing.T) {
	s := open(t)
	type col struct{ table, column string }
	want := map[col]int64{}
	for _, tb := range []string{"pages", "exceptions", "slave_events", "heartbeats", "lost_tasks", "proxy_events", "duplicates", "items"} {
		want[col{tb, "crawl"}] = maxCrawl
		want[col{tb, "event_id"}] = maxEventID
	}
	for c, n := range map[col]int{
		{"pages", "url"}: maxURL, {"pages", "final_url"}: maxURL, {"pages", "content_type"}: maxContentType,
		{"pages", "slave_id"}: maxSlave, {"pages", "content_hash"}: maxContentHash, {"pages", "url_hash"}: 8,
		{"exceptions", "kind"}: maxKind, {"exceptions", "url"}: maxURL, {"exceptions", "host"}: maxHost,
		{"exceptions", "slave_id"}: maxSlave, {"exceptions", "message"}: maxTextBytes,
		{"slave_events", "slave_id"}: maxSlave, {"slave_events", "kind"}: maxSlaveKind,
		{"slave_events", "host"}: maxHost, {"slave_events", "detail"}: maxTextBytes,
		{"heartbeats", "slave_id"}: maxSlave, {"heartbeats", "host"}: maxHost, {"heartbeats", "state"}: maxState,
		{"lost_tasks", "url"}: maxURL, {"lost_tasks", "slave_id"}: maxSlave, {"lost_tasks", "reason"}: maxReason,
		{"pages", "charset"}: maxCharset, {"pages", "warc"}: maxWARC, {"pages", "proxy"}: maxProxy,
		{"pages", "handler"}: maxHandler, {"pages", "checksum"}: maxChecksum,
		{"proxy_events", "slave_id"}: maxSlave, {"proxy_events", "proxy"}: maxProxy,
		{"proxy_events", "state"}: maxProxyState, {"proxy_events", "reason"}: maxTextBytes,
		{"api_tokens", "crawl"}: maxCrawl, {"api_tokens", "slave_id"}: maxSlave, {"api_tokens", "token_hash"}: 32,
		{"duplicates", "url"}: maxURL, {"duplicates", "url_hash"}: 8, {"duplicates", "first_url"}: maxURL,
		{"duplicates", "content_hash"}: maxChecksum, {"duplicates", "slave_id"}: maxSlave,
		{"items", "rule"}: maxRule, {"items", "item"}: maxRule, {"items", "url"}: maxURL, {"items", "url_hash"}: 8,
		{"items", "slave_id"}: maxSlave, {"pages", "rule"}: maxRule, {"heartbeats", "rules_version"}: maxRulesVer,
		{"exceptions", "snapshot"}: maxSnapshot,
		{"pages", "robots"}:        maxRobots, {"pages", "canonical"}: maxURL,
		{"pages", "revisit"}: maxRevisit, {"page_validators", "crawl"}: maxCrawl,
		{"page_validators", "url_hash"}: 8, {"page_validators", "url"}: maxURL,
		{"page_validators", "etag"}: maxETag, {"page_validators", "last_modified"}: maxLastMod,
		{"page_validators", "checksum"}: maxChecksum,
		{"schedule_runs", "crawl"}:      maxCrawl, {"schedule_runs", "name"}: maxScheduleName,
		{"schedule_runs", "spec"}: maxScheduleSpec, {"schedule_runs", "master"}: maxMaster,
		{"seeds", "crawl"}: maxCrawl, {"seeds", "url_hash"}: 16, {"seeds", "url"}: maxURL,
	} {
		want[c] = int64(n)
	}
	got := map[col]int64{}
	err := s.query(t.Context(), "columns", `SELECT table_name, column_name, character_maximum_length
		FROM information_schema.columns WHERE table_schema = DATABASE() AND character_maximum_length IS NOT NULL
		AND table_name <> 'goose_db_version'
		AND NOT (table_name = 'items' AND column_name = 'data')`, nil, func(r *sql.Rows) error {
		var c col
		var n int64
		if err := r.Scan(&c.table, &c.column, &n); err != nil {
			return err
		}
		got[c] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("string columns and limits (-want +got):\n%s", d)
	}
}

func TestSlaveEventsOrder(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	b := []events.Envelope{
		{ID: "1-3", Slave: &events.Slave{Crawl: "c", Slave: "b", Kind: events.SlaveLeave, At: 300}},
		{ID: "1-1", Slave: &events.Slave{Crawl: "c", Slave: "a", Kind: events.SlaveJoin, At: 100}},
		{ID: "1-2", Slave: &events.Slave{Crawl: "c", Slave: "b", Kind: events.SlaveJoin, At: 100}},
		{ID: "1-4", Slave: &events.Slave{Crawl: "d", Slave: "z", Kind: events.SlaveJoin, At: 1}},
	}
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.SlaveEvents(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Slave{*b[1].Slave, *b[2].Slave, *b[0].Slave}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// crawl is the crawl of the snapshot's first record.
func (sn snapshot) crawl() string {
	switch {
	case len(sn.Pages) > 0:
		return sn.Pages[0].Crawl
	case len(sn.Exceptions) > 0:
		return sn.Exceptions[0].Crawl
	case len(sn.Slaves) > 0:
		return sn.Slaves[0].Crawl
	case len(sn.Heartbeats) > 0:
		return sn.Heartbeats[0].Crawl
	case len(sn.Lost) > 0:
		return sn.Lost[0].Crawl
	case len(sn.Proxies) > 0:
		return sn.Proxies[0].Crawl
	case len(sn.Duplicates) > 0:
		return sn.Duplicates[0].Crawl
	case len(sn.Items) > 0:
		return sn.Items[0].Crawl
	}
	return ""
}

func TestProxyEventsAndDuplicatesOrder(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	b := []events.Envelope{
		{ID: "4-3", Proxy: &events.Proxy{Crawl: "c", Slave: "s1", Proxy: "p1", State: events.ProxyCooling, At: 300}},
		{ID: "4-1", Proxy: &events.Proxy{Crawl: "c", Slave: "s1", Proxy: "p1", State: events.ProxyAdded, At: 100}},
		{ID: "4-2", Proxy: &events.Proxy{Crawl: "c", Slave: "s2", Proxy: "p2", State: events.ProxyAdded, At: 100}},
		{ID: "4-4", Proxy: &events.Proxy{Crawl: "d", Slave: "s9", Proxy: "p9", State: events.ProxyUp, At: 1}},
		{ID: "4-5", Duplicate: &events.Duplicate{Crawl: "c", URL: "u3", FirstURL: "u1", ContentHash: "00000000000000aa", At: 30}},
		{ID: "4-6", Duplicate: &events.Duplicate{Crawl: "c", URL: "u2", FirstURL: "u1", ContentHash: "00000000000000aa", At: 20}},
		{ID: "4-7", Duplicate: &events.Duplicate{Crawl: "d", URL: "u9", FirstURL: "u8", ContentHash: "00000000000000bb", At: 1}},
	}
	for range 2 { // the second time is a redelivery: nothing new
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		crawl string
		limit int
		want  []events.Proxy
	}{
		{"c", 0, []events.Proxy{*b[1].Proxy, *b[2].Proxy, *b[0].Proxy}},
		{"c", -1, []events.Proxy{*b[1].Proxy, *b[2].Proxy, *b[0].Proxy}},
		{"c", 2, []events.Proxy{*b[1].Proxy, *b[2].Proxy}},
		{"d", 0, []events.Proxy{*b[3].Proxy}},
		{"nope", 0, []events.Proxy{}},
	} {
		got, err := s.ProxyEvents(ctx, c.crawl, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("proxy events of %q, limit %d (-want +got):\n%s", c.crawl, c.limit, d)
		}
	}
	for _, c := range []struct {
		crawl string
		want  []events.Duplicate
	}{
		{"c", []events.Duplicate{*b[5].Duplicate, *b[4].Duplicate}},
		{"d", []events.Duplicate{*b[6].Duplicate}},
		{"nope", []events.Duplicate{}},
	} {
		got, err := s.Duplicates(ctx, c.crawl)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("duplicates of %q (-want +got):\n%s", c.crawl, d)
		}
	}
	got := map[string]Counts{}
	for _, crawl := range []string{"c", "d"} {
		c, err := s.Counts(ctx, crawl)
		if err != nil {
			t.Fatal(err)
		}
		got[crawl] = c
	}
	want := map[string]Counts{"c": {ProxyEvents: 3, Duplicates: 2}, "d": {ProxyEvents: 1, Duplicates: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
}

// TestMigrateFetchKeepsPages upgrades a database with pages from the
// initial schema: the rows stay, with the new columns empty, and Down
// returns pages to its initial columns.
func TestMigrateFetchKeepsPages(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	p, err := s.provider()
	if err != nil {
		t.Fatal(err)
	}
	pageColumns := func() []string {
		t.Helper()
		var cols []string
		err := s.query(ctx, "columns", `SELECT column_name FROM information_schema.columns
			WHERE table_schema = DATABASE() AND table_name = 'pages' ORDER BY ordinal_position`, nil,
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
	initial := []string{"id", "crawl", "event_id", "url", "url_hash", "final_url", "status", "content_type", "bytes",
		"depth", "attempt", "links", "duration_ms", "fetched_at", "slave_id", "content_hash"}

	if _, err := p.DownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(initial, pageColumns()); d != "" {
		t.Errorf("pages columns at version 1 (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"exceptions", "goose_db_version", "heartbeats", "lost_tasks", "pages", "slave_events"},
		tableNames(t, s)); d != "" {
		t.Errorf("tables at version 1 (-want +got):\n%s", d)
	}
	if _, err := s.DB.ExecContext(ctx, `INSERT INTO pages (crawl, event_id, url, url_hash, status, fetched_at, content_hash)
		VALUES ('old', '1-1', 'http://a.test/', ?, 200, ?, 'h')`, URLHash("http://a.test/"), datetime(1000)); err != nil {
		t.Fatal(err)
	}

	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(append(initial, "charset", "warc", "proxy", "handler", "checksum", "rendered", "rule",
		"robots", "canonical", "revisit"), pageColumns()); d != "" {
		t.Errorf("pages columns after up (-want +got):\n%s", d)
	}
	got := read(t, s, "old")
	want := []events.Page{{Crawl: "old", URL: "http://a.test/", Status: 200, FetchedAt: 1000, ContentHash: "h"}}
	if d := cmp.Diff(want, got.Pages); d != "" {
		t.Errorf("old page after up (-want +got):\n%s", d)
	}
	// The old row keeps its event id: a redelivery is still ignored.
	b := []events.Envelope{{ID: "1-1", Page: &events.Page{Crawl: "old", URL: "http://a.test/", Charset: "utf-8"}}}
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Counts(ctx, "old"); c != (Counts{Pages: 1}) {
		t.Errorf("counts after redelivery %+v, want 1 page", c)
	}

	// The new tables have their keys.
	var keys []string
	err = s.query(ctx, "indexes", `SELECT DISTINCT index_name FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name IN ('proxy_events', 'duplicates')`, nil,
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
	wantKeys := []string{"PRIMARY", "ix_duplicates_at", "ix_duplicates_hash", "ix_duplicates_url",
		"ix_proxy_events_at", "ix_proxy_events_proxy", "uk_duplicates_event", "uk_proxy_events_event"}
	if d := cmp.Diff(wantKeys, keys); d != "" {
		t.Errorf("indexes of the new tables (-want +got):\n%s", d)
	}
}

// TestInsertSlaveStreamIDs: events of two slaves' streams with the same
// entry id are two rows; a redelivery of either is none.
func TestInsertSlaveStreamIDs(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	batch := []events.Envelope{
		{ID: "5-1000", Page: &events.Page{Crawl: "c", URL: "http://a.test/m"}},
		{ID: "s1/5-1000", Page: &events.Page{Crawl: "c", URL: "http://a.test/1"}},
		{ID: strings.Repeat("p", 64) + "/18446744073709551615-18446744073709551615", Page: &events.Page{Crawl: "c", URL: "http://a.test/2"}},
	}
	for range 2 {
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.Counts(ctx, "c"); err != nil || c.Pages != 3 {
		t.Fatalf("pages %d, %v; want 3", c.Pages, err)
	}
}
