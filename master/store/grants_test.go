package store

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

func TestMySQLGrantsText(t *testing.T) {
	tests := []struct {
		name    string
		opt     GrantOptions
		want    Grants
		wantErr string
	}{
		{
			name: "runtime user only, placeholder password",
			opt:  GrantOptions{Database: "crawler", User: "redcrawl"},
			want: Grants{
				Users: []string{"CREATE USER IF NOT EXISTS 'redcrawl'@'%' IDENTIFIED BY 'CHANGE-ME'"},
				Runtime: []string{
					"GRANT SELECT, INSERT, UPDATE ON `crawler`.`api_tokens` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`duplicates` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`exceptions` TO 'redcrawl'@'%'",
					"GRANT SELECT ON `crawler`.`goose_db_version` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`heartbeats` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT, UPDATE ON `crawler`.`items` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`lost_tasks` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT, UPDATE ON `crawler`.`page_validators` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`pages` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`proxy_events` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT, UPDATE ON `crawler`.`schedule_runs` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`seeds` TO 'redcrawl'@'%'",
					"GRANT SELECT, INSERT ON `crawler`.`slave_events` TO 'redcrawl'@'%'",
				},
			},
		},
		{
			name: "with a migrate user and passwords that need quoting",
			opt: GrantOptions{Database: "crawl_db", User: "rc", Host: "10.0.0.%", Password: `it's\x`,
				MigrateUser: "rc_migrate", MigratePassword: "m"},
			want: Grants{
				Users: []string{
					`CREATE USER IF NOT EXISTS 'rc'@'10.0.0.%' IDENTIFIED BY 'it''s\\x'`,
					`CREATE USER IF NOT EXISTS 'rc_migrate'@'10.0.0.%' IDENTIFIED BY 'm'`,
				},
				Migrate: []string{"GRANT CREATE, ALTER, INDEX, DROP, REFERENCES, SELECT, INSERT, UPDATE, DELETE ON `crawl\\_db`.* TO 'rc_migrate'@'10.0.0.%'"},
			},
		},
		{name: "bad user", opt: GrantOptions{Database: "c", User: "a'b"}, wantErr: `user "a'b"`},
		{name: "wildcard database", opt: GrantOptions{Database: "c%", User: "u"}, wantErr: "wildcard"},
		{name: "same users", opt: GrantOptions{Database: "c", User: "u", MigrateUser: "u"}, wantErr: "must differ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := MySQLGrants(tc.opt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Runtime == nil {
				g.Runtime = nil // checked by the first case
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("grants (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRuntimePrivilegesCoverEveryTable keeps RuntimePrivileges in step
// with the migrations.
func TestRuntimePrivilegesCoverEveryTable(t *testing.T) {
	var keys []string
	for k := range RuntimePrivileges {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff(tableNames(t, open(t)), keys); diff != "" {
		t.Errorf("RuntimePrivileges tables (-migrated database +map):\n%s", diff)
	}
}

// TestLeastPrivilegeUsers creates the users MySQLGrants prints on the real
// server, migrates with the migration user, runs the store's operations
// as the runtime user and checks that the runtime user is refused DDL,
// deletes and other databases.
func TestLeastPrivilegeUsers(t *testing.T) {
	ctx := t.Context()
	dsn, admin := missingDSN(t, "acl") // not created yet: the migration user creates it
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	runtimeUser, migrateUser := "rc_rt_"+suffix, "rc_mg_"+suffix
	g, err := MySQLGrants(GrantOptions{Database: cfg.DBName, User: runtimeUser, Password: "rt-pw-" + suffix,
		MigrateUser: migrateUser, MigratePassword: "mg-pw-" + suffix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, u := range []string{runtimeUser, migrateUser} {
			if _, err := admin.Exec("DROP USER IF EXISTS " + quoteString(u) + "@'%'"); err != nil {
				t.Errorf("drop user %s: %v", u, err)
			}
		}
	})
	exec := func(stmts []string) {
		t.Helper()
		for _, q := range stmts {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(g.Users)
	exec(g.Migrate)

	// The runtime grants name tables, which must exist: the order Script
	// documents.
	if _, err := admin.ExecContext(ctx, g.Runtime[0]); err == nil {
		t.Errorf("%s succeeded before the migrations; Script's order note is wrong", g.Runtime[0])
	}

	as := func(user, pw string) string {
		c := cfg.Clone()
		c.User, c.Passwd = user, pw
		return c.FormatDSN()
	}
	runtimeDSN, migrateDSN := as(runtimeUser, "rt-pw-"+suffix), as(migrateUser, "mg-pw-"+suffix)

	// The runtime user can neither create the database nor migrate it.
	if s, err := Open(ctx, runtimeDSN); err == nil {
		s.Close()
		t.Fatal("the runtime user created and migrated the database")
	}
	// bin/master migrate, the runtime grants, then the master.
	if err := Migrate(ctx, migrateDSN); err != nil {
		t.Fatal(err)
	}
	exec(g.Runtime)
	s, err := OpenMigrated(ctx, runtimeDSN, migrateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, latest := versions(t, s); v != latest {
		t.Errorf("version %d after OpenMigrated, want %d", v, latest)
	}

	// The store's normal work as the runtime user.
	batch, want := mixed("acl")
	for range 2 { // the second time is a redelivery
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatalf("insert as the runtime user: %v", err)
		}
	}
	newer := events.Item{Crawl: "acl", Rule: "shop", Item: "review", URL: "http://a.test/p/1",
		Data: json.RawMessage(`{"stars":4}`), Slave: "s2", FetchedAt: 1_800_000_000_000}
	if err := s.Insert(ctx, []events.Envelope{{ID: "1800000000000-1", Item: &newer}}); err != nil {
		t.Fatalf("item update as the runtime user: %v", err)
	}
	for i, r := range want.Items {
		if r.Rule == "shop" && r.Item == "review" {
			want.Items[i] = itemRowOf(newer)
		}
	}
	if diff := cmp.Diff(want, read(t, s, "acl"), jsonEqual); diff != "" {
		t.Errorf("read back as the runtime user (-want +got):\n%s", diff)
	}
	due := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	if ok, err := s.ClaimRun(ctx, "acl", "", "@daily", due, "m1"); err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	if err := s.SetRunSeeds(ctx, "acl", "", due, 3); err != nil {
		t.Fatalf("SetRunSeeds: %v", err)
	}
	if last, err := s.LastRuns(ctx, "acl"); err != nil || !last[""].Equal(due) {
		t.Fatalf("LastRuns = %v, %v", last, err)
	}
	if _, err := s.ProxyStates(ctx, "acl"); err != nil {
		t.Fatalf("ProxyStates: %v", err)
	}
	if _, err := s.PageCounts(ctx, "acl", time.UnixMilli(1_700_000_000_000), time.Second, 10); err != nil {
		t.Fatalf("PageCounts: %v", err)
	}
	if _, err := s.LostTasksPage(ctx, "acl", 10, 0); err != nil {
		t.Fatalf("LostTasksPage: %v", err)
	}
	for range 2 { // the second time changes nothing
		if err := s.RecordSeeds(ctx, "acl", []string{"http://a.test/", "http://b.test/"}); err != nil {
			t.Fatalf("RecordSeeds: %v", err)
		}
	}
	if urls, _, err := s.SeedURLs(ctx, "acl", nil, 10); err != nil || len(urls) != 2 {
		t.Fatalf("SeedURLs = %q, %v", urls, err)
	}
	// A master without mysql.migrate_dsn opens a current schema as the
	// runtime user: goose only reads its version table.
	if s2, err := Open(ctx, runtimeDSN); err != nil {
		t.Fatalf("Open as the runtime user on a migrated database: %v", err)
	} else {
		s2.Close()
	}

	// What the runtime user is refused.
	other := cfg.DBName + "_other"
	exec([]string{"CREATE DATABASE " + quoteIdent(other), "CREATE TABLE " + quoteIdent(other) + ".t (id INT)"})
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + quoteIdent(other)) })
	for _, q := range []string{
		"DROP TABLE pages",
		"CREATE TABLE evil (id INT)",
		"ALTER TABLE pages ADD COLUMN evil INT",
		"CREATE INDEX evil ON pages (status)",
		"TRUNCATE TABLE exceptions",
		"DELETE FROM pages",
		"DELETE FROM seeds",
		"UPDATE seeds SET url = ''",
		"UPDATE pages SET status = 0",
		"INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)",
		"DROP DATABASE " + quoteIdent(cfg.DBName),
		"CREATE DATABASE " + quoteIdent(cfg.DBName+"_evil"),
		"SELECT * FROM " + quoteIdent(other) + ".t",
		"SELECT * FROM mysql.user",
	} {
		_, err := s.DB.ExecContext(ctx, q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || !slices.Contains([]uint16{1142, 1044, 1227, 1045, 1143}, me.Number) {
			t.Errorf("runtime user: %s: got %v, want access denied", q, err)
		}
	}
	// The migration user may change the schema of its database only.
	mg, err := sql.Open("mysql", migrateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	if _, err := mg.ExecContext(ctx, "CREATE TABLE scratch (id INT)"); err != nil {
		t.Errorf("migration user: create table: %v", err)
	}
	if _, err := mg.ExecContext(ctx, "SELECT * FROM "+quoteIdent(other)+".t"); err == nil {
		t.Error("migration user reads another database")
	}
}
