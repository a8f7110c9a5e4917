// Package store is redcrawl's MySQL layer: it opens (and migrates) the
// database, writes batches of crawl events idempotently and reads them back
// for tests, status and the dashboard.
//
// The schema lives only in the migrations package; Open applies it with a
// goose provider. Times are stored as DATETIME(3) in UTC and returned as unix
// milliseconds, like the events package.
package store

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"

	"github.com/redcrawl/redcrawl/migrations"
)

// DefaultDialTimeout is the connect timeout Open uses when the DSN sets none.
const DefaultDialTimeout = 10 * time.Second

// MySQL error numbers Open tells apart.
const (
	errBadDB                = 1049 // ER_BAD_DB_ERROR: unknown database
	errAccessDenied         = 1045 // ER_ACCESS_DENIED_ERROR
	errDBAccessDenied       = 1044 // ER_DBACCESS_DENIED_ERROR
	errSpecificAccessDenied = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	errTableAccessDenied    = 1142 // ER_TABLEACCESS_DENIED_ERROR
)

// Store is a connection pool to the crawl database.
type Store struct {
	// DB is the underlying pool, open on the database named in the DSN.
	DB *sql.DB

	dbName string
}

// Open connects with dsn (a go-sql-driver/mysql DSN that names a database),
// creates the database if it is missing, applies the embedded migrations and
// returns the store.
//
// Open forces parseTime=true and loc=UTC (so DATETIME round-trips unix
// milliseconds exactly) and sets a dial timeout of DefaultDialTimeout when
// the DSN has none. A missing database is created with CREATE DATABASE IF
// NOT EXISTS over a connection without a database name; if the user lacks
// that right the error says so.
//
// Migrations run under a MySQL named lock (GET_LOCK) held for the whole
// goose run, so several processes may call Open on the same database at
// once: one migrates, the others wait for it and then find nothing to do.
// The lock is a session lock, so it disappears with a crashed process's
// connection; the wait is bounded only by ctx.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: parse dsn: %w", err)
	}
	return OpenConfig(ctx, cfg)
}

