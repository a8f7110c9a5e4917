package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
)

// isACLMySQL reports whether an acl command line asks for MySQL grants.
func isACLMySQL(args []string) bool {
	for _, a := range args {
		if a == "--mysql" || a == "-mysql" || strings.HasPrefix(a, "--mysql=") || strings.HasPrefix(a, "-mysql=") {
			return true
		}
	}
	return false
}

// runACLMySQL is "master acl --mysql": it prints the SQL that creates the
// least-privilege MySQL/MariaDB users of the crawl database (see
// store.MySQLGrants). Defaults come from the config: the database and user
// of mysql.dsn (a root user becomes "redcrawl") and the user of
// mysql.migrate_dsn.
func runACLMySQL(args []string, stdout, stderr io.Writer) int {
	fs := cli.New("master acl --mysql", "usage: master acl --mysql [--config config.yaml] [--user U] [--host H] [--database D]\n"+
		"                       [--migrate-user M] [--password-file F] [--migrate-password-file F]\n\n"+
		"Prints CREATE USER and GRANT statements for a runtime user (row privileges on the crawl\n"+
		"tables, no DDL: mysql.dsn) and a migration user (DDL on the crawl database:\n"+
		"mysql.migrate_dsn). Run them as a MySQL administrator.\n", stdout, stderr)
	fs.Bool("mysql", true, "print MySQL/MariaDB grants")
	cfgPath := fs.ConfigFile("config.yaml", "config file (for the defaults of the names)")
	user := fs.String("user", "", "runtime user (default: mysql.dsn's user, or redcrawl when that is root)")
	host := fs.String("host", "%", "host part of the accounts ('%' = any host)")
	database := fs.String("database", "", "crawl database (default: mysql.dsn's)")
	migrateUser := fs.String("migrate-user", "", "migration user (default: mysql.migrate_dsn's user; none when unset)")
	pwFile := fs.String("password-file", "", "file holding the runtime user's password (default: a placeholder)")
	migratePWFile := fs.String("migrate-password-file", "", "file holding the migration user's password")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "master acl --mysql: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		if _, statErr := os.Stat(*cfgPath); statErr == nil || fs.Given("config") {
			fmt.Fprintf(stderr, "master: %v\n", err)
			return config.ExitCode(err)
		}
		def := config.Default() // no config file: the defaults name the database
		cfg = &def
	}
	opt := store.GrantOptions{Database: *database, User: *user, Host: *host, MigrateUser: *migrateUser}
	if d, err := mysql.ParseDSN(cfg.MySQL.DSN); err == nil {
		if opt.Database == "" {
			opt.Database = d.DBName
		}
		if opt.User == "" && d.User != "root" {
			opt.User = d.User
		}
	}
	if opt.User == "" {
		opt.User = "redcrawl"
	}
	if m, err := mysql.ParseDSN(cfg.MySQL.MigrateDSN); err == nil && cfg.MySQL.MigrateDSN != "" && opt.MigrateUser == "" {
		opt.MigrateUser = m.User
	}
	for _, f := range []struct {
		flag, path string
		dst        *string
	}{{"--password-file", *pwFile, &opt.Password}, {"--migrate-password-file", *migratePWFile, &opt.MigratePassword}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			fmt.Fprintf(stderr, "master acl --mysql: %s: %v\n", f.flag, err)
			return 2
		}
		*f.dst = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	g, err := store.MySQLGrants(opt)
	if err != nil {
		fmt.Fprintf(stderr, "master acl --mysql: %v\n", err)
		return 2
	}
	fmt.Fprint(stdout, g.Script())
	return 0
}
