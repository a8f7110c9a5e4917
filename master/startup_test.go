package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// syncBuffer is a bytes.Buffer the client libraries' goroutines may log
// into while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestStartupErrors runs master commands against a real Redis with ACL
// users and the real MariaDB given wrong credentials or a closed port: each
// exits 1 with one line that names what to check; credentials refused end
// the command without a wait (no "waiting for" line), a closed port after
// redis.startup_timeout / mysql.startup_timeout.
func TestStartupErrors(t *testing.T) {
	crawl := testutil.CrawlName("startup")
	acl := frontiertest.StartACLRedis(t, crawl, "s1")
	master := acl.URL(frontier.RoleMaster, "")
	wrongPW := strings.Replace(master, frontiertest.ACLPassword(frontier.ACLUserName(crawl, frontier.RoleMaster, "")), "wrong", 1)
	slaveUser := acl.URL(frontier.RoleSlave, "s1") // may not load the library
	dsn := storetest.DSN(t)
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mc.Passwd = "wrong-password"
	badDSN := mc.FormatDSN()
	closed := closedPort(t)
	mc.Addr, mc.Passwd = closedPort(t), ""
	closedDSN := mc.FormatDSN()

	tests := []struct {
		name     string
		redisURL string
		dsn      string
		args     []string
		timeout  string   // redis.startup_timeout and mysql.startup_timeout; "" = 1s
		want     []string // in the one line
		wantWait bool     // a "waiting for" line before it
	}{
		{name: "run redis wrong password", redisURL: wrongPW, dsn: dsn, args: []string{"run"},
			want: []string{"master: redis at", "refused this process", "WRONGPASS", "check redis.url's user and password"}},
		{name: "run redis acl user without the rights", redisURL: slaveUser, dsn: dsn, args: []string{"run"},
			want: []string{"master: redis at", "refused this process", "NOPERM", "ACL rules"}},
		{name: "run redis closed port", redisURL: "redis://" + closed + "/0", dsn: dsn, args: []string{"run"}, wantWait: true,
			timeout: "3s", // go-redis's first call (5 dials) may take more than 1s: its error is then the deadline's
			want:    []string{"master: redis at redis://" + closed + "/0 not reachable within 3s", "connection refused", "check redis.url", "redis.startup_timeout"}},
		{name: "run mysql wrong password", redisURL: master, dsn: badDSN, args: []string{"run"},
			want: []string{"master: mysql at", "refused this process", "Access denied", "check mysql.dsn's user and password"}},
		{name: "run mysql closed port", redisURL: master, dsn: closedDSN, args: []string{"run"}, wantWait: true,
			want: []string{"master: mysql at " + mc.Addr + " not reachable within 1s", "check mysql.dsn's address", "mysql.startup_timeout"}},
		{name: "status redis wrong password", redisURL: wrongPW, dsn: dsn, args: []string{"status"},
			want: []string{"master status: redis at", "refused this process", "check redis.url's user and password"}},
		{name: "export mysql wrong password", redisURL: master, dsn: badDSN, args: []string{"export", "--crawl", crawl},
			want: []string{"master export: mysql at", "refused this process", "check mysql.dsn's user"}},
		{name: "slaves redis closed port", redisURL: "redis://" + closed + "/0", dsn: dsn, args: []string{"slaves"},
			want: []string{"master slaves: redis at redis://" + closed + "/0 not reachable (", "check redis.url"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath := filepath.Join(t.TempDir(), "config.yaml")
			timeout := tc.timeout
			if timeout == "" {
				timeout = "1s"
			}
			yaml := fmt.Sprintf("redis:\n  url: %[1]s\n  startup_timeout: %[2]s\nmysql:\n  dsn: %[3]s\n  startup_timeout: %[2]s\ncrawl:\n  name: %[4]s\nrules:\n  dir: \"\"\nadmin:\n  listen: \"\"\n",
				tc.redisURL, timeout, tc.dsn, crawl)
			if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb syncBuffer
			code := run(append(tc.args, "--config", cfgPath), strings.NewReader(""), &out, &errb)
			stderr := errb.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			var line string
			for l := range strings.SplitSeq(stderr, "\n") {
				if strings.HasPrefix(l, "master") {
					if line != "" {
						t.Fatalf("two error lines:\n%s", stderr)
					}
					line = l
				}
			}
			t.Log(line)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("error line lacks %q:\n%s\nstderr:\n%s", w, line, stderr)
				}
			}
			if got := strings.Contains(stderr, "waiting for"); got != tc.wantWait {
				t.Errorf("a waiting line: %v, want %v; stderr:\n%s", got, tc.wantWait, stderr)
			}
			// go-redis's own dial failures are rate-limited as ours: at
			// most one line in the wait
			if n := strings.Count(stderr, "failed to dial"); n > 1 {
				t.Errorf("go-redis logged %d dial failures, want at most 1:\n%s", n, stderr)
			}
			if strings.Contains(stderr, "wrong-password") || strings.Contains(stderr, ":wrong@") {
				t.Errorf("a password in the output:\n%s", stderr)
			}
		})
	}
}
