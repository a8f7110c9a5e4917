package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

const rulesV1 = `name: site
hosts: [127.0.0.2]
items:
  - name: page
    match: ['/page/\d+$']
    fields:
      - {name: title, css: title, required: true}
`

// rulesV2 adds an item rule; rulesBad has a regex RE2 refuses.
const rulesV2 = rulesV1 + `  - name: heading
    match: ['/page/\d+$']
    fields:
      - {name: h1, css: h1}
      - {name: number, css: h1, transform: [number], type: integer}
`

const rulesBad = rulesV2 + `  - name: broken
    match: ['/page/(\d+$']
    fields:
      - {name: x, css: h1}
`

// waitFor polls cond every 50 ms for at most limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", limit, what)
}

// TestRulesHotReload edits a rule file during a crawl: a valid edit is
// published and every slave switches to it (their heartbeats say so) and
// extracts the new item; an invalid edit is rejected with a rules
// exception naming file and line in MySQL, and the previous version stays
// in force for the master and the slaves.
func TestRulesHotReload(t *testing.T) {
	cfg := crawltest.Config(t)
	site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 300, Seed: 11, Latency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "site.yaml")
	write := func(s string) {
		t.Helper()
		// a new name then a rename: the master never reads half a file
		tmp := filepath.Join(dir, ".site.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(rulesV1)
	cfg.Rules.Dir = dir
	cfg.Rules.Poll = 100 * time.Millisecond
	crawltest.Seed(t, cfg, site)

	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	ctx := context.Background()
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	slaveVersions := func() []string {
		ss, _ := f.Slaves(ctx)
		var vs []string
		for _, s := range ss {
			vs = append(vs, s.RulesVersion)
		}
		return vs
	}
	allOn := func(v string) bool {
		vs := slaveVersions()
		if len(vs) != 2 {
			return false
		}
		for _, x := range vs {
			if x != v {
				return false
			}
		}
		return true
	}

	masterDone := make(chan struct{})
	go func() { defer close(masterDone); crawltest.RunMaster(t, cfg) }()
	crawltest.StartSlave(t, cfg, "hot-1")
	crawltest.StartSlave(t, cfg, "hot-2")

	var v1 string
	waitFor(t, "the first rules version", 10*time.Second, func() bool {
		v, _, ok, _ := f.GetRules(ctx)
		v1 = v
		return ok
	})
	waitFor(t, "both slaves on the first version", 10*time.Second, func() bool { return allOn(v1) })

	write(rulesV2)
	var v2 string
	waitFor(t, "the edited rules published", 10*time.Second, func() bool {
		v, _, _, _ := f.GetRules(ctx)
		v2 = v
		return v != v1
	})
	waitFor(t, "both slaves on the edited rules", 10*time.Second, func() bool { return allOn(v2) })

	write(rulesBad)
	db, err := store.Open(ctx, cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rejected string
	waitFor(t, "the invalid edit recorded", 15*time.Second, func() bool {
		exc, err := db.Exceptions(ctx, store.ExceptionFilter{Crawl: cfg.Crawl.Name, Kind: "rules", Limit: 10})
		if err != nil || len(exc) == 0 {
			return false
		}
		rejected = exc[0].Message
		return true
	})
	if !strings.Contains(rejected, "site.yaml:") || !strings.Contains(rejected, "regex") {
		t.Errorf("rules exception %q does not name the file, line and problem", rejected)
	}
	if v, _, _, _ := f.GetRules(ctx); v != v2 {
		t.Errorf("version in force %s after an invalid edit, want %s", v, v2)
	}
	if !allOn(v2) {
		t.Errorf("slaves on %v after an invalid edit, want %s", slaveVersions(), v2)
	}
	st, err := masterd.Status(ctx, cfg)
	if err != nil || st.RulesVersion != v2 {
		t.Errorf("master status rules version %q (%v), want %s", st.RulesVersion, err, v2)
	}

	<-masterDone
	n := map[string]int{}
	err = db.ExportItems(ctx, store.ItemFilter{Crawl: cfg.Crawl.Name}, func(r store.ItemRow) error {
		n[r.Item]++
		if r.Item == "heading" {
			var d struct {
				H1     string `json:"h1"`
				Number int64  `json:"number"`
			}
			if err := json.Unmarshal(r.Data, &d); err != nil || !strings.HasPrefix(d.H1, "Host 0 page ") || d.Number != 0 {
				t.Errorf("heading item %s: %s (%v)", r.URL, r.Data, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n["page"] == 0 || n["heading"] == 0 || n["broken"] != 0 {
		t.Errorf("items by rule %v: want page and heading items, no broken ones", n)
	}
	t.Logf("items: %v", n)
}
