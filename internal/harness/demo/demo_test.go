package demo

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/config"
)

// TestDemo runs a small demo crawl with a slave process against the real
// Redis and MariaDB: its summary's counts add up and say what they count,
// and at the end nothing of the demo crawl is left (Redis keys, MySQL rows,
// its WARC directory).
func TestDemo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "slave")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/redcrawl/redcrawl/slave").CombinedOutput(); err != nil {
		t.Fatalf("go build slave: %v\n%s", err, out)
	}
	cfg := config.Default()
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	cfg.MySQL.DSN = storetest.DSN(t)
	cfg.Rules.Dir = ""
	cfg.Render.Enabled = false // the shop is rendered only with Chromium: not needed here
	cfg.Slave.MetricsListen = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := Run(context.Background(), &cfg, Options{Hosts: 2, PagesPerHost: 10, Slaves: 1, SlaveBinary: bin,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Out: &out})
	summary := out.String()
	t.Log(summary)
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	crawl := regexp.MustCompile(`crawl "(demo-\d+)"`).FindStringSubmatch(summary)
	if crawl == nil {
		t.Fatalf("no crawl name in the summary")
	}
	// URLs done = pages stored + disallowed by robots.txt (+ other)
	m := regexp.MustCompile(`URLs done\s+(\d+) = (\d+) fetched and stored \(mysql pages rows\) \+ (\d+) disallowed by robots.txt, not fetched(?: ([+-]\d+) other)?`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("no URLs done breakdown in the summary")
	}
	n := func(s string) int {
		v, _ := strconv.Atoi(strings.TrimPrefix(s, "+"))
		return v
	}
	if done, pages, robots, other := n(m[1]), n(m[2]), n(m[3]), n(m[4]); done != pages+robots+other || robots == 0 {
		t.Errorf("URLs done %d != %d pages + %d robots + %d other (or no robots denials)", done, pages, robots, other)
	}
	// the robots line names both counts, denials and requests that got through
	if !regexp.MustCompile(`robots.txt\s+[1-9]\d* URLs disallowed and never fetched \(exceptions robots_denied\); 0 requests reached a disallowed path`).MatchString(summary) {
		t.Errorf("robots line does not say what it counts")
	}
	if !regexp.MustCompile(`mysql rows\s+pages ` + m[2] + ` \(one a fetch stored\)`).MatchString(summary) {
		t.Errorf("mysql pages rows disagree with URLs done's %s", m[2])
	}
	if !strings.Contains(summary, "removed crawl "+crawl[1]) {
		t.Errorf("no clean-up line")
	}

	// nothing left
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), testutil.CrawlKeyPattern(crawl[1])).Result()
	if err != nil || len(keys) > 0 {
		t.Errorf("redis keys left: %q (%v)", keys, err)
	}
	db, err := store.Open(context.Background(), cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if has, err := db.HasCrawl(context.Background(), crawl[1]); err != nil || has {
		t.Errorf("mysql rows left: %v (%v)", has, err)
	}
	if c, err := db.Counts(context.Background(), crawl[1]); err != nil || c.Exceptions+c.SlaveEvents+c.Pages > 0 {
		t.Errorf("mysql rows left: %+v (%v)", c, err)
	}
	if w := regexp.MustCompile(`warc\s+\d+ files in (\S+)`).FindStringSubmatch(summary); w == nil {
		t.Error("no warc line")
	} else if _, err := os.Stat(w[1]); !os.IsNotExist(err) {
		t.Errorf("warc dir %s left (%v)", w[1], err)
	}
}

// TestMakeDemoNeedsOnlyTheStores: make demo installs Redis and MariaDB,
// not Chromium or qemu-user-static, which the tests need.
func TestMakeDemoNeedsOnlyTheStores(t *testing.T) {
	b, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	for _, want := range []string{"\ndemo: services build\n", "\nservices:\n\t@bash .ci/services\n", "\ntest: test-services\n",
		"\ntest-services:\n\t@bash .ci/services chromium qemu\n"} {
		if !strings.Contains(mk, want) {
			t.Errorf("Makefile lacks %q", want)
		}
	}
}
