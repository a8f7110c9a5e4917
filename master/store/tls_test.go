package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testcert"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/config"
)

// TestOpenTLS opens stores on a MariaDB server of the test's own that
// requires secure transport, with a server certificate for the name
// mariadb.test only.
func TestOpenTLS(t *testing.T) {
	certs := testcert.Write(t, t.TempDir(), "mariadb.test")
	addr := startTLSMariaDB(t, certs)
	tests := []struct {
		name    string
		mutate  func(c *config.Config)
		wantErr []string // nil = works
	}{
		{"right CA and server name", func(c *config.Config) {
			c.MySQL.TLSCAFile, c.MySQL.TLSServerName = certs.CA, "mariadb.test"
		}, nil},
		{"client certificate too", func(c *config.Config) {
			c.MySQL.TLSCAFile, c.MySQL.TLSServerName = certs.CA, "mariadb.test"
			c.MySQL.TLSCertFile, c.MySQL.TLSKeyFile = certs.ClientCert, certs.ClientKey
		}, nil},
		{"wrong CA", func(c *config.Config) {
			c.MySQL.TLSCAFile, c.MySQL.TLSServerName = certs.OtherCA, "mariadb.test"
		}, []string{"connect to " + addr, "certificate verification failed", "mysql.tls_ca_file"}},
		{"server name mismatch", func(c *config.Config) {
			c.MySQL.TLSCAFile = certs.CA
		}, []string{"connect to " + addr, "certificate verification failed", "mysql.tls_server_name"}},
		// MariaDB answers a connection without TLS with "access denied"
		{"plain text", func(c *config.Config) {}, []string{"connect to " + addr, "Access denied",
			"require_secure_transport, set mysql.tls_ca_file"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			c.MySQL.DSN = fmt.Sprintf("root@tcp(%s)/tls%d?parseTime=true&timeout=10s", addr, i)
			tt.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			mc, err := c.MySQLConfig()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := OpenConfig(ctx, mc)
			if tt.wantErr != nil {
				if err == nil {
					s.Close()
					t.Fatal("OpenConfig worked, want an error")
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenConfig: %v", err)
			}
			defer s.Close()
			var name, cipher string
			if err := s.DB.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_version'").Scan(&name, &cipher); err != nil {
				t.Fatal(err)
			}
			if cipher != "TLSv1.2" && cipher != "TLSv1.3" {
				t.Errorf("Ssl_version = %q, want TLSv1.2 or TLSv1.3", cipher)
			}
			var n int
			if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM goose_db_version").Scan(&n); err != nil || n < 2 {
				t.Errorf("migrations: %d rows in goose_db_version, %v", n, err)
			}
		})
	}
}

// startTLSMariaDB starts a mariadbd of its own on a free loopback port
// (data in a temporary directory, SSL with certs, require_secure_transport
// on) and returns its address; it is killed when the test ends. It skips
// when mariadbd or mariadb-install-db is missing.
func startTLSMariaDB(t *testing.T, certs testcert.Files) string {
	t.Helper()
	server, err := lookPath("mariadbd", "/usr/sbin/mariadbd")
	if err != nil {
		t.Skip("mariadbd not found: the MySQL TLS test needs it (apt-get install mariadb-server)")
	}
	install, err := lookPath("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		t.Skip("mariadb-install-db not found: the MySQL TLS test needs it (apt-get install mariadb-server)")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "mysqld.sock")
	srv := testutil.StartServer(t, testutil.ServerOptions{Name: server, Wait: 30 * time.Second,
		Args: func(srv *testutil.Server) []string {
			return []string{"--no-defaults", "--datadir=" + data, "--socket=" + sock,
				"--port=" + strconv.Itoa(srv.Port), "--bind-address=127.0.0.1", "--user=root",
				"--pid-file=" + filepath.Join(dir, "mariadb.pid"), "--log-error=" + srv.Log,
				"--skip-log-bin", "--innodb-buffer-pool-size=16M", "--performance-schema=OFF",
				"--ssl-ca=" + certs.CA, "--ssl-cert=" + certs.ServerCert, "--ssl-key=" + certs.ServerKey,
				"--require-secure-transport=ON"}
		},
		Ready: func(ctx context.Context, srv *testutil.Server) error {
			// over the socket, which counts as secure transport
			db, err := sql.Open("mysql", "root@unix("+sock+")/?timeout=2s")
			if err != nil {
				return err
			}
			defer db.Close()
			return db.PingContext(ctx)
		},
	})
	return srv.Addr
}

// lookPath finds a program in PATH or at its usual place.
func lookPath(name, usual string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if _, err := os.Stat(usual); err != nil {
		return "", err
	}
	return usual, nil
}
