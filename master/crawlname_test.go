package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// TestUnknownCrawl runs the commands that read or act on a crawl against
// the real Redis and MariaDB with a crawl name that does not exist: each
// exits 2 naming the crawls that do, and creates no key of it in Redis.
// Without --crawl they use crawl.name; status counts the fetches refused
// as private addresses.
func TestUnknownCrawl(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t)
	crawl := testutil.CrawlName("known")
	typo := crawl + "x" // one letter off: suggested
	redisURL := "redis://127.0.0.1:6379/0"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		redisURL = u
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf("redis:\n  url: %s\nmysql:\n  dsn: %s\ncrawl:\n  name: %s\nrules:\n  dir: \"\"\nadmin:\n  listen: \"\"\n", redisURL, dsn, crawl)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ropt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	t.Cleanup(func() {
		testutil.DeleteCrawl(context.Background(), rdb, crawl)
		testutil.DeleteCrawl(context.Background(), rdb, typo)
	})
	if _, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute,
		MaxAttempts: 3, ExpectedURLs: 1000}); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Insert(ctx, []events.Envelope{{ID: "1-1", Item: &events.Item{Crawl: crawl, Rule: "r", Item: "i",
		URL: "http://a.test/", Data: json.RawMessage(`{"title":"A"}`), Slave: "s1", FetchedAt: time.Now().UnixMilli()}},
		{ID: "1-2", Exception: &events.Exception{Crawl: crawl, Kind: events.KindBlocked, Host: "127.0.0.1", Slave: "s1",
			URL: "http://127.0.0.1/", Message: "netguard: refused", At: time.Now().UnixMilli()}}}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // in stdout or stderr
	}{
		{"status unknown", []string{"status", "--crawl", typo}, 2, []string{"crawl " + `"` + typo + `"` + " does not exist", `did you mean "` + crawl + `"`, crawl}},
		{"export unknown", []string{"export", "--crawl", typo}, 2, []string{"does not exist", "the crawls are: " + crawl}},
		{"exceptions unknown", []string{"exceptions", "--crawl", typo}, 2, []string{"does not exist", crawl}},
		{"pause unknown", []string{"pause", "--crawl", typo}, 2, []string{"does not exist", crawl}},
		{"seed --recrawl unknown", []string{"seed", "--recrawl", "--crawl", typo}, 2, []string{"does not exist", crawl}},
		{"status default crawl.name", []string{"status"}, 0, []string{crawl, "private addresses refused  1 (set fetch.allow_private_networks: true"}},
		{"export default crawl.name", []string{"export"}, 0, []string{`"title":"A"`, "exported 1 items"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb syncBuffer
			code := run(append(tc.args, "--config", cfgPath), strings.NewReader(""), &out, &errb)
			all := out.String() + errb.String()
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.wantCode, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			keys, err := rdb.Keys(ctx, testutil.CrawlKeyPattern(typo)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) > 0 {
				t.Errorf("keys of the unknown crawl created: %q", keys)
			}
		})
	}
}
