package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A login link logs a browser, or a headless one or a script, into the
// dashboard without typing the token: /login?link=EXP.NONCE.MAC, where MAC
// is an HMAC keyed by the admin token, so whoever knows the token (bin/master
// dashboard-link, with the config) can make one and the master can check it
// without shared state. The master exchanges it once for the login cookie
// and redirects to the dashboard; it is refused after its expiry and once
// used (per master process: the nonces it took are kept until they expire).

// MaxLinkTTL bounds how long a login link is valid.
const MaxLinkTTL = time.Hour

// LoginLink returns a one-time login link to the dashboard at base (its
// URL, "http://127.0.0.1:8080/") for the admin token, valid for ttl (at
// most MaxLinkTTL).
func LoginLink(base, token string, ttl time.Duration, now time.Time) (string, error) {
	if token == "" {
		return "", errors.New("admin.token is not set: nobody can log in (set it, env CRAWLER_ADMIN_TOKEN)")
	}
	if ttl <= 0 || ttl > MaxLinkTTL {
		return "", fmt.Errorf("link lifetime %v must be in (0, %v]", ttl, MaxLinkTTL)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("dashboard URL %q: want http(s)://host:port/", base)
	}
	nonce := make([]byte, 16)
	rand.Read(nonce)
	exp := strconv.FormatInt(now.Add(ttl).Unix(), 10)
	n := base64.RawURLEncoding.EncodeToString(nonce)
	u.Path, u.RawQuery = "/login", url.Values{"link": {exp + "." + n + "." + linkMAC(token, exp, n)}}.Encode()
	return u.String(), nil
}

func linkMAC(token, exp, nonce string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("redcrawl admin login link\x00"))
	m.Write([]byte(exp + "." + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// usedLinks are the nonces of the login links taken, until they expire.
type usedLinks struct {
	mu   sync.Mutex
	used map[string]time.Time // nonce -> expiry
}

// take reports whether nonce was not used yet, and marks it used.
func (u *usedLinks) take(nonce string, exp, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.used == nil {
		u.used = map[string]time.Time{}
	}
	for n, e := range u.used {
		if !now.Before(e) {
			delete(u.used, n)
		}
	}
	if _, ok := u.used[nonce]; ok {
		return false
	}
	u.used[nonce] = exp
	return true
}

// linkLogin exchanges a login link for the login cookie.
func (s *Server) linkLogin(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	refuse := func(status int, msg string) {
		s.renderLogin(w, r, status, msg)
	}
	if s.opt.Token == "" {
		refuse(http.StatusForbidden, "admin.token is not set: nobody can log in.")
		return
	}
	client := clientOf(r.RemoteAddr)
	if !s.logins.ready(client, now) {
		refuse(http.StatusTooManyRequests, "Too many wrong tokens; wait a few seconds and try again.")
		return
	}
	parts := strings.Split(r.URL.Query().Get("link"), ".")
	var exp int64
	var err error
	ok := len(parts) == 3
	if ok {
		exp, err = strconv.ParseInt(parts[0], 10, 64)
		ok = err == nil && hmac.Equal([]byte(parts[2]), []byte(linkMAC(s.opt.Token, parts[0], parts[1])))
	}
	if !ok {
		s.logins.fail(client, now)
		s.log.Warn("admin login link refused: not made with the admin token", "remote", r.RemoteAddr)
		refuse(http.StatusUnauthorized, "This login link is not valid: make a new one with bin/master dashboard-link.")
		return
	}
	expAt := time.Unix(exp, 0)
	if !now.Before(expAt) || expAt.Sub(now) > MaxLinkTTL {
		refuse(http.StatusUnauthorized, "This login link has expired: make a new one with bin/master dashboard-link.")
		return
	}
	if !s.links.take(parts[1], expAt, now) {
		s.log.Warn("admin login link refused: used before", "remote", r.RemoteAddr)
		refuse(http.StatusUnauthorized, "This login link was used already: make a new one with bin/master dashboard-link.")
		return
	}
	if !s.setSession(w, r, now) {
		return
	}
	s.log.Info("admin login by link", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
