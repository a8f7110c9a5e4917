// Package secret keeps passwords out of messages: it redacts the password
// of a URL (Redis, proxy) or of a go-sql-driver/mysql DSN before either is
// logged, reported or put in an error, and scrubs known secret values out
// of a text. It is the one redaction helper of redcrawl; the placeholder is
// always Mask.
package secret

import (
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Mask replaces a redacted password (as url.URL.Redacted does).
const Mask = "xxxxx"

// URL returns raw with the password of its userinfo replaced by Mask; the
// user name stays, as it names an account rather than proving it. A URL
// that does not parse is redacted textually (everything between the
// scheme's "://" and the last "@" after the first ":" is masked), so a
// malformed URL never leaks either.
func URL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	} else if err == nil {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + 3
	}
	at := strings.LastIndex(raw, "@")
	if at < start {
		return raw
	}
	userinfo := raw[start:at]
	if k := strings.Index(userinfo, ":"); k >= 0 {
		return raw[:start] + userinfo[:k] + ":" + Mask + raw[at:]
	}
	return raw
}

// DSN returns a go-sql-driver/mysql DSN with its password replaced by
// Mask. A DSN that does not parse is cut to what follows its last "@"
// (the address and database), prefixed with Mask, so that a password is
// never shown.
func DSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		if at := strings.LastIndex(dsn, "@"); at >= 0 {
			return Mask + dsn[at:]
		}
		return dsn
	}
	if cfg.Passwd != "" {
		cfg.Passwd = Mask
	}
	return cfg.FormatDSN()
}

// URLPassword returns the password of a URL's userinfo, "" when it has
// none or does not parse.
func URLPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

// Scrub replaces every occurrence of each non-empty secret in msg by Mask,
// and of its URL-escaped spellings (a password inside a URL that made its
// way into a message).
func Scrub(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, s, Mask)
		for _, enc := range []string{url.QueryEscape(s), url.PathEscape(s), url.UserPassword("u", s).String()[2:]} {
			if enc != s {
				msg = strings.ReplaceAll(msg, enc, Mask)
			}
		}
	}
	return msg
}
