package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testcert"
)

// TestValidateTLSAndClearText covers the TLS keys and the refusal to send a
// password in clear text to an address that is not loopback.
func TestValidateTLSAndClearText(t *testing.T) {
	certs := testcert.Write(t, t.TempDir())
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef0123"
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantKey string // "" = valid
		wantMsg string // in the error
	}{
		// redis
		{"tls key with redis://", func(c *Config) { c.Redis.TLSCAFile = certs.CA }, "redis.tls_ca_file", "use rediss://"},
		{"server name with redis://", func(c *Config) { c.Redis.TLSServerName = "redis.test" }, "redis.tls_server_name", "use rediss://"},
		{"client cert without key", func(c *Config) {
			c.Redis.URL = "rediss://127.0.0.1:6380/0"
			c.Redis.TLSCertFile = certs.ClientCert
		}, "redis.tls_key_file", "both or neither"},
		{"client key without cert", func(c *Config) {
			c.Redis.URL = "rediss://127.0.0.1:6380/0"
			c.Redis.TLSKeyFile = certs.ClientKey
		}, "redis.tls_cert_file", "both or neither"},
		{"missing CA file", func(c *Config) {
			c.Redis.URL = "rediss://127.0.0.1:6380/0"
			c.Redis.TLSCAFile = filepath.Join(t.TempDir(), "nope.pem")
		}, "redis.tls_ca_file", "no such file"},
		{"CA file without a certificate", func(c *Config) {
			c.Redis.URL = "rediss://127.0.0.1:6380/0"
			c.Redis.TLSCAFile = notPEM
		}, "redis.tls_ca_file", "no PEM certificate"},
		{"client cert with the wrong key", func(c *Config) {
			c.Redis.URL = "rediss://127.0.0.1:6380/0"
			c.Redis.TLSCertFile, c.Redis.TLSKeyFile = certs.ClientCert, certs.ServerKey
		}, "redis.tls_cert_file", "cannot load"},
		{"redis password in clear to a private address", func(c *Config) { c.Redis.URL = "redis://:secret@10.0.0.5:6379/0" },
			"redis.url", "a password would be sent in clear text to 10.0.0.5:6379; use rediss:// or set redis.allow_insecure: true"},
		{"redis password in clear to a host name", func(c *Config) { c.Redis.URL = "redis://u:secret@redis.internal/0" },
			"redis.url", "redis.internal:6379"},
		{"redis password in clear to a cluster node", func(c *Config) {
			c.Redis.Cluster = true
			c.Redis.URL = "redis://:secret@127.0.0.1:7000?addr=127.0.0.1:7001&addr=10.0.0.6:7002"
		}, "redis.url", "10.0.0.6:7002"},
		{"redis password to loopback", func(c *Config) { c.Redis.URL = "redis://:secret@127.0.0.1:6379/0" }, "", ""},
		{"redis password to 127/8", func(c *Config) { c.Redis.URL = "redis://:secret@127.1.2.3:6379/0" }, "", ""},
		{"redis password to localhost", func(c *Config) { c.Redis.URL = "redis://:secret@localhost:6379/0" }, "", ""},
		{"redis password to ::1", func(c *Config) { c.Redis.URL = "redis://:secret@[::1]:6379/0" }, "", ""},
		{"redis cluster password on loopback", func(c *Config) {
			c.Redis.Cluster = true
			c.Redis.URL = "redis://:secret@127.0.0.1:7000?addr=127.0.0.1:7001&addr=localhost:7002"
		}, "", ""},
		{"redis user without password", func(c *Config) { c.Redis.URL = "redis://crawler@10.0.0.5:6379/0" }, "", ""},
		{"redis allow_insecure", func(c *Config) {
			c.Redis.URL = "redis://:secret@10.0.0.5:6379/0"
			c.Redis.AllowInsecure = true
		}, "", ""},
		{"rediss with every key", func(c *Config) {
			c.Redis.URL = "rediss://:secret@10.0.0.5:6380/0"
			c.Redis.TLSCAFile, c.Redis.TLSServerName = certs.CA, "redis.test"
			c.Redis.TLSCertFile, c.Redis.TLSKeyFile = certs.ClientCert, certs.ClientKey
		}, "", ""},
		{"rediss cluster", func(c *Config) {
			c.Redis.Cluster = true
			c.Redis.URL = "rediss://:secret@10.0.0.5:7000?addr=10.0.0.6:7000"
			c.Redis.TLSCAFile = certs.CA
		}, "", ""},
		// mysql
		{"mysql password in clear", func(c *Config) { c.MySQL.DSN = "u:secret@tcp(db:3306)/crawler" },
			"mysql.dsn", "a password would be sent without verified TLS to db:3306"},
		{"mysql skip-verify", func(c *Config) { c.MySQL.DSN = "u:secret@tcp(10.0.0.7:3306)/crawler?tls=skip-verify" }, "mysql.dsn", "mysql.allow_insecure"},
		{"mysql preferred", func(c *Config) { c.MySQL.DSN = "u:secret@tcp(10.0.0.7:3306)/crawler?tls=preferred" }, "mysql.dsn", "mysql.tls_ca_file"},
		{"mysql tls keys with skip-verify", func(c *Config) {
			c.MySQL.DSN = "u:secret@tcp(10.0.0.7:3306)/crawler?tls=skip-verify"
			c.MySQL.TLSCAFile = certs.CA
		}, "mysql.dsn", "conflicts with mysql.tls_ca_file"},
		{"mysql cert without key", func(c *Config) { c.MySQL.TLSCertFile = certs.ClientCert }, "mysql.tls_key_file", "both or neither"},
		{"mysql unreadable CA", func(c *Config) { c.MySQL.TLSCAFile = notPEM }, "mysql.tls_ca_file", "no PEM certificate"},
		{"mysql password over a unix socket", func(c *Config) { c.MySQL.DSN = "u:secret@unix(/run/mysqld/mysqld.sock)/crawler" }, "", ""},
		{"mysql password to localhost", func(c *Config) { c.MySQL.DSN = "u:secret@tcp(localhost:3306)/crawler" }, "", ""},
		{"mysql password with tls=true", func(c *Config) { c.MySQL.DSN = "u:secret@tcp(db:3306)/crawler?tls=true" }, "", ""},
		{"mysql password with a CA file", func(c *Config) {
			c.MySQL.DSN = "u:secret@tcp(db:3306)/crawler"
			c.MySQL.TLSCAFile = certs.CA
		}, "", ""},
		{"mysql client certificate alone", func(c *Config) {
			c.MySQL.DSN = "u:secret@tcp(db:3306)/crawler?tls=true"
			c.MySQL.TLSCertFile, c.MySQL.TLSKeyFile = certs.ClientCert, certs.ClientKey
		}, "", ""},
		{"mysql allow_insecure", func(c *Config) {
			c.MySQL.DSN = "u:secret@tcp(db:3306)/crawler"
			c.MySQL.AllowInsecure = true
		}, "", ""},
		// admin
		{"admin cert without key", func(c *Config) { c.Admin.TLSCert = certs.ServerCert }, "admin.tls_key", "both or neither"},
		{"admin key without cert", func(c *Config) { c.Admin.TLSKey = certs.ServerKey }, "admin.tls_cert", "both or neither"},
		{"admin cert that is not one", func(c *Config) { c.Admin.TLSCert, c.Admin.TLSKey = notPEM, certs.ServerKey }, "admin.tls_cert", "cannot load"},
		{"admin token over http on all interfaces", func(c *Config) { c.Admin.Listen, c.Admin.Token = ":8080", token },
			"admin.listen", "admin.token would travel in clear text"},
		{"admin token over http on a private address", func(c *Config) { c.Admin.Listen, c.Admin.Token = "10.0.0.5:8080", token },
			"admin.listen", "admin.allow_insecure"},
		{"admin token over https", func(c *Config) {
			c.Admin.Listen, c.Admin.Token = "0.0.0.0:8443", token
			c.Admin.TLSCert, c.Admin.TLSKey = certs.ServerCert, certs.ServerKey
		}, "", ""},
		{"admin token over http with allow_insecure", func(c *Config) {
			c.Admin.Listen, c.Admin.Token, c.Admin.AllowInsecure = ":8080", token, true
		}, "", ""},
		{"admin token on ::1", func(c *Config) { c.Admin.Listen, c.Admin.Token = "[::1]:8080", token }, "", ""},
		{"admin public reads without token", func(c *Config) { c.Admin.Listen, c.Admin.PublicRead = ":8080", true }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error for %s", tt.wantKey)
			}
			if ce := asConfigError(t, err); ce.Key != tt.wantKey {
				t.Errorf("Key = %q, want %q (error: %v)", ce.Key, tt.wantKey, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	got := map[string]bool{}
	for _, h := range []string{"localhost", "LOCALHOST.", "127.0.0.1", "127.255.0.9", "::1", "10.0.0.5", "::",
		"0.0.0.0", "", "redis.internal", "localhost.example.com", "::ffff:127.0.0.1"} {
		got[h] = IsLoopback(h)
	}
	want := map[string]bool{"localhost": true, "LOCALHOST.": true, "127.0.0.1": true, "127.255.0.9": true, "::1": true,
		"10.0.0.5": false, "::": false, "0.0.0.0": false, "": false, "redis.internal": false,
		"localhost.example.com": false, "::ffff:127.0.0.1": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("IsLoopback (-want +got):\n%s", diff)
	}
}

// tlsSummary is what the tests compare of a *tls.Config.
type tlsSummary struct {
	MinVersion   uint16
	ServerName   string
	HasRootCAs   bool
	Certificates int
}

func summarize(t *tls.Config) *tlsSummary {
	if t == nil {
		return nil
	}
	return &tlsSummary{MinVersion: t.MinVersion, ServerName: t.ServerName, HasRootCAs: t.RootCAs != nil, Certificates: len(t.Certificates)}
}

func TestClientTLSConfigs(t *testing.T) {
	certs := testcert.Write(t, t.TempDir())
	c := Default()
	opt, err := c.RedisOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opt.TLSConfig != nil {
		t.Errorf("redis:// has a TLS config: %+v", summarize(opt.TLSConfig))
	}

	c.Redis.URL = "rediss://:pw@10.0.0.5:6380/2"
	c.Redis.TLSCAFile, c.Redis.TLSServerName = certs.CA, "redis.test"
	c.Redis.TLSCertFile, c.Redis.TLSKeyFile = certs.ClientCert, certs.ClientKey
	if opt, err = c.RedisOptions(); err != nil {
		t.Fatal(err)
	}
	want := &tlsSummary{MinVersion: tls.VersionTLS12, ServerName: "redis.test", HasRootCAs: true, Certificates: 1}
	if diff := cmp.Diff(want, summarize(opt.TLSConfig)); diff != "" {
		t.Errorf("rediss TLS config (-want +got):\n%s", diff)
	}

	c.Redis.Cluster = true
	c.Redis.URL = "rediss://:pw@10.0.0.5:7000?addr=10.0.0.6:7000"
	c.Redis.TLSServerName = ""
	copt, err := c.RedisClusterOptions()
	if err != nil {
		t.Fatal(err)
	}
	// no server name: each node is checked against the host of its address
	want = &tlsSummary{MinVersion: tls.VersionTLS12, HasRootCAs: true, Certificates: 1}
	if diff := cmp.Diff(want, summarize(copt.TLSConfig)); diff != "" {
		t.Errorf("cluster TLS config (-want +got):\n%s", diff)
	}

	c.MySQL.DSN = "u:pw@tcp(db.internal:3306)/crawler?parseTime=true&tls=true"
	c.MySQL.TLSCAFile = certs.CA
	m, err := c.MySQLConfig()
	if err != nil {
		t.Fatal(err)
	}
	want = &tlsSummary{MinVersion: tls.VersionTLS12, ServerName: "db.internal", HasRootCAs: true}
	if diff := cmp.Diff(want, summarize(m.TLS)); diff != "" {
		t.Errorf("mysql TLS config (-want +got):\n%s", diff)
	}
	c.MySQL.TLSServerName = "mysql.test"
	if m, err = c.MySQLConfig(); err != nil || m.TLS.ServerName != "mysql.test" {
		t.Errorf("mysql.tls_server_name: %v, %v", m, err)
	}

	c.Admin.TLSCert, c.Admin.TLSKey = certs.ServerCert, certs.ServerKey
	a, err := c.AdminTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&tlsSummary{MinVersion: tls.VersionTLS12, Certificates: 1}, summarize(a)); diff != "" {
		t.Errorf("admin TLS config (-want +got):\n%s", diff)
	}
}
