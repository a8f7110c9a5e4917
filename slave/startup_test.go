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

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/frontier/frontiertest"
)

// syncBuffer is a bytes.Buffer the Redis client's goroutines may log into
// while the test reads it.
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

// TestStartupErrors runs slave run against a real Redis with ACL users
// given a wrong password, and against a closed loopback port: it exits 1
// with one line that names what to check, at once for the password, after
// redis.startup_timeout for the port.
func TestStartupErrors(t *testing.T) {
	crawl := testutil.CrawlName("slavestart")
	acl := frontiertest.StartACLRedis(t, crawl, "s1")
	user := frontier.ACLUserName(crawl, frontier.RoleSlave, "s1")
	wrongPW := strings.Replace(acl.URL(frontier.RoleSlave, "s1"), frontiertest.ACLPassword(user), "wrong", 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	tests := []struct {
		name     string
		redisURL string
		want     []string
		wantWait bool
	}{
		{name: "wrong password", redisURL: wrongPW,
			want: []string{"slave: redis at", "refused this process", "WRONGPASS", "check redis.url's user and password"}},
		{name: "closed port", redisURL: "redis://" + closed + "/0", wantWait: true,
			want: []string{"slave: redis at redis://" + closed + "/0 not reachable within 3s", "connection refused", "redis.startup_timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath := filepath.Join(t.TempDir(), "config.yaml")
			yaml := fmt.Sprintf("redis:\n  url: %s\n  startup_timeout: 3s\ncrawl:\n  name: %s\nrules:\n  dir: \"\"\nslave:\n  metrics_listen: \"\"\n",
				tc.redisURL, crawl)
			if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb syncBuffer
			code := run([]string{"run", "--config", cfgPath, "--id", "s1"}, &out, &errb)
			stderr := errb.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			var line string
			for l := range strings.SplitSeq(stderr, "\n") {
				if strings.HasPrefix(l, "slave:") {
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
			if n := strings.Count(stderr, "failed to dial"); n > 1 {
				t.Errorf("go-redis logged %d dial failures, want at most 1:\n%s", n, stderr)
			}
		})
	}
}