// OpenConfig is Open for a parsed DSN, which may carry settings a DSN
// string cannot, such as a TLS configuration (config.MySQLConfig). cfg is
// not changed.
func OpenConfig(ctx context.Context, dsn *mysql.Config) (*Store, error) {
	cfg, err := prepare(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db, err := connect(ctx, cfg)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errBadDB {
		if err := createDatabase(ctx, cfg); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		db, err = connect(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("open store: connect to %s/%s: %w", cfg.Addr, cfg.DBName, tlsHint(cfg, err))
	}
	s := &Store{DB: db, dbName: cfg.DBName}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// OpenMigrated is Open with the migrations applied by another user:
// migrateDSN (a user with DDL privileges, see MigratePrivileges) creates the
// database if missing and applies the migrations, then the store connects
// as dsn's user, which needs only the runtime grants. An empty migrateDSN
// (or dsn itself) is Open.
func OpenMigrated(ctx context.Context, dsn, migrateDSN string) (*Store, error) {
	d, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: parse dsn: %w", err)
	}
	if migrateDSN == "" || migrateDSN == dsn {
		return OpenConfig(ctx, d)
	}
	m, err := mysql.ParseDSN(migrateDSN)
	if err != nil {
		return nil, fmt.Errorf("open store: parse migrate dsn: %w", err)
	}
	return OpenMigratedConfig(ctx, d, m)
}

// OpenMigratedConfig is OpenMigrated for parsed DSNs, which may carry TLS
// configurations (config.MySQLConfig, MigrateMySQLConfig). A nil migrate,
// or one for the same user, is OpenConfig.
func OpenMigratedConfig(ctx context.Context, dsn, migrate *mysql.Config) (*Store, error) {
	if migrate == nil || (migrate.User == dsn.User && migrate.Addr == dsn.Addr && migrate.DBName == dsn.DBName) {
		return OpenConfig(ctx, dsn)
	}
	if err := MigrateConfig(ctx, migrate); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg, err := prepare(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db, err := connect(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: connect to %s/%s as %q: %w", cfg.Addr, cfg.DBName, cfg.User, tlsHint(cfg, err))
	}
	return &Store{DB: db, dbName: cfg.DBName}, nil
}

// Migrate connects with dsn, creates the database if it is missing,
// applies the pending migrations and disconnects (bin/master migrate, and
// OpenMigrated's first step).
func Migrate(ctx context.Context, dsn string) error {
	d, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("migrate: parse dsn: %w", err)
	}
	return MigrateConfig(ctx, d)
}

// MigrateConfig is Migrate for a parsed DSN.
func MigrateConfig(ctx context.Context, dsn *mysql.Config) error {
	s, err := OpenConfig(ctx, dsn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return s.Close()
}

// Close closes the connection pool.
func (s *Store) Close() error {
	if err := s.DB.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// tlsHint says what to check when the server's certificate did not
// verify, or when access was denied to a connection without TLS (MariaDB's
// answer when require_secure_transport is on).
func tlsHint(cfg *mysql.Config, err error) error {
	var hostErr x509.HostnameError
	var verifyErr *tls.CertificateVerificationError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == errAccessDenied && cfg.TLS == nil && cfg.Net != "unix":
		return fmt.Errorf("%w (without TLS: if the server has require_secure_transport, set mysql.tls_ca_file)", err)
	case errors.As(err, &hostErr):
		return fmt.Errorf("TLS certificate verification failed: the certificate is not for this name (set mysql.tls_server_name): %w", err)
	case errors.As(err, &verifyErr):
		return fmt.Errorf("TLS certificate verification failed (is mysql.tls_ca_file the CA that signed the server's certificate?): %w", err)
	}
	return err
}

// prepare copies a parsed DSN and applies the settings the store relies
// on.
func prepare(dsn *mysql.Config) (*mysql.Config, error) {
	cfg := dsn.Clone()
	if cfg.DBName == "" {
		return nil, errors.New("parse dsn: no database name (user@tcp(host:3306)/crawler)")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultDialTimeout
	}
	return cfg, nil
}

// connect opens a pool for cfg and checks that it works.
func connect(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	// Recycle connections well inside typical server and proxy idle limits.
	db.SetConnMaxLifetime(3 * time.Minute)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// createDatabase creates cfg.DBName over a connection without a database.
func createDatabase(ctx context.Context, cfg *mysql.Config) error {
	server := cfg.Clone()
	server.DBName = ""
	db, err := connect(ctx, server)
	if err != nil {
		return fmt.Errorf("create database %s: connect to %s: %w", cfg.DBName, cfg.Addr, err)
	}
	defer db.Close()
	q := "CREATE DATABASE IF NOT EXISTS " + quoteIdent(cfg.DBName) +
		" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
	if _, err := db.ExecContext(ctx, q); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == errDBAccessDenied || me.Number == errSpecificAccessDenied) {
			return fmt.Errorf("create database %s: user %q may not create it; create it or grant CREATE: %w", cfg.DBName, cfg.User, err)
		}
		return fmt.Errorf("create database %s: %w", cfg.DBName, err)
	}
	return nil
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// migrate applies all pending migrations while holding the database's
// named lock on a connection of its own. The lock is not handed to goose as
// a SessionLocker: goose's Provider.Up checks for pending migrations (and
// creates its version table) before taking that lock, and as MySQL commits
// DDL at once, a concurrent Open could see the version table without its
// zero-version row and fail with "missing zero version migration"
// (pressly/goose#1120). Holding the lock around the whole run avoids it.
func (s *Store) migrate(ctx context.Context) error {
	p, err := s.provider()
	if err != nil {
		return err
	}
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.dbName, err)
	}
	defer conn.Close()
	lock := namedLock{name: lockName(s.dbName)}
	if err := lock.SessionLock(ctx, conn); err != nil {
		return fmt.Errorf("migrate %s: %w", s.dbName, err)
	}
	_, upErr := p.Up(ctx)
	unlockErr := lock.SessionUnlock(context.WithoutCancel(ctx), conn)
	if upErr != nil {
		var me *mysql.MySQLError
		if errors.As(upErr, &me) && (me.Number == errTableAccessDenied || me.Number == errDBAccessDenied) {
			return fmt.Errorf("migrate %s: this user may not change the schema; set mysql.migrate_dsn to a user "+
				"that may (see bin/master acl --mysql) or run bin/master migrate with one: %w", s.dbName, upErr)
		}
		return fmt.Errorf("migrate %s: %w", s.dbName, upErr)
	}
	if unlockErr != nil {
		return fmt.Errorf("migrate %s: %w", s.dbName, unlockErr)
	}
	return nil
}

// provider returns a goose provider for the embedded migrations; callers
// serialise runs with the named lock (migrate).
func (s *Store) provider() (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, s.DB, migrations.FS,
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: new goose provider: %w", s.dbName, err)
	}
	return p, nil
}

// lockName is the server-wide named lock that guards migrations of db. It is
// a hash so it fits MySQL's 64-character limit for any database name.
func lockName(db string) string {
	h := sha256.Sum256([]byte(db))
	return "redcrawl:migrate:" + hex.EncodeToString(h[:12])
}

// namedLock is a server-wide lock built on GET_LOCK/RELEASE_LOCK, held by
// one connection (a MySQL session).
type namedLock struct{ name string }

// lockPoll is how long one GET_LOCK call waits; between calls ctx is checked.
const lockPoll = 2 // seconds

// SessionLock waits for the lock until ctx ends.
func (l namedLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, lockPoll).Scan(&got); err != nil {
			return fmt.Errorf("get lock %s: %w", l.name, err)
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if !got.Valid {
			return fmt.Errorf("get lock %s: server returned NULL", l.name)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("get lock %s: %w", l.name, err)
		}
	}
}

// SessionUnlock releases the lock.
func (l namedLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", l.name).Scan(&released); err != nil {
		return fmt.Errorf("release lock %s: %w", l.name, err)
	}
	if !released.Valid || released.Int64 != 1 {
		return fmt.Errorf("release lock %s: not held by this session", l.name)
	}
	return nil
}
