package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// secretFile writes content to a fresh file and returns its path.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecretFiles(t *testing.T) {
	redisPW := secretFile(t, "r3dis p@ss/word\n")
	mysqlPW := secretFile(t, "my:sql@pw\r\n")
	migratePW := secretFile(t, "migr8-pw") // no newline
	token := secretFile(t, "0123456789abcdef-token\n")
	twoNewlines := secretFile(t, "pw\n\n")

	type want struct{ redisURL, dsn, migrateDSN, token string }
	tests := []struct {
		name string
		yaml string
		env  []string
		want want
	}{
		{
			name: "files from the config file",
			yaml: "redis:\n  url: redis://redcrawl-master-x@127.0.0.1:6379/2\n  password_file: " + redisPW +
				"\nmysql:\n  dsn: crawler@tcp(db:3306)/crawl?parseTime=true\n  password_file: " + mysqlPW +
				"\n  migrate_dsn: migrator@tcp(db:3306)/crawl?parseTime=true\n  migrate_password_file: " + migratePW +
				"\n  allow_insecure: true" +
				"\nadmin:\n  token_file: " + token + "\n",
			want: want{
				redisURL:   "redis://redcrawl-master-x:r3dis%20p%40ss%2Fword@127.0.0.1:6379/2",
				dsn:        "crawler:my:sql@pw@tcp(db:3306)/crawl?parseTime=true",
				migrateDSN: "migrator:migr8-pw@tcp(db:3306)/crawl?parseTime=true",
				token:      "0123456789abcdef-token",
			},
		},
		{
			name: "files from the environment; the file overrides the url's password",
			env: []string{
				"CRAWLER_REDIS_URL=redis://u:old@127.0.0.1:6379/0", "CRAWLER_REDIS_PASSWORD_FILE=" + redisPW,
				"CRAWLER_MYSQL_DSN=u:old@tcp(127.0.0.1:3306)/c", "CRAWLER_MYSQL_PASSWORD_FILE=" + twoNewlines,
				"CRAWLER_MYSQL_MIGRATE_DSN=m@tcp(127.0.0.1:3306)/c", "CRAWLER_MYSQL_MIGRATE_PASSWORD_FILE=" + migratePW,
				"CRAWLER_ADMIN_TOKEN_FILE=" + token,
			},
			want: want{
				redisURL:   "redis://u:r3dis%20p%40ss%2Fword@127.0.0.1:6379/0",
				dsn:        "u:pw\n@tcp(127.0.0.1:3306)/c", // one newline dropped, not two
				migrateDSN: "m:migr8-pw@tcp(127.0.0.1:3306)/c",
				token:      "0123456789abcdef-token",
			},
		},
		{
			name: "a url without user gets the password alone",
			env:  []string{"CRAWLER_REDIS_URL=redis://127.0.0.1:6379/0", "CRAWLER_REDIS_PASSWORD_FILE=" + redisPW},
			want: want{
				redisURL: "redis://:r3dis%20p%40ss%2Fword@127.0.0.1:6379/0",
				dsn:      Default().MySQL.DSN,
			},
		},
		{
			name: "no files: nothing changes",
			want: want{redisURL: Default().Redis.URL, dsn: Default().MySQL.DSN},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = writeConfig(t, tc.yaml)
			}
			c, err := load(path, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			got := want{c.Redis.URL, c.MySQL.DSN, c.MySQL.MigrateDSN, c.Admin.Token}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("resolved (-want +got):\n%s", diff)
			}
			// Validate again (as after a --crawl override): same result.
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			again := want{c.Redis.URL, c.MySQL.DSN, c.MySQL.MigrateDSN, c.Admin.Token}
			if diff := cmp.Diff(got, again, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("second Validate changed the config (-first +second):\n%s", diff)
			}
			if opt, err := c.RedisOptions(); err != nil {
				t.Fatal(err)
			} else if tc.env != nil || tc.yaml != "" {
				if opt.Password != "r3dis p@ss/word" {
					t.Errorf("redis password = %q", opt.Password)
				}
			}
		})
	}
}

