package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/doccheck"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/cli"
)

func TestACLUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no crawl", []string{"acl", "--role", "master"}, 2, "--crawl is required"},
		{"slave without an id", []string{"acl", "--crawl", "news"}, 2, "needs --slave ID"},
		{"bad role", []string{"acl", "--crawl", "news", "--role", "root"}, 2, `role "root"`},
		{"bad slave id", []string{"acl", "--crawl", "news", "--slave", "pi*1"}, 2, "slave id"},
		{"bad crawl", []string{"acl", "--crawl", "ne}ws", "--role", "master"}, 2, "crawl name"},
		{"bad user", []string{"acl", "--crawl", "news", "--role", "master", "--user", "a b"}, 2, "--user"},
		{"bad format", []string{"acl", "--crawl", "news", "--role", "master", "--format", "json"}, 2, "--format"},
		{"extra argument", []string{"acl", "--crawl", "news", "--role", "master", "x"}, 2, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.args, nil, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.err) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut.String(), tc.code, tc.err)
			}
		})
	}
}

// TestACLFileFromCLI runs docs/deploy.md step 4's acl commands as
// written, its loop over the slaves unrolled and /etc/redcrawl made the
// test's: the master's and the slaves' lines from bin/master acl
// --password-file, in the ACL file of a real redis-server after
// deploy/redis/users.acl.example's lines; each user logs in with its
// password file and is held to its crawl.
func TestACLFileFromCLI(t *testing.T) {
	t.Setenv(cli.EnvConfig, "")
	dir := t.TempDir()
	etc := strings.NewReplacer("/etc/redcrawl/", dir+"/")
	masterPW := filepath.Join(dir, "credentials", "master", "redis-password") // made by the command
	slavePW := filepath.Join(dir, "credentials", "slave-pi1", "redis-password")
	for _, d := range []string{filepath.Dir(masterPW), filepath.Dir(slavePW)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(slavePW, []byte("0123456789abcdef-pi1\n"), 0o600); err != nil { // openssl rand -hex 32 > ...
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "deploy", "redis", "users.acl.example"))
	if err != nil {
		t.Fatal(err)
	}
	acl := []string{strings.TrimSpace(string(example))}
	doc, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	loop := regexp.MustCompile(`for pi in ([a-z0-9 ]+); do\n? *redcrawl-master acl`).FindSubmatch(doc)
	if loop == nil {
		t.Fatal("docs/deploy.md step 4 has no loop over the slaves running redcrawl-master acl")
	}
	var ran int
	for _, c := range doccheck.Commands(t, "redcrawl-master") {
		if c.File != "docs/deploy.md" || len(c.Args) < 2 || c.Args[1] != "acl" || slices.Contains(c.Args, "--mysql") {
			continue
		}
		pis := []string{""}
		if strings.Contains(c.Text, "$pi") {
			pis = strings.Fields(string(loop[1]))
		}
		for _, pi := range pis {
			var args []string
			for _, a := range c.Args[1:] {
				args = append(args, etc.Replace(strings.ReplaceAll(a, "$pi", pi)))
			}
			if pwFile := args[slices.Index(args, "--password-file")+1]; pwFile != masterPW && pwFile != slavePW {
				if err := os.MkdirAll(filepath.Dir(pwFile), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			var out, errOut bytes.Buffer
			if code := run(args, nil, &out, &errOut); code != 0 {
				t.Fatalf("%s as %v: exit %d: %s", c, args, code, errOut.String())
			}
			if strings.Contains(out.String(), "0123456789abcdef-pi1") {
				t.Fatal("the ACL line holds the password in clear")
			}
			acl = append(acl, strings.TrimSpace(out.String()))
			ran++
		}
	}
	if ran < 2 {
		t.Fatalf("docs/deploy.md step 4 ran %d acl commands, want the master's and the slaves'", ran)
	}
	if fi, err := os.Stat(masterPW); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("made password file: %v, %v; want mode 0600", fi, err)
	}
	aclFile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclFile, []byte(strings.Join(acl, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	login := func(addr, user, pwFile string) *redis.Client {
		pw, err := os.ReadFile(pwFile)
		if err != nil {
			t.Fatal(err)
		}
		return redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: strings.TrimSuffix(string(pw), "\n"), MaxRetries: -1})
	}
	srv := testutil.StartRedis(t, func(ctx context.Context, addr string) error {
		c := login(addr, "redcrawl-master-news", masterPW)
		defer c.Close()
		return c.Ping(ctx).Err()
	}, "--aclfile", aclFile)
	ctx := context.Background()
	m := login(srv.Addr, "redcrawl-master-news", masterPW)
	defer m.Close()
	if err := m.HSet(ctx, "crawl:{news}:rules", "version", "1").Err(); err != nil {
		t.Fatalf("master writes its crawl: %v", err)
	}
	if err := m.Set(ctx, "crawl:{other}:x", "1", 0).Err(); err == nil {
		t.Error("the master's user wrote another crawl")
	}
	s := login(srv.Addr, "redcrawl-slave-pi1", slavePW)
	defer s.Close()
	if err := s.HGet(ctx, "crawl:{news}:rules", "version").Err(); err != nil {
		t.Fatalf("slave reads the rules: %v", err)
	}
	if err := s.HSet(ctx, "crawl:{news}:rules", "version", "2").Err(); err == nil {
		t.Error("the slave's user rewrote the rules")
	}
	if err := s.FlushAll(ctx).Err(); err == nil {
		t.Error("the slave's user ran FLUSHALL")
	}
}
