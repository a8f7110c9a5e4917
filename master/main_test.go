package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestAdminCommands runs the admin commands against the real Redis and
// MariaDB: tables by default, JSON with --json, exit 2 for bad usage.
func TestAdminCommands(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t)
	crawl := testutil.CrawlName("cli")
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
	// some state: a failed task, exceptions of two kinds, a lost task
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	if err := db.Insert(ctx, []events.Envelope{
		{ID: "1-1", Exception: &events.Exception{Crawl: crawl, Kind: events.KindTimeout, Host: "a.test", Slave: "s1", URL: "http://a.test/1", Message: "deadline", At: now - 1000}},
		{ID: "1-2", Exception: &events.Exception{Crawl: crawl, Kind: events.KindDNS, Host: "b.test", Slave: "s2", URL: "http://b.test/", Message: "no such host", At: now - 500}},
		{ID: "1-3", Exception: &events.Exception{Crawl: crawl, Kind: events.KindTimeout, Host: "b.test", Slave: "s1", URL: "http://b.test/2", Message: "old", At: now - 3*3600*1000}},
		{ID: "1-4", Lost: &events.Lost{Crawl: crawl, URL: "http://a.test/lost", Slave: "s9", LeasedAt: now - 9000, DetectedAt: now - 100, Reason: "slave_dead"}},
	}); err != nil {
		t.Fatal(err)
	}
	ropt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	f, err := frontier.NewRedis(ctx, rdb, frontier.Options{Crawl: crawl, HostConcurrency: 1, LeaseDuration: time.Minute, MaxAttempts: 3,
		ExpectedURLs: 10000, ScopeBySeeds: true}) // as the master opens it: no crawl.allow_hosts
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	if _, err := f.Seed(ctx, []frontier.Task{{URL: "http://a.test/x", Host: "a.test", ScopeHost: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	res, err := f.ClaimWaitOpts(ctx, "s1", 1, frontier.ClaimOptions{})
	ls := res.Leases
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim = %d, %v", len(ls), err)
	}
	if _, err := f.Complete(ctx, "s1", []frontier.Completion{{Lease: ls[0], Outcome: frontier.Fail}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Heartbeat(ctx, events.Heartbeat{Slave: "s1", Host: "box", Pages: 7}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string // in stdout (code 0) or stderr
	}{
		{"exceptions table", []string{"exceptions"}, 0, []string{"KIND", "timeout", "dns", "(3 of 3)"}},
		{"exceptions since", []string{"exceptions", "--since", "1h"}, 0, []string{"(2 of 2)"}},
		{"exceptions kind host", []string{"exceptions", "--kind", "timeout", "--host", "a.test"}, 0, []string{"deadline", "(1 of 1)"}},
		{"exceptions slave", []string{"exceptions", "--slave", "s2"}, 0, []string{"no such host", "(1 of 1)"}},
		{"lost", []string{"lost"}, 0, []string{"slave_dead", "http://a.test/lost"}},
		{"slaves", []string{"slaves"}, 0, []string{"s1", "box", "running"}},
		{"pause", []string{"pause"}, 0, []string{"crawl paused"}},
		{"pause again", []string{"pause"}, 0, []string{"already paused"}},
		{"resume", []string{"resume"}, 0, []string{"crawl resumed"}},
		{"requeue", []string{"requeue", "--failed"}, 0, []string{"1 failed tasks requeued"}},
		{"drain", []string{"drain", "--slave", "s1"}, 0, []string{"s1 draining"}},
		{"drain unknown", []string{"drain", "--slave", "nobody"}, 2, []string{"no registered slave"}},
		{"retire proxy", []string{"retire-proxy", "--proxy", "http://p1.test:3128"}, 0, []string{"retired"}},
		{"requeue needs --failed", []string{"requeue"}, 2, []string{"--failed"}},
		{"drain needs --slave", []string{"drain"}, 2, []string{"--slave is required"}},
		{"bad limit", []string{"exceptions", "--limit", "0"}, 2, []string{"--limit"}},
		{"stray argument", []string{"lost", "extra"}, 2, []string{"unexpected arguments"}},
		{"bad config key", []string{"slaves", "--config", filepath.Join(dir, "missing.yaml")}, 2, []string{"missing.yaml"}},
		{"revoke the sessions of a crawl that does not exist", []string{"dashboard-link", "--revoke-all", "--crawl", crawl + "x"}, 2,
			[]string{"does not exist", "did you mean"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{}, tc.args...)
			if !strings.Contains(strings.Join(args, " "), "--config") {
				args = append(args, "--config", cfgPath)
			}
			var out, errb bytes.Buffer
			code := run(args, strings.NewReader(""), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errb.String())
			}
			text := out.String()
			if code != 0 {
				text = errb.String()
			}
			for _, want := range tc.contains {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
		})
	}

	// --json is machine-readable
	var out, errb bytes.Buffer
	if code := run([]string{"exceptions", "--json", "--kind", "timeout", "--config", cfgPath}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exceptions --json: exit %d: %s", code, errb.String())
	}
	var page struct {
		Total int `json:"total"`
		Items []struct {
			Kind string `json:"kind"`
			URL  string `json:"url"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out.Bytes(), &page); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	if page.Total != 2 || len(page.Items) != 2 || page.Items[0].URL != "http://a.test/1" {
		t.Errorf("exceptions --json = %+v, want the 2 timeouts, newest first", page)
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Failed != 0 || st.Queued != 1 || st.Paused {
		t.Errorf("after the commands: %+v, %v", st, err)
	}

	// dashboard-link --revoke-all: a new session epoch, which every master
	// reads (TestDashboardSessions runs one against it)
	sessions := frontier.NewSessions(rdb, crawl)
	before, err := sessions.State(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"dashboard-link", "--revoke-all", "--config", cfgPath}, strings.NewReader(""), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "every dashboard session of crawl "+crawl+" is revoked") {
		t.Fatalf("dashboard-link --revoke-all: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	if after, err := sessions.State(ctx, time.Now()); err != nil || after.Epoch == before.Epoch {
		t.Errorf("session epoch %q after --revoke-all, %v; was %q", after.Epoch, err, before.Epoch)
	}
}
