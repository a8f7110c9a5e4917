package store

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// RuntimePrivileges are the privileges the master's normal work needs on
// each table of the crawl database, and no more: every statement the
// store issues outside migrations is an INSERT (IGNORE) into the event
// tables and seeds, an INSERT ... ON DUPLICATE KEY UPDATE into items and
// page_validators, an INSERT
// IGNORE and an UPDATE of schedule_runs, an INSERT and an UPDATE (revoke)
// of api_tokens, and SELECTs. Nothing is ever
// deleted, and no DDL runs outside migrations. goose_db_version is only
// read: a master without mysql.migrate_dsn checks that the schema is
// current (goose finds nothing to apply) before it starts. GET_LOCK, which
// guards migrations, needs no privilege.
//
// A test checks that this lists exactly the tables of a migrated database,
// so a migration that adds a table must add it here.
var RuntimePrivileges = map[string][]string{
	"pages":            {"SELECT", "INSERT"},
	"exceptions":       {"SELECT", "INSERT"},
	"slave_events":     {"SELECT", "INSERT"},
	"heartbeats":       {"SELECT", "INSERT"},
	"lost_tasks":       {"SELECT", "INSERT"},
	"proxy_events":     {"SELECT", "INSERT"},
	"duplicates":       {"SELECT", "INSERT"},
	"items":            {"SELECT", "INSERT", "UPDATE"},
	"schedule_runs":    {"SELECT", "INSERT", "UPDATE"},
	"page_validators":  {"SELECT", "INSERT", "UPDATE"},
	"seeds":            {"SELECT", "INSERT"},
	"api_tokens":       {"SELECT", "INSERT", "UPDATE"},
	"goose_db_version": {"SELECT"},
}

// MigratePrivileges are the database-wide privileges of the migration user
// (mysql.migrate_dsn): the DDL of the migrations (CREATE, ALTER, INDEX,
// DROP for goose's down migrations and for a later migration that drops a
// table, REFERENCES for foreign keys), CREATE also creating the database
// when it is missing, and the row privileges goose needs on its version
// table (and a data migration on the others).
var MigratePrivileges = []string{"CREATE", "ALTER", "INDEX", "DROP", "REFERENCES",
	"SELECT", "INSERT", "UPDATE", "DELETE"}

// PasswordPlaceholder stands for a password not given to MySQLGrants.
const PasswordPlaceholder = "CHANGE-ME"

// GrantOptions name the users MySQLGrants creates.
type GrantOptions struct {
	// Database is the crawl database (mysql.dsn's).
	Database string
	// User and Host are the runtime user (mysql.dsn's), 'User'@'Host';
	// Host "" = "%" (any host).
	User, Host string
	// Password is the runtime user's password; "" = PasswordPlaceholder.
	Password string
	// MigrateUser is the migration user (mysql.migrate_dsn's), on Host
	// too; "" = none.
	MigrateUser string
	// MigratePassword is its password; "" = PasswordPlaceholder.
	MigratePassword string
}

// Grants are the statements that create the users and grant their
// privileges, in the order they must run: the runtime grants name tables,
// which MySQL and MariaDB require to exist, so they run after the
// migrations.
type Grants struct {
	// Users are CREATE USER IF NOT EXISTS statements.
	Users []string
	// Migrate grants the migration user its database-wide privileges.
	Migrate []string
	// Runtime grants the runtime user its table privileges.
	Runtime []string
}

// identRE is what MySQLGrants accepts as a user, host or database name:
// enough for real names and safe to quote.
var identRE = regexp.MustCompile(`^[A-Za-z0-9_.%$:-]{1,80}$`)

// MySQLGrants returns the statements that set up least-privilege MySQL or
// MariaDB users for a crawl database. Names are checked and quoted;
// passwords are quoted as string literals.
func MySQLGrants(o GrantOptions) (Grants, error) {
	if o.Host == "" {
		o.Host = "%"
	}
	for _, f := range []struct{ what, v string }{
		{"database", o.Database}, {"user", o.User}, {"host", o.Host},
	} {
		if !identRE.MatchString(f.v) {
			return Grants{}, fmt.Errorf("mysql grants: %s %q must be 1 to 80 of A-Z a-z 0-9 _ . %% $ : -", f.what, f.v)
		}
	}
	if o.MigrateUser != "" {
		if !identRE.MatchString(o.MigrateUser) {
			return Grants{}, fmt.Errorf("mysql grants: migrate user %q must be 1 to 80 of A-Z a-z 0-9 _ . %% $ : -", o.MigrateUser)
		}
		if o.MigrateUser == o.User {
			return Grants{}, errors.New("mysql grants: the migrate user must differ from the runtime user")
		}
	}
	if strings.Contains(o.Database, "%") {
		return Grants{}, fmt.Errorf("mysql grants: database %q must not hold %% (a wildcard in GRANT)", o.Database)
	}
	account := func(u string) string { return quoteString(u) + "@" + quoteString(o.Host) }
	pw := func(p string) string {
		if p == "" {
			p = PasswordPlaceholder
		}
		return quoteString(p)
	}
	db := quoteIdent(o.Database)
	var g Grants
	g.Users = append(g.Users, "CREATE USER IF NOT EXISTS "+account(o.User)+" IDENTIFIED BY "+pw(o.Password))
	if o.MigrateUser != "" {
		g.Users = append(g.Users, "CREATE USER IF NOT EXISTS "+account(o.MigrateUser)+" IDENTIFIED BY "+pw(o.MigratePassword))
		g.Migrate = append(g.Migrate, "GRANT "+strings.Join(MigratePrivileges, ", ")+" ON "+
			escapeWildcards(db)+".* TO "+account(o.MigrateUser))
	}
	tables := make([]string, 0, len(RuntimePrivileges))
	for t := range RuntimePrivileges {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, t := range tables {
		g.Runtime = append(g.Runtime, "GRANT "+strings.Join(RuntimePrivileges[t], ", ")+" ON "+
			db+"."+quoteIdent(t)+" TO "+account(o.User))
	}
	return g, nil
}

// Script is the grants as a SQL script with comments, in order.
func (g Grants) Script() string {
	var b strings.Builder
	b.WriteString("-- redcrawl: least-privilege MySQL/MariaDB users (bin/master acl --mysql).\n")
	b.WriteString("-- Run as an administrator. Replace " + PasswordPlaceholder + " (or use --password-file).\n\n")
	b.WriteString("-- 1. Users.\n")
	for _, s := range g.Users {
		b.WriteString(s + ";\n")
	}
	if len(g.Migrate) > 0 {
		b.WriteString("\n-- 2. The migration user (mysql.migrate_dsn): DDL on the crawl database only.\n")
		for _, s := range g.Migrate {
			b.WriteString(s + ";\n")
		}
	}
	b.WriteString("\n-- 3. The runtime user (mysql.dsn): row privileges on the crawl tables, no DDL.\n")
	b.WriteString("--    The tables must exist first: run `bin/master migrate` (or start the master\n")
	b.WriteString("--    with mysql.migrate_dsn) before these, and again after a new migration.\n")
	for _, s := range g.Runtime {
		b.WriteString(s + ";\n")
	}
	return b.String()
}

// quoteString quotes s as a MySQL string literal.
func quoteString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// escapeWildcards escapes _ in a quoted database name for a database-level
// GRANT, where _ and % are wildcards (a_b would also match axb).
func escapeWildcards(quoted string) string {
	return strings.ReplaceAll(quoted, "_", `\_`)
}
