package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://a.test/x?y=1", "http://a.test/x?y=1"},
		{"bücher.example", "bücher.example"},
		{"", ""},
		{"a\nb", `"a\nb"`},
		{"a\tb", `"a\tb"`},
		{"a\r", `"a\r"`},
		{"\x1b[2Jcleared", `"\x1b[2Jcleared"`},
		{"a\x00b", `"a\x00b"`},
		{"a\u202eb", `"a\u202eb"`}, // right-to-left override
		{"a\u200bb", `"a\u200bb"`}, // zero-width space
		{"bad \xff utf-8", `"bad \xff utf-8"`},
		{"\u0085next line", `"\u0085next line"`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestAdminTablesHostile: exceptions, lost tasks and slaves whose URLs,
// hosts, slave ids and messages hold newlines, tabs and terminal escapes
// print as one table line each, with no control character but the line
// ends.
func TestAdminTablesHostile(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t)
	crawl := testutil.CrawlName("clihostile")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	redisURL := "redis://127.0.0.1:6379/0"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		redisURL = u
	}
	yaml := "redis:\n  url: " + redisURL + "\nmysql:\n  dsn: " + dsn + "\ncrawl:\n  name: " + crawl +
		"\nrules:\n  dir: \"\"\nadmin:\n  listen: \"\"\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	const evil = "x\n\tINJECTED\r\x1b[2J\u202e<script>window.__xss=1</script>"
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	if err := db.Insert(ctx, []events.Envelope{
		{ID: "1-1", Exception: &events.Exception{Crawl: crawl, Kind: events.KindOther, Host: "h" + evil, Slave: "s" + evil,
			URL: "http://a.test/" + evil, Message: "m" + evil, At: now - 1000}},
		{ID: "1-2", Lost: &events.Lost{Crawl: crawl, URL: "http://a.test/" + evil, Slave: "s" + evil, LeasedAt: now - 9000,
			DetectedAt: now - 100, Reason: "r" + evil}},
	}); err != nil {
		t.Fatal(err)
	}
	ropt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3, ExpectedURLs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	// the heartbeat function refuses such a slave id; a slave's Redis user
	// could still write its registry entry and heartbeat key raw
	hb, err := json.Marshal(events.Heartbeat{Crawl: crawl, Slave: "s" + evil, Host: "box" + evil, State: "st" + evil, RulesVersion: "v" + evil})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "s" + evil}); err == nil || !strings.Contains(err.Error(), "not a slave id") {
		t.Fatalf("heartbeat of a hostile slave id: %v, want refused", err)
	}
	k := f.Keys()
	if err := rdb.ZAdd(ctx, k.Slaves, redis.Z{Score: float64(now), Member: "s" + evil}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, k.SlaveBeat("s"+evil), fmt.Sprintf("%d\t%s", now, hb), 0).Err(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		cmd   string
		lines int // header, one row, and the footer of exceptions
	}{{"exceptions", 3}, {"lost", 2}, {"slaves", 2}} {
		t.Run(tc.cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{tc.cmd, "--config", cfgPath}, strings.NewReader(""), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			text := out.String()
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			if len(lines) != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", len(lines), tc.lines, text)
			}
			if i := strings.IndexFunc(text, func(r rune) bool {
				return r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
			}); i >= 0 {
				t.Errorf("control character %q at %d in:\n%q", text[i:i+1], i, text)
			}
			if !strings.Contains(text, `\x1b[2J`) {
				t.Errorf("the escaped value is not shown:\n%s", text)
			}
		})
	}
}