func TestSecretFileErrors(t *testing.T) {
	empty := secretFile(t, "\n")
	missing := filepath.Join(t.TempDir(), "nope")
	good := secretFile(t, "pw")
	spaced := secretFile(t, "0123456789 abcdef\n")
	short := secretFile(t, "short\n")
	tests := []struct {
		name    string
		env     []string
		wantKey string
		wantMsg string
	}{
		{"redis file missing", []string{"CRAWLER_REDIS_PASSWORD_FILE=" + missing}, "redis.password_file", "cannot read (set by CRAWLER_REDIS_PASSWORD_FILE): no such file or directory"},
		{"redis file empty", []string{"CRAWLER_REDIS_PASSWORD_FILE=" + empty}, "redis.password_file", "is empty"},
		{"mysql file missing", []string{"CRAWLER_MYSQL_PASSWORD_FILE=" + missing}, "mysql.password_file", "cannot read"},
		{"migrate file without migrate dsn", []string{"CRAWLER_MYSQL_MIGRATE_PASSWORD_FILE=" + good}, "mysql.migrate_password_file", "mysql.migrate_dsn is empty"},
		{"migrate file empty", []string{"CRAWLER_MYSQL_MIGRATE_DSN=m@tcp(h:3306)/crawler", "CRAWLER_MYSQL_MIGRATE_PASSWORD_FILE=" + empty}, "mysql.migrate_password_file", "is empty"},
		{"migrate dsn other database", []string{"CRAWLER_MYSQL_MIGRATE_DSN=m@tcp(h:3306)/other"}, "mysql.migrate_dsn", `names database "other", not mysql.dsn's "crawler"`},
		{"migrate dsn bad", []string{"CRAWLER_MYSQL_MIGRATE_DSN=nonsense"}, "mysql.migrate_dsn", "invalid"},
		{"token file missing", []string{"CRAWLER_ADMIN_TOKEN_FILE=" + missing}, "admin.token_file", "cannot read"},
		{"token file with a space", []string{"CRAWLER_ADMIN_TOKEN_FILE=" + spaced}, "admin.token_file", "must not contain spaces"},
		{"token file too short", []string{"CRAWLER_ADMIN_TOKEN_FILE=" + short}, "admin.token_file", "at least 16 characters"},
		{"bad url with a password file keeps the url secret", []string{"CRAWLER_REDIS_URL=redis://u:hunter2@[::1", "CRAWLER_REDIS_PASSWORD_FILE=" + good}, "redis.url", "invalid url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load("", tc.env)
			if err == nil {
				t.Fatal("no error")
			}
			ce := asConfigError(t, err)
			if ce.Key != tc.wantKey || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error = %q (key %q), want key %q and %q", err, ce.Key, tc.wantKey, tc.wantMsg)
			}
			if ExitCode(err) != 2 {
				t.Errorf("exit code %d, want 2", ExitCode(err))
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestSecretFilesClearText: a password from a file counts for the
// clear-text check as one in the URL or DSN would, and its key is named.
func TestSecretFilesClearText(t *testing.T) {
	pw := secretFile(t, "file-pw\n")
	for _, tc := range []struct{ name, yaml, key string }{
		{"redis", "redis:\n  url: redis://pi1@10.0.0.5:6379/0\n  password_file: " + pw + "\n", "redis.url"},
		{"mysql", "mysql:\n  dsn: crawler@tcp(db.example:3306)/crawl?parseTime=true\n  password_file: " + pw + "\n", "mysql.dsn"},
		{"mysql migrate", "mysql:\n  migrate_dsn: migrator@tcp(db.example:3306)/crawler?parseTime=true\n  migrate_password_file: " + pw + "\n", "mysql.migrate_dsn"},
		{"admin", "admin:\n  listen: 0.0.0.0:8080\n  token_file: " + secretFile(t, "0123456789abcdef-token\n") + "\n", "admin.listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(writeConfig(t, tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.key+":") || !strings.Contains(err.Error(), "allow_insecure") {
				t.Fatalf("err = %v, want a clear-text error naming %s", err, tc.key)
			}
			if strings.Contains(err.Error(), "file-pw") {
				t.Errorf("error holds the password: %v", err)
			}
		})
	}
}
