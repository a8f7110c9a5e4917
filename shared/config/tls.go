package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// This file holds what TLS and clear-text passwords need: the client TLS
// settings of Redis and MySQL, the admin server's certificate, and the
// check that no password goes in clear text to an address that is not
// loopback (redis.allow_insecure, mysql.allow_insecure,
// admin.allow_insecure turn it off).

// tlsFiles are one section's client TLS keys.
type tlsFiles struct {
	section                string // "redis" or "mysql"
	ca, cert, key, svrName string
}

func (f tlsFiles) set() []string {
	var keys []string
	for _, k := range []struct{ name, v string }{
		{"tls_ca_file", f.ca}, {"tls_cert_file", f.cert}, {"tls_key_file", f.key}, {"tls_server_name", f.svrName},
	} {
		if k.v != "" {
			keys = append(keys, f.section+"."+k.name)
		}
	}
	return keys
}

// clientTLS builds a client TLS configuration (TLS 1.2 or later) from the
// files; errors are *Error naming the key.
func (f tlsFiles) clientTLS() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.svrName}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, &Error{Key: f.section + ".tls_ca_file", Msg: "cannot read the CA bundle", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errorf(f.section+".tls_ca_file", "%s holds no PEM certificate", f.ca)
		}
		t.RootCAs = pool
	}
	cert, err := loadKeyPair(f.section+".tls_cert_file", f.cert, f.section+".tls_key_file", f.key)
	if err != nil {
		return nil, err
	}
	if cert != nil {
		t.Certificates = []tls.Certificate{*cert}
	}
	return t, nil
}

// loadKeyPair loads a PEM certificate and its key, both named or neither
// (nil, nil).
func loadKeyPair(certKey, certFile, keyKey, keyFile string) (*tls.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "":
		return nil, errorf(certKey, "must be set when %s is (both or neither)", keyKey)
	case keyFile == "":
		return nil, errorf(keyKey, "must be set when %s is (both or neither)", certKey)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, &Error{Key: certKey, Msg: fmt.Sprintf("cannot load the certificate %s with the key %s", certFile, keyFile), Err: err}
	}
	return &cert, nil
}

func (c *Config) redisTLSFiles() tlsFiles {
	r := c.Redis
	return tlsFiles{section: "redis", ca: r.TLSCAFile, cert: r.TLSCertFile, key: r.TLSKeyFile, svrName: r.TLSServerName}
}

// redisTLS returns the TLS configuration for a redis.url of this scheme:
// nil for redis://, where a redis.tls_* key is an error.
func (c *Config) redisTLS(scheme string) (*tls.Config, error) {
	f := c.redisTLSFiles()
	if scheme != "rediss" {
		if keys := f.set(); len(keys) > 0 {
			return nil, errorf(keys[0], "is set but redis.url is redis:// (plain TCP); use rediss:// to connect over TLS")
		}
		return nil, nil
	}
	return f.clientTLS()
}

// RedisClusterOptions parses redis.url as Redis Cluster seed nodes, with
// the redis.tls_* settings applied: the addresses, credentials and TLS of
// the cluster's clients, which shared/redisconn makes.
func (c *Config) RedisClusterOptions() (*redis.ClusterOptions, error) {
	u, err := c.redisURL()
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, &Error{Key: "redis.url", Msg: "a Redis Cluster has only database 0 (drop /" + p + ")"}
	}
	opt, err := redis.ParseClusterURL(c.Redis.URL)
	if err != nil {
		return nil, &Error{Key: "redis.url", Msg: "invalid redis cluster url (redis://host1:port?addr=host2:port&addr=...)", Err: stripURL(err)}
	}
	t, err := c.redisTLS(u.Scheme)
	if err != nil {
		return nil, err
	}
	opt.TLSConfig = t
	return opt, nil
}

// redisURL parses redis.url and checks its scheme.
func (c *Config) redisURL() (*url.URL, error) {
	u, err := url.Parse(c.Redis.URL)
	if err != nil {
		return nil, &Error{Key: "redis.url", Msg: "invalid url", Err: stripURL(err)}
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, &Error{Key: "redis.url", Msg: fmt.Sprintf("scheme %q must be redis or rediss (redis://[user:pass@]host:port/db)", u.Scheme)}
	}
	return u, nil
}

// stripURL drops the *url.Error layer that quotes the whole URL (with its
// password).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// MySQLConfig parses mysql.dsn and applies the mysql.tls_* settings: any
// of them set makes the connection use TLS 1.2 or later with the server's
// certificate verified. The DSN may then only say tls=true or nothing.
func (c *Config) MySQLConfig() (*mysql.Config, error) {
	return c.mysqlConfig("mysql.dsn", c.MySQL.DSN)
}

// MigrateMySQLConfig is MySQLConfig for the user that runs the migrations
// (mysql.migrate_dsn, else mysql.dsn), with the same TLS settings.
func (c *Config) MigrateMySQLConfig() (*mysql.Config, error) {
	if c.MySQL.MigrateDSN == "" {
		return c.MySQLConfig()
	}
	return c.mysqlConfig("mysql.migrate_dsn", c.MySQL.MigrateDSN)
}

