package slaved_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

const typesRules = `name: types
hosts: [127.0.0.1]
items:
  - name: page
    fields:
      - {name: title, css: h1, required: true}
  - name: api
    match: ['\.json$']
    fields:
      - {name: id, json: '$.id', required: true}
  - name: code
    match: ['\.py$']
    types: ['text/*']
    fields:
      - {name: def, regex: 'def (\w+)', required: true}
`

// TestItemRulesByMediaType crawls an HTML page, a Python file and a JSON
// document with item rules that match every URL: the CSS rule runs on the
// HTML page only (no "field title: missing" for the others), the rule of
// JSON paths alone on the JSON document too (it would run on HTML, for
// its ld+json, were the URL to match), and the rule that says types:
// [text/*] on the Python file.
func TestItemRulesByMediaType(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<html><body><h1>Home</h1></body></html>`))
	})
	mux.HandleFunc("/tool.py", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/x-python")
		w.Write([]byte("def main():\n    pass\n"))
	})
	mux.HandleFunc("/data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": "x7"}`))
	})
	mux.HandleFunc("/robots.txt", http.NotFound)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cfg := config.Default()
	cfg.Crawl.Name = testutil.CrawlName("types")
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		cfg.Redis.URL = u
	}
	host, _, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cfg.Crawl.AllowHosts = []string{host}
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Politeness.Delay = 5 * time.Millisecond
	cfg.Slave.IdlePoll = 20 * time.Millisecond
	cfg.Slave.MetricsListen = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, cfg.Crawl.Name) })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "types.yaml"), []byte(typesRules), 0o644); err != nil {
		t.Fatal(err)
	}
	publishRules(t, &cfg, dir)
	ctx := context.Background()
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	st := f.Stream("test")
	if err := st.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	var tasks []frontier.Task
	for _, p := range []string{"/", "/tool.py", "/data.json"} {
		tasks = append(tasks, frontier.Task{URL: srv.URL + p, Host: srv.Listener.Addr().String(), ScopeHost: host})
	}
	if _, err := f.Seed(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	s, err := slaved.New(&cfg, slaved.Options{ID: "types"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- s.Run(runCtx) }()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if stats, _ := f.Stats(ctx); stats.Done+stats.Failed >= 3 {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	var items, excs []string
	for range 100 {
		es, err := st.Read(ctx, "c", 1000, -1, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			env, err := events.Decode(e.ID, e.Type, e.Data)
			if err != nil {
				t.Fatal(err)
			}
			if it := env.Item; it != nil {
				items = append(items, it.Item+" "+strings.TrimPrefix(it.URL, srv.URL)+" "+string(it.Data))
			}
			if x := env.Exception; x != nil {
				excs = append(excs, x.Kind+": "+x.Message)
			}
		}
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.StreamID
		}
		st.Ack(ctx, ids...)
	}
	slices.Sort(items)
	want := []string{`api /data.json {"id":"x7"}`, `code /tool.py {"def":"main"}`, `page / {"title":"Home"}`}
	if !slices.Equal(items, want) {
		t.Errorf("items %q, want %q", items, want)
	}
	if len(excs) > 0 {
		t.Errorf("exceptions: %q", excs)
	}
}
