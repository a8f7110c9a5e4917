// Package storetest gives tests of any package a fresh MySQL database on
// the test server (MariaDB at 127.0.0.1:3306 unless REDCRAWL_TEST_MYSQL
// says otherwise).
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Environment variables DSN reads.
const (
	// EnvServer overrides the server DSN base (no database name needed).
	EnvServer = "REDCRAWL_TEST_MYSQL"
	// EnvAllowSkip set to 1 lets tests skip when the server is unreachable;
	// otherwise they fail, so CI cannot pass by skipping silently.
	EnvAllowSkip = "REDCRAWL_ALLOW_SKIP"
)

// DefaultServer is the server DSN base used when EnvServer is unset.
const DefaultServer = "root@tcp(127.0.0.1:3306)/"

// DSN creates a database with a fresh name (redcrawl_t_<hex>), drops it when
// the test ends and returns a DSN for it with parseTime=true. It fails the
// test if the server is unreachable, or skips it when REDCRAWL_ALLOW_SKIP=1.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvServer)
	if base == "" {
		base = DefaultServer
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("storetest: parse %s=%q: %v", EnvServer, base, err)
	}
	cfg.DBName = ""
	cfg.ParseTime = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	admin := sql.OpenDB(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		msg := "storetest: MySQL/MariaDB at " + cfg.Addr + " unreachable (set " + EnvServer +
			" to another server DSN, or " + EnvAllowSkip + "=1 to skip): " + err.Error()
		if os.Getenv(EnvAllowSkip) == "1" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	name := "redcrawl_t_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		admin.Close()
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	db := cfg.Clone()
	db.DBName = name
	return db.FormatDSN()
}
