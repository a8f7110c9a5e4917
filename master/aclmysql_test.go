package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/redcrawl/redcrawl/master/store/storetest"
)

func TestACLMySQLUsage(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfgPath, []byte("mysql:\n  dsn: crawler_rt@tcp(db:3306)/crawldb\n  migrate_dsn: crawler_mg@tcp(db:3306)/crawldb\n"), 0o600)
	badCfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badCfg, []byte("mysql:\n  dsnn: x\n"), 0o600)
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret'pw\n"), 0o600)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // substrings of stdout (code 0) or stderr
	}{
		{"defaults from the config", []string{"--mysql", "--config", cfgPath}, 0, []string{
			"CREATE USER IF NOT EXISTS 'crawler_rt'@'%' IDENTIFIED BY 'CHANGE-ME';",
			"CREATE USER IF NOT EXISTS 'crawler_mg'@'%' IDENTIFIED BY 'CHANGE-ME';",
			"ON `crawldb`.* TO 'crawler_mg'@'%';",
			"GRANT SELECT, INSERT ON `crawldb`.`pages` TO 'crawler_rt'@'%';",
		}},
		{"flags and a password file", []string{"--config", cfgPath, "--mysql", "--user", "u1", "--host", "10.1.%",
			"--database", "d1", "--migrate-user", "m1", "--password-file", pw}, 0, []string{
			"CREATE USER IF NOT EXISTS 'u1'@'10.1.%' IDENTIFIED BY 's3cret''pw';",
			"GRANT SELECT, INSERT, UPDATE ON `d1`.`items` TO 'u1'@'10.1.%';",
			"TO 'm1'@'10.1.%'",
		}},
		{"bad config", []string{"--mysql", "--config", badCfg}, 2, []string{"mysql.dsnn"}},
		{"bad user", []string{"--mysql", "--config", cfgPath, "--user", "a b"}, 2, []string{`user "a b"`}},
		{"missing password file", []string{"--mysql", "--config", cfgPath, "--password-file", filepath.Join(dir, "nope")}, 2, []string{"--password-file"}},
		{"extra argument", []string{"--mysql", "--config", cfgPath, "x"}, 2, []string{"unexpected arguments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"acl"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.wantCode, stderr.String())
			}
			out := stdout.String()
			if code != 0 {
				out = stderr.String()
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestACLMySQLEndToEnd sets up the users that "master acl --mysql" prints
// on the real server, with their passwords in files, then runs "master
// migrate" (the migration user creates and migrates the database) and
// "master export" (the runtime user reads).
func TestACLMySQLEndToEnd(t *testing.T) {
	ctx := context.Background()
	base, err := mysql.ParseDSN(storetest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	root := base.Clone()
	dbName := base.DBName + "_cli"
	root.DBName = ""
	admin, err := sql.Open("mysql", root.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	rand.Read(b)
	rt, mg := "rc_clirt_"+hex.EncodeToString(b), "rc_climg_"+hex.EncodeToString(b)
	t.Cleanup(func() {
		admin.Exec("DROP DATABASE IF EXISTS `" + dbName + "`")
		admin.Exec("DROP USER IF EXISTS '" + rt + "'@'%'")
		admin.Exec("DROP USER IF EXISTS '" + mg + "'@'%'")
	})
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rtPW, mgPW := write("rt.pw", "rt-"+hex.EncodeToString(b)+"\n"), write("mg.pw", "mg-"+hex.EncodeToString(b)+"\n")
	dsn := func(user string) string {
		c := base.Clone()
		c.User, c.Passwd, c.DBName = user, "", dbName
		return c.FormatDSN()
	}
	cfgPath := write("config.yaml", "mysql:\n  dsn: "+dsn(rt)+"\n  password_file: "+rtPW+
		"\n  migrate_dsn: "+dsn(mg)+"\n  migrate_password_file: "+mgPW+"\nrules:\n  dir: \"\"\n")

	var stdout, stderr bytes.Buffer
	if code := run([]string{"acl", "--mysql", "--config", cfgPath, "--password-file", rtPW, "--migrate-password-file", mgPW},
		nil, &stdout, &stderr); code != 0 {
		t.Fatalf("acl --mysql: exit %d: %s", code, stderr.String())
	}
	before, after, ok := strings.Cut(stdout.String(), "-- 3.")
	if !ok {
		t.Fatalf("no runtime section in:\n%s", stdout.String())
	}
	execScript := func(script string) {
		t.Helper()
		for _, stmt := range strings.Split(script, ";\n") {
			var lines []string
			for _, l := range strings.Split(stmt, "\n") {
				if !strings.HasPrefix(l, "--") && strings.TrimSpace(l) != "" {
					lines = append(lines, l)
				}
			}
			if len(lines) == 0 {
				continue
			}
			if _, err := admin.ExecContext(ctx, strings.Join(lines, "\n")); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	execScript(before)

	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"migrate", "--config", cfgPath}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr.String())
	}
	execScript("-- 3." + after)
	// crawl c exists (export refuses a crawl MySQL holds no rows of)
	if _, err := admin.ExecContext(ctx, "INSERT INTO `"+dbName+"`.seeds (crawl, url_hash, url, added_at) VALUES ('c', UNHEX(MD5('x')), 'http://a.test/', NOW(3))"); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"export", "--config", cfgPath, "--crawl", "c"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("export as the runtime user: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "exported 0 items") {
		t.Errorf("export: %s", stderr.String())
	}
	// The runtime user alone cannot migrate: its config without
	// migrate_dsn works only because the schema is current.
	noMigrate := write("rt-only.yaml", "mysql:\n  dsn: "+dsn(rt)+"\n  password_file: "+rtPW+"\nrules:\n  dir: \"\"\n")
	stderr.Reset()
	if code := run([]string{"export", "--config", noMigrate, "--crawl", "c"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("export as the runtime user without migrate_dsn: exit %d: %s", code, stderr.String())
	}
	var tables int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?", dbName).Scan(&tables); err != nil || tables < 10 {
		t.Errorf("%s has %d tables (%v), want 10", dbName, tables, err)
	}
}