func (c *Config) mysqlConfig(key, dsn string) (*mysql.Config, error) {
	d, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, &Error{Key: key, Msg: "invalid go-sql-driver/mysql dsn (user:pass@tcp(host:3306)/db?parseTime=true)", Err: err}
	}
	m := c.MySQL
	f := tlsFiles{section: "mysql", ca: m.TLSCAFile, cert: m.TLSCertFile, key: m.TLSKeyFile, svrName: m.TLSServerName}
	keys := f.set()
	if len(keys) == 0 {
		return d, nil
	}
	if d.TLSConfig != "" && d.TLSConfig != "true" {
		return nil, errorf(key, "tls=%s conflicts with %s (drop tls= from the dsn)", d.TLSConfig, keys[0])
	}
	t, err := f.clientTLS()
	if err != nil {
		return nil, err
	}
	if t.ServerName == "" {
		if host, _, err := net.SplitHostPort(d.Addr); err == nil {
			t.ServerName = host
		}
	}
	d.TLS = t
	d.TLSConfig = ""
	return d, nil
}

// AdminTLSConfig returns the admin server's TLS configuration (TLS 1.2 or
// later) from admin.tls_cert and admin.tls_key, or nil when neither is
// set: the server then speaks plain HTTP.
func (c *Config) AdminTLSConfig() (*tls.Config, error) {
	cert, err := loadKeyPair("admin.tls_cert", c.Admin.TLSCert, "admin.tls_key", c.Admin.TLSKey)
	if err != nil || cert == nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}}, nil
}

// APITLSConfig is the work API server's TLS config (api.tls_cert,
// api.tls_key; nil when neither is set), HTTP/2 first.
func (c *Config) APITLSConfig() (*tls.Config, error) {
	cert, err := loadKeyPair("api.tls_cert", c.API.TLSCert, "api.tls_key", c.API.TLSKey)
	if err != nil || cert == nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert},
		NextProtos: []string{"h2", "http/1.1"}}, nil
}

// SlaveAPITLSConfig is a work API slave's TLS config: the masters' CA
// (slave.api.ca_file), or the system's roots.
func (c *Config) SlaveAPITLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := c.Slave.API.CAFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, &Error{Key: "slave.api.ca_file", Msg: "cannot read it", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &Error{Key: "slave.api.ca_file", Msg: "holds no PEM certificate"}
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// IsLoopback reports whether host (a name or an address, without port or
// brackets) is loopback: "localhost", 127.0.0.0/8 or ::1. Other names are
// not resolved and count as remote.
func IsLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// remoteAddr returns the first of addrs (host:port) that is not loopback,
// or "".
func remoteAddr(addrs ...string) string {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if !IsLoopback(host) {
			return a
		}
	}
	return ""
}

// checkClearText refuses a configuration that would send a password in
// clear text to an address that is not loopback, unless the section's
// allow_insecure is set.
func (c *Config) checkClearText() error {
	if !c.Redis.AllowInsecure {
		u, err := c.redisURL()
		if err != nil {
			return err
		}
		var addrs []string
		var password bool
		if c.Redis.Cluster {
			opt, err := c.RedisClusterOptions()
			if err != nil {
				return err
			}
			addrs, password = opt.Addrs, opt.Password != ""
		} else {
			opt, err := c.RedisOptions()
			if err != nil {
				return err
			}
			addrs, password = []string{opt.Addr}, opt.Password != ""
		}
		if a := remoteAddr(addrs...); password && u.Scheme == "redis" && a != "" {
			return errorf("redis.url", "a password would be sent in clear text to %s; use rediss:// or set redis.allow_insecure: true", a)
		}
	}
	if !c.MySQL.AllowInsecure {
		for _, m := range []struct {
			key string
			get func() (*mysql.Config, error)
		}{{"mysql.dsn", c.MySQLConfig}, {"mysql.migrate_dsn", c.MigrateMySQLConfig}} {
			d, err := m.get()
			if err != nil {
				return err
			}
			verified := d.TLS != nil && !d.TLS.InsecureSkipVerify && !d.AllowFallbackToPlaintext
			if d.Passwd != "" && d.Net != "unix" && !verified && remoteAddr(d.Addr) != "" {
				return errorf(m.key, "a password would be sent without verified TLS to %s; set mysql.tls_ca_file "+
					"(or tls=true in the dsn) or mysql.allow_insecure: true", d.Addr)
			}
		}
	}
	if a := c.Admin; !a.AllowInsecure && a.Listen != "" && a.Token != "" && a.TLSCert == "" {
		if host, _, err := net.SplitHostPort(a.Listen); err == nil && !IsLoopback(host) {
			return errorf("admin.listen", "%q is not loopback and admin.token would travel in clear text; "+
				"set admin.tls_cert and admin.tls_key, or admin.allow_insecure: true", a.Listen)
		}
	}
	return nil
}
