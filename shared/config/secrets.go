package config

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// resolveSecrets reads the secret files (redis.password_file,
// mysql.password_file, mysql.migrate_password_file, admin.token_file) and
// puts each secret where the constructors look for it: into redis.url's
// userinfo, into the DSNs' passwords and into admin.token. So config.yaml
// can be committed with every secret in a file (or an environment
// variable), and no package but this one knows about the files.
//
// A file's content loses one trailing newline ("\n" or "\r\n"); an
// unreadable or empty file is an *Error naming the key. Resolving again
// (Validate after an override) reads the files again and gives the same
// result. An error never holds a secret.
func (c *Config) resolveSecrets() error {
	if f := c.Redis.PasswordFile; f != "" {
		pw, err := readSecret("redis.password_file", f)
		if err != nil {
			return err
		}
		u, err := c.redisURL()
		if err != nil {
			return err
		}
		user := ""
		if u.User != nil {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, pw)
		c.Redis.URL = u.String()
	}
	if f := c.MySQL.PasswordFile; f != "" {
		dsn, err := dsnWithPassword("mysql.password_file", f, "mysql.dsn", c.MySQL.DSN)
		if err != nil {
			return err
		}
		c.MySQL.DSN = dsn
	}
	if f := c.MySQL.MigratePasswordFile; f != "" {
		if c.MySQL.MigrateDSN == "" {
			return &Error{Key: "mysql.migrate_password_file", Msg: "is set but mysql.migrate_dsn is empty (the password would belong to no user)"}
		}
		dsn, err := dsnWithPassword("mysql.migrate_password_file", f, "mysql.migrate_dsn", c.MySQL.MigrateDSN)
		if err != nil {
			return err
		}
		c.MySQL.MigrateDSN = dsn
	}
	if f := c.Admin.TokenFile; f != "" {
		tok, err := readSecret("admin.token_file", f)
		if err != nil {
			return err
		}
		if strings.ContainsAny(tok, "\r\n \t") {
			return &Error{Key: "admin.token_file", Msg: f + ": the token must not contain spaces or line breaks (one trailing newline is dropped)"}
		}
		c.Admin.Token = tok
	}
	return nil
}

// ReadSecretFile reads a secret file as the *_file keys do (one trailing
// newline dropped, an empty file an error), naming key in its errors.
func ReadSecretFile(key, path string) (string, error) { return readSecret(key, path) }

// readSecret reads the secret file path of key.
func readSecret(key, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in Msg
		}
		return "", &Error{Key: key, Msg: path + ": cannot read", Err: err}
	}
	s := string(b)
	if strings.HasSuffix(s, "\r\n") {
		s = s[:len(s)-2]
	} else if strings.HasSuffix(s, "\n") {
		s = s[:len(s)-1]
	}
	if s == "" {
		return "", &Error{Key: key, Msg: path + ": is empty"}
	}
	return s, nil
}

// dsnWithPassword returns dsn (of dsnKey) with the password read from path
// (of key).
func dsnWithPassword(key, path, dsnKey, dsn string) (string, error) {
	pw, err := readSecret(key, path)
	if err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", &Error{Key: dsnKey, Msg: "invalid go-sql-driver/mysql dsn (user:pass@tcp(host:3306)/db?parseTime=true)", Err: err}
	}
	cfg.Passwd = pw
	return cfg.FormatDSN(), nil
}
