package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// shopRules is the rule directory of the test site's shop.
const shopRules = "testdata/parse"

// startShop starts the test site with its shop (host 1, 127.0.0.3),
// robots.txt (/private/ disallowed) and pages with robots meta tags and
// canonical URLs (/meta/ on host 0).
func startShop(t *testing.T) *testsite.Site {
	t.Helper()
	site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 4, Dynamic: true, Robots: true, Meta: true,
		Seed: 7, CrossHostRatio: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	return site
}

// writeConfig writes a config file for the test site: its hosts in the
// crawl's scope, loopback allowed, the given Redis, MySQL, crawl name and
// rule directory, then extra YAML.
func writeConfig(t *testing.T, redisURL, dsn, crawl, rulesDir, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	y := fmt.Sprintf(`redis:
  url: %q
mysql:
  dsn: %q
crawl:
  name: %s
  allow_hosts: [127.0.0.2, 127.0.0.3]
fetch:
  allow_private_networks: true
  timeout: 5s
politeness:
  delay: 10ms
rules:
  dir: %q
slave:
  metrics_listen: ""
log:
  level: warn
%s`, redisURL, dsn, crawl, rulesDir, extra)
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// slaveParse runs "slave parse args..." and returns its exit status and
// output.
func slaveParse(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv(cli.EnvConfig, "")
	var out, errb bytes.Buffer
	code := run(append([]string{"parse"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// parsedJSON runs "slave parse --json args..." and decodes its output.
func parsedJSON(t *testing.T, args ...string) (int, *slaved.Parsed, string) {
	t.Helper()
	code, out, errOut := slaveParse(t, append([]string{"--json"}, args...)...)
	var p slaved.Parsed
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("slave parse --json %q: exit %d, output not JSON (%v):\n%s\nstderr:\n%s", args, code, err, out, errOut)
	}
	return code, &p, errOut
}

// fields decodes an item's fields.
func fields(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("item fields %s: %v", raw, err)
	}
	return m
}

// itemOf is the fields of the one item of a parse.
func itemOf(t *testing.T, p *slaved.Parsed) map[string]any {
	t.Helper()
	if len(p.Items) != 1 {
		t.Fatalf("items %+v, want 1", p.Items)
	}
	return fields(t, p.Items[0].Fields)
}

// state is what a crawl keeps: its Redis keys with a digest of each value
// (DUMP), and its MySQL tables' row counts and checksums.
type state struct {
	Keys   map[string]string
	Tables map[string]string
}

func crawlState(t *testing.T, rdb *redis.Client, db *sql.DB, crawl string) state {
	t.Helper()
	ctx := context.Background()
	st := state{Keys: map[string]string{}, Tables: map[string]string{}}
	iter := rdb.Scan(ctx, 0, "*"+crawl+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		dump, err := rdb.Dump(ctx, k).Result()
		if err != nil && err != redis.Nil {
			t.Fatalf("dump %s: %v", k, err)
		}
		st.Keys[k] = fmt.Sprintf("%x", sha256.Sum256([]byte(dump)))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	for _, name := range tables {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+name+"`").Scan(&n); err != nil {
			t.Fatal(err)
		}
		var tbl string
		var sum sql.NullInt64
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE `"+name+"`").Scan(&tbl, &sum); err != nil {
			t.Fatal(err)
		}
		st.Tables[name] = fmt.Sprintf("%d rows, checksum %d", n, sum.Int64)
	}
	return st
}

// TestParseMatchesCrawl crawls a product page of the test site's shop
// with the shop's rule file (a master, a slave, the real Redis and MySQL),
// then runs "slave parse" on the same page with the same config: it prints
// the item the crawl stored, field by field, and leaves no key in Redis
// and no row in MySQL that was not there.
func TestParseMatchesCrawl(t *testing.T) {
	site := startShop(t)
	product := site.Shop().Products[6].URL // "Salt & Pepper Mill": an entity in the title
	crawl := testutil.CrawlName("parse")
	dsn := storetest.DSN(t)
	redisURL := config.Default().Redis.URL
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		redisURL = u
	}
	cfgPath := writeConfig(t, redisURL, dsn, crawl, shopRules, "")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Crawl.MaxDepth = 1
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Lease.RetryBase = 50 * time.Millisecond
	cfg.Slave.HeartbeatInterval = 200 * time.Millisecond
	cfg.Slave.IdlePoll = 50 * time.Millisecond
	cfg.Master.RecoverInterval = 200 * time.Millisecond
	cfg.Master.Quiescence = 800 * time.Millisecond
	cfg.Dedup.ExpectedURLs = 1000
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// the rules are in force before the slave's first claim
	set, err := rules.LoadDir(shopRules, rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blob, err := set.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.PutRules(ctx, set.Version, blob); err != nil {
		t.Fatal(err)
	}
	if res, err := masterd.Seed(ctx, cfg, []string{product}); err != nil || res.Added != 1 {
		t.Fatalf("seed: %+v %v", res, err)
	}
	masterDone := make(chan error, 1)
	go func() { masterDone <- masterd.New(cfg, masterd.Options{ExitWhenDone: true}).Run(ctx) }()
	s, err := slaved.New(cfg, slaved.Options{ID: "crawler", ExitWhenDone: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatalf("slave: %v", err)
	}
	if err := <-masterDone; err != nil {
		t.Fatalf("master: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the crawl did not finish in 2 minutes")
	}

	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	type item struct {
		Rule, Item, URL string
		Fields          map[string]any
	}
	var stored []item
	err = st.ExportItems(context.Background(), store.ItemFilter{Crawl: crawl}, func(r store.ItemRow) error {
		if r.URL == product {
			stored = append(stored, item{r.Rule, r.Item, r.URL, fields(t, r.Data)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 {
		t.Fatalf("the crawl stored %d items for %s, want 1", len(stored), product)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := crawlState(t, rdb, db, crawl)

	if len(before.Keys) == 0 || before.Tables["items"] == "" {
		t.Fatalf("no crawl state to compare: %+v", before)
	}

	code, p, errOut := parsedJSON(t, "--config", cfgPath, product)
	if code != 0 {
		t.Fatalf("slave parse --json: exit %d, stderr:\n%s", code, errOut)
	}
	var parsed []item
	for _, it := range p.Items {
		parsed = append(parsed, item{it.Rule, it.Item, it.URL, fields(t, it.Fields)})
	}
	if d := cmp.Diff(stored, parsed); d != "" {
		t.Errorf("items of slave parse differ from the crawl's (-crawl +parse):\n%s", d)
	}
	code, text, errOut := slaveParse(t, "--config", cfgPath, product)
	if code != 0 {
		t.Fatalf("slave parse: exit %d, stderr:\n%s", code, errOut)
	}
	// the text output shows every field the crawl stored, as JSON
	for name, v := range stored[0].Fields {
		js := fieldText(t, v)
		if !containsLine(text, append([]string{name}, strings.Fields(js)...)...) {
			t.Errorf("slave parse does not print field %s = %s:\n%s", name, js, text)
		}
	}
	after := crawlState(t, rdb, db, crawl)
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("slave parse changed the crawl's state (-before +after):\n%s", d)
	}
	t.Logf("%d Redis keys, %d tables unchanged; slave parse printed:\n%s", len(before.Keys), len(before.Tables), text)
}

// fieldText is v as slave parse prints a field.
func fieldText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return jsonText(b)
}

// containsLine reports whether some line of text has the words in order,
// separated by blanks.
func containsLine(text string, words ...string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		if slices.Equal(strings.Fields(line), words) {
			return true
		}
	}
	return false
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestParse runs slave parse on the test site's pages: its text and JSON
// output, a saved page, robots.txt, an unreachable site, bad rules and bad
// usage. Its config names a Redis and a MySQL that do not exist: parse
// never connects to them.
func TestParse(t *testing.T) {
	site := startShop(t)
	shop := site.Shop()
	product := shop.Products[0]
	dead := closedPort(t)
	cfgPath := writeConfig(t, "redis://"+dead+"/0", "root@tcp("+dead+")/none", "parse-test", shopRules, "")
	noRules := writeConfig(t, "redis://"+dead+"/0", "root@tcp("+dead+")/none", "parse-test", "", "")
	page1 := site.PageURL(0, 1)
	private := strings.TrimSuffix(site.HostURLs()[0], "/") + "/private/1"

	// the product page saved as a file
	resp, err := http.Get(product.URL)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	savedPath := filepath.Join(t.TempDir(), "product.html")
	if err := os.WriteFile(savedPath, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	static := product.StaticItem()
	wantItem := map[string]any{"title": static.Title, "sku": static.SKU, "price": static.Price, "price_text": "",
		"availability": static.Availability, "images": []any{static.Images[0], static.Images[1]}}

	badRules := t.TempDir()
	if err := os.WriteFile(filepath.Join(badRules, "shop.yaml"), []byte("hosts: [127.0.0.3]\nfetch:\n  timeout: soon\nitems:\n  - name: p\n    fields:\n      - {name: t, slector: h1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("product page, text", func(t *testing.T) {
		code, out, errOut := slaveParse(t, "--config", cfgPath, product.URL)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		for _, want := range [][]string{
			{"url", product.URL},
			{"rule", "set", "shop", "(shop.yaml)"},
			{"robots.txt", "allowed"},
			{"render", "static:", "no", "render", "rule", "covers", "it"},
			{"outcome", "done"},
			{"robots", "none"},
			{"canonical", "none"},
			{"items:", "1"},
			{"shop/product", product.URL},
			{"sku", `"` + static.SKU + `"`},
			append([]string{"title"}, strings.Fields(fieldText(t, static.Title))...),
			{"links:", "1", "(1", "follow)"},
			{"follow", shop.Catalogue},
		} {
			if !containsLine(out, want...) {
				t.Errorf("no line %q in:\n%s", strings.Join(want, " "), out)
			}
		}
		t.Logf("slave parse %s:\n%s", product.URL, out)
	})

	t.Run("product page, json", func(t *testing.T) {
		code, p, errOut := parsedJSON(t, "--config", cfgPath, product.URL)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if d := cmp.Diff(wantItem, itemOf(t, p)); d != "" {
			t.Errorf("item (-want +got):\n%s", d)
		}
		type summary struct {
			RuleSet, RuleFile, Robots, Outcome string
			Status                             int
			Links                              []slaved.LinkVerdict
		}
		got := summary{p.RuleSet, p.RuleFile, p.Robots, p.Outcome, p.Page.Status, p.Links}
		want := summary{"shop", "shop.yaml", "allowed", "done", 200, []slaved.LinkVerdict{{URL: shop.Catalogue, Verdict: slaved.LinkFollow}}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})

	t.Run("the rule set's user agent and header", func(t *testing.T) {
		dir := t.TempDir()
		base, err := os.ReadFile(filepath.Join(shopRules, "shop.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		rule := string(base) + "fetch:\n  user_agents: [ParseBot/1]\n  headers: {X-Site-Key: k1}\n"
		if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(rule), 0o644); err != nil {
			t.Fatal(err)
		}
		u := shop.Products[1].URL
		hits := len(site.Hits())
		if code, _, errOut := slaveParse(t, "--config", cfgPath, "--rules", dir, u); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		var got []string
		for _, h := range site.Hits()[hits:] {
			got = append(got, h.URL()+" "+h.UserAgent+" "+h.Header.Get("X-Site-Key"))
		}
		want := []string{strings.TrimSuffix(shop.Catalogue, "/shop/") + "/robots.txt ParseBot/1 k1", u + " ParseBot/1 k1"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("requests (-want +got):\n%s", d)
		}
	})

	t.Run("links of a root", func(t *testing.T) {
		// the other host out of the crawl's scope, two path segments a trap
		t.Setenv("CRAWLER_CRAWL_ALLOW_HOSTS", "127.0.0.2")
		t.Setenv("CRAWLER_CRAWL_MAX_PATH_SEGMENTS", "1")
		code, p, errOut := parsedJSON(t, "--config", noRules, site.HostURLs()[0])
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		got := map[slaved.LinkVerdict]int{}
		for _, l := range p.Links {
			if l.Verdict == slaved.LinkFollow {
				l.URL = "" // the meta hub, the private pages
			}
			got[l]++
		}
		want := map[slaved.LinkVerdict]int{
			{URL: site.HostURLs()[1], Verdict: slaved.LinkOutOfScope, Reason: "out of scope (host)"}: 1,
			{URL: site.PageURL(0, 1), Verdict: slaved.LinkTrap, Reason: "too_many_segments"}:         1,
			{Verdict: slaved.LinkFollow}: got[slaved.LinkVerdict{Verdict: slaved.LinkFollow}],
		}
		for l := range got {
			if l.Verdict == slaved.LinkTrap && l.URL != site.PageURL(0, 1) {
				want[l] = got[l] // the other pages, which this site's seed decides
			}
		}
		if d := cmp.Diff(want, got); d != "" || got[slaved.LinkVerdict{Verdict: slaved.LinkFollow}] == 0 {
			t.Errorf("link verdicts (-want +got):\n%s", d)
		}
		t.Logf("%+v", p.Links)
	})

	t.Run("robots meta and canonical", func(t *testing.T) {
		for _, mp := range site.Meta().Pages {
			code, p, errOut := parsedJSON(t, "--config", noRules, mp.URL)
			if code != 0 {
				t.Errorf("%s: exit %d, stderr %q", mp.URL, code, errOut)
				continue
			}
			type page struct {
				Robots, Canonical string
				Links             []slaved.LinkVerdict
			}
			want := page{Robots: mp.Robots, Canonical: mp.Canonical, Links: []slaved.LinkVerdict{}}
			if mp.Target != "" {
				v := slaved.LinkVerdict{URL: mp.Target, Verdict: slaved.LinkFollow}
				if !mp.Followed {
					v.Verdict, v.Reason = slaved.LinkNoFollow, "the page says nofollow"
				}
				want.Links = append(want.Links, v)
			}
			if d := cmp.Diff(want, page{p.Page.Robots, p.Page.Canonical, p.Links}); d != "" {
				t.Errorf("%s (-want +got):\n%s", mp.URL, d)
			}
		}
	})

	t.Run("saved page", func(t *testing.T) {
		hits := len(site.Hits())
		code, p, errOut := parsedJSON(t, "--config", cfgPath, "--body", savedPath, "--url", product.URL)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if d := cmp.Diff(wantItem, itemOf(t, p)); d != "" {
			t.Errorf("item of the saved page (-want +got):\n%s", d)
		}
		if p.Robots != "not asked: a saved page" || p.Page.ContentType != "text/html; charset=utf-8" {
			t.Errorf("robots %q, content type %q", p.Robots, p.Page.ContentType)
		}
		if n := len(site.Hits()); n != hits {
			t.Errorf("parsing a saved page made %d requests", n-hits)
		}
	})

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout [][]string // lines, as words
		stderr []string   // substrings
		hits   map[string]int
	}{
		{name: "robots.txt disallows", args: []string{"--config", cfgPath, private}, code: 1,
			stdout: [][]string{{"robots.txt", "disallowed", "for", "redcrawl"}, {"outcome", "done"}, {"items:", "0"}},
			stderr: []string{"slave parse: " + private + ": robots.txt disallowed for redcrawl (--ignore-robots fetches it anyway)\n"},
			hits:   map[string]int{private: 0}},
		{name: "robots.txt ignored", args: []string{"--config", cfgPath, "--ignore-robots", private}, code: 0,
			stdout: [][]string{{"robots.txt", "not", "asked:", "robots.txt", "ignored"}},
			hits:   map[string]int{private: 1}},
		{name: "unreachable", args: []string{"--config", cfgPath, "http://" + dead + "/x"}, code: 1,
			stdout: [][]string{{"outcome", "retry", "(robots.txt", "unavailable)"}},
			stderr: []string{"not fetched (retry: robots.txt unavailable): robots.txt unavailable: ", "connection refused"}},
		{name: "unreachable, robots.txt ignored", args: []string{"--config", cfgPath, "--ignore-robots", "http://" + dead + "/x"}, code: 1,
			stdout: [][]string{{"outcome", "retry", "(connect)"}},
			stderr: []string{"not fetched (retry: connect): ", "connection refused"}},
		{name: "without a config file: loopback refused", args: []string{product.URL}, code: 1,
			stderr: []string{"not fetched (fail: blocked)", "set fetch.allow_private_networks: true"}},
		{name: "without rules", args: []string{"--config", noRules, product.URL}, code: 0,
			stdout: [][]string{{"rule", "set", "none"}, {"items:", "0"}}},
		{name: "bad rules", args: []string{"--config", cfgPath, "--rules", badRules, product.URL}, code: 2,
			stderr: []string{badRules + "/shop.yaml:3:12: bad duration \"soon\"", badRules + `/shop.yaml:7:19: unknown key "slector" in field (did you mean "css"?)`}},
		{name: "no rules directory", args: []string{"--config", cfgPath, "--rules", badRules + "/none", product.URL}, code: 2,
			stderr: []string{"load rules: open " + badRules + "/none: no such file or directory"}},
		{name: "not a URL", args: []string{"--config", cfgPath, "::"}, code: 2, stderr: []string{`slave parse "::"`}},
		{name: "no URL", args: []string{"--config", cfgPath}, code: 2, stderr: []string{"slave parse: no URL", "usage: slave parse"}},
		{name: "two URLs", args: []string{"--config", cfgPath, page1, page1}, code: 2, stderr: []string{"slave parse: one URL"}},
		{name: "--url without --body", args: []string{"--config", cfgPath, "--url", page1}, code: 2,
			stderr: []string{"--url and --content-type go with --body"}},
		{name: "saved page rendered", args: []string{"--config", cfgPath, "--render", "--body", savedPath, "--url", page1}, code: 2,
			stderr: []string{"a saved page (--body) is neither rendered nor checked against robots.txt"}},
		{name: "missing saved page", args: []string{"--config", cfgPath, "--body", savedPath + ".gone", "--url", page1}, code: 2,
			stderr: []string{"no such file or directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := slaveParse(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, words := range tc.stdout {
				if !containsLine(out, words...) {
					t.Errorf("stdout lacks a line %q:\n%s", strings.Join(words, " "), out)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			if tc.code == 2 && out != "" {
				t.Errorf("stdout %q, want none", out)
			}
			for u, n := range tc.hits {
				if got := site.HitCounts()[u]; got != n {
					t.Errorf("%s requested %d times, want %d", u, got, n)
				}
			}
		})
	}
}

// TestParseRender renders with slave parse: --render on a product page
// without a render rule fills the price its script writes; a render rule
// on the catalogue renders it and finds the product links its script
// inserts; with rendering off the catalogue is fetched statically, said
// so, and --render fails.
func TestParseRender(t *testing.T) {
	if _, err := os.Stat(config.Default().Render.ChromePath); err != nil {
		t.Skipf("no Chromium at %s: %v", config.Default().Render.ChromePath, err)
	}
	site := startShop(t)
	shop := site.Shop()
	dead := closedPort(t)
	dir := t.TempDir()
	base, err := os.ReadFile(filepath.Join(shopRules, "shop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withRender := string(base) + "render:\n  - match: ['/shop/$']\n    wait_selector: a.product\n    block: [image]\n"
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(withRender), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, "redis://"+dead+"/0", "root@tcp("+dead+")/none", "parse-test", dir, "")
	off := writeConfig(t, "redis://"+dead+"/0", "root@tcp("+dead+")/none", "parse-test", dir, "render:\n  enabled: false\n")

	t.Run("--render fills the price", func(t *testing.T) {
		p := shop.Products[2]
		code, parsed, errOut := parsedJSON(t, "--config", cfgPath, "--render", p.URL)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if parsed.Render != "rendered: asked for" || !parsed.Page.Rendered {
			t.Fatalf("render %q, page %+v", parsed.Render, parsed.Page)
		}
		got := itemOf(t, parsed)
		if got["price_text"] != p.Item.PriceText {
			t.Errorf("price_text %v, want %q (the script's)", got["price_text"], p.Item.PriceText)
		}
	})

	catalogueLinks := func(p *slaved.Parsed) []string {
		var out []string
		for _, l := range p.Links {
			if strings.Contains(l.URL, "/shop/product/") && l.Verdict == slaved.LinkFollow {
				out = append(out, l.URL)
			}
		}
		sort.Strings(out)
		return out
	}
	t.Run("a render rule renders the catalogue", func(t *testing.T) {
		code, p, errOut := parsedJSON(t, "--config", cfgPath, shop.Catalogue)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if p.Render != "rendered: a render rule of rule set shop covers it" || !p.Page.Rendered {
			t.Errorf("render %q, rendered %v", p.Render, p.Page.Rendered)
		}
		var want []string
		for _, pr := range shop.Products[:testsite.ShopPageSize] {
			want = append(want, pr.URL)
		}
		sort.Strings(want)
		if d := cmp.Diff(want, catalogueLinks(p), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("product links of the rendered catalogue (-want +got):\n%s", d)
		}
	})
	t.Run("rendering off", func(t *testing.T) {
		code, p, errOut := parsedJSON(t, "--config", off, shop.Catalogue)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		want := "static: rule set shop renders it, but this slave cannot render (render.enabled is false)"
		if p.Render != want || p.Page.Rendered || len(catalogueLinks(p)) != 0 {
			t.Errorf("render %q, rendered %v, product links %v; want %q and none", p.Render, p.Page.Rendered, catalogueLinks(p), want)
		}
		code, out, errOut := slaveParse(t, "--config", off, "--render", shop.Products[0].URL)
		if code != 1 || out != "" || !strings.Contains(errOut, "cannot render: render.enabled is false") {
			t.Errorf("--render with rendering off: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}
