package soak

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/master/store/storetest"
)

// mysqlUser is the soak's own MySQL user, the master's: it holds the
// runtime privileges of each crawl's database (store.MySQLGrants), and
// loses INSERT and UPDATE on its tables while MySQL "refuses writes".
// Table privileges bind the user's open connections at their next
// statement, and no other test's user or database is touched (the
// shared server stays writable for the tests running beside the soak).
type mysqlUser struct {
	name, password string
	addr           string  // the test server's host:port
	admin          *sql.DB // the test server's root
}

func newMySQLUser(t testing.TB) mysqlUser {
	t.Helper()
	base := os.Getenv(storetest.EnvServer)
	if base == "" {
		base = storetest.DefaultServer
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin := sql.OpenDB(conn)
	b := make([]byte, 6)
	rand.Read(b)
	b2 := make([]byte, 12)
	rand.Read(b2)
	u := mysqlUser{name: "soak_" + hex.EncodeToString(b), password: hex.EncodeToString(b2), addr: cfg.Addr, admin: admin}
	ctx, cancel := ctxFor(15 * time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", u.name, u.password)); err != nil {
		admin.Close()
		t.Fatalf("soak: create mysql user: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := ctxFor(15 * time.Second)
		defer cancel()
		admin.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", u.name))
		admin.Close()
	})
	return u
}

// grant migrates the database of rootDSN (storetest.DSN) as root and
// grants the user its runtime privileges there; it returns the
// database's name.
func (u mysqlUser) grant(t testing.TB, rootDSN string) string {
	t.Helper()
	ctx, cancel := ctxFor(60 * time.Second)
	defer cancel()
	db, err := store.Open(ctx, rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cfg, err := mysql.ParseDSN(rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	g, err := store.MySQLGrants(store.GrantOptions{Database: cfg.DBName, User: u.name, Password: u.password})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range g.Runtime {
		if _, err := u.admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("soak: %s: %v", q, err)
		}
	}
	return cfg.DBName
}

// dsn is the user's DSN for database db at addr (host:port).
func (u mysqlUser) dsn(addr, db string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = u.name, u.password, "tcp", addr, db
	c.ParseTime = true
	c.Timeout = time.Second
	return c.FormatDSN()
}

// writable grants (true) or revokes (false) the user's INSERT and UPDATE
// on every table of db that store.RuntimePrivileges gives them.
func (u mysqlUser) writable(ctx context.Context, db string, on bool) error {
	tables := make([]string, 0, len(store.RuntimePrivileges))
	for tbl := range store.RuntimePrivileges {
		tables = append(tables, tbl)
	}
	sort.Strings(tables)
	for _, tbl := range tables {
		var privs []string
		for _, p := range store.RuntimePrivileges[tbl] {
			if p == "INSERT" || p == "UPDATE" {
				privs = append(privs, p)
			}
		}
		if len(privs) == 0 {
			continue
		}
		list := privs[0]
		for _, p := range privs[1:] {
			list += ", " + p
		}
		q := fmt.Sprintf("GRANT %s ON `%s`.`%s` TO '%s'@'%%'", list, db, tbl, u.name)
		if !on {
			q = fmt.Sprintf("REVOKE %s ON `%s`.`%s` FROM '%s'@'%%'", list, db, tbl, u.name)
		}
		if _, err := u.admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("soak: %s: %w", q, err)
		}
	}
	return nil
}
