package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// cookieName is the login cookie. Its value is an expiry and an HMAC
	// keyed by the token, never the token itself, so changing the token
	// logs every browser out.
	cookieName = "redcrawl_admin"
	// sessionTTL is how long a login lasts.
	sessionTTL = 7 * 24 * time.Hour
	// maxFormBytes bounds the login form.
	maxFormBytes = 16 << 10
)

// Refusal messages. They never contain the token.
const (
	msgReadNoToken   = "admin.token is not set: reads are refused (set admin.token, or admin.public_read for an open dashboard)"
	msgActionNoToken = "actions need admin.token, which is not set"
	msgBadToken      = "missing or wrong admin token"
	msgNeedJSON      = "actions authenticated by cookie need Content-Type: application/json"
	msgCrossSite     = "cross-site actions are refused"
)

// credential is how a request authenticated.
type credential int

const (
	credNone credential = iota
	credBearer
	credCookie
)

// authenticate says how r proves it knows the token. An Authorization
// header decides alone when present; otherwise the login cookie does.
func (s *Server) authenticate(r *http.Request) credential {
	if s.opt.Token == "" {
		return credNone
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && tokenEqual(strings.TrimSpace(tok), s.opt.Token) {
			return credBearer
		}
		return credNone
	}
	if c, err := r.Cookie(cookieName); err == nil && s.validSession(c.Value) {
		return credCookie
	}
	return credNone
}

// tokenEqual compares in constant time, also hiding the token's length.
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// sessionValue is the cookie value for a login valid until exp.
func (s *Server) sessionValue(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(s.sessionMAC(e))
}

func (s *Server) sessionMAC(exp string) []byte {
	m := hmac.New(sha256.New, []byte(s.opt.Token))
	m.Write([]byte("redcrawl admin session\x00"))
	m.Write([]byte(exp))
	return m.Sum(nil)
}

func (s *Server) validSession(v string) bool {
	e, sig, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || s.now().Unix() >= exp {
		return false
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	return hmac.Equal(mac, s.sessionMAC(e))
}

// readAllowed reports whether r may read, answering the refusal if not.
func (s *Server) readAllowed(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case s.opt.PublicRead:
		return true
	case s.opt.Token == "":
		writeError(w, http.StatusUnauthorized, msgReadNoToken)
		return false
	case s.authenticate(r) == credNone:
		w.Header().Set("WWW-Authenticate", `Bearer realm="redcrawl admin"`)
		writeError(w, http.StatusUnauthorized, msgBadToken)
		return false
	}
	return true
}

// actionAllowed reports whether r may act, answering the refusal if not.
// Actions always need the token; a cookie (which a browser adds to
// cross-site requests too) only counts with a JSON content type, which a
// cross-site form cannot send.
func (s *Server) actionAllowed(w http.ResponseWriter, r *http.Request) bool {
	if s.opt.Token == "" {
		writeError(w, http.StatusForbidden, msgActionNoToken)
		return false
	}
	switch s.authenticate(r) {
	case credBearer:
		return true
	case credCookie:
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			writeError(w, http.StatusForbidden, msgCrossSite)
			return false
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusForbidden, msgNeedJSON)
			return false
		}
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="redcrawl admin"`)
	writeError(w, http.StatusUnauthorized, msgBadToken)
	return false
}

// handleLogin shows the token form (GET) or checks it and sets the login
// cookie (POST).
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if r.Method == http.MethodGet && r.URL.Query().Has("link") { // a login link (bin/master dashboard-link)
			s.linkLogin(w, r)
			return
		}
		status := http.StatusOK
		msg := ""
		if s.opt.Token == "" {
			status, msg = http.StatusForbidden, "admin.token is not set: nobody can log in. Set it (env CRAWLER_ADMIN_TOKEN) and restart the master."
		}
		s.renderLogin(w, r, status, msg)
	case http.MethodPost:
		s.login(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.opt.Token == "" {
		s.renderLogin(w, r, http.StatusForbidden, "admin.token is not set: nobody can log in.")
		return
	}
	now := s.now()
	if !s.logins.ready(now) {
		s.log.Warn("admin login refused: too many failures", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusTooManyRequests, "Too many wrong tokens; wait a few seconds and try again.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "Could not read the form.")
		return
	}
	if !tokenEqual(r.PostForm.Get("token"), s.opt.Token) {
		s.logins.fail(now)
		s.log.Warn("admin login failed: wrong token", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "Wrong token.")
		return
	}
	s.setSession(w, r, now)
	s.log.Info("admin login", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// setSession sets the login cookie.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, now time.Time) {
	exp := now.Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    s.sessionValue(exp),
		Path:     "/",
		Expires:  exp,
		MaxAge:   int(sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

// handleLogout clears the login cookie.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    "",
		Path:     "/",
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// loginLimiter is a token bucket of failed logins: burst failures, then
// one more every refill. It slows down guessing the token.
type loginLimiter struct {
	burst  int
	refill time.Duration

	mu     sync.Mutex
	failed float64 // failures not yet refilled
	last   time.Time
}

func (l *loginLimiter) drain(now time.Time) {
	if !l.last.IsZero() && l.refill > 0 {
		l.failed -= float64(now.Sub(l.last)) / float64(l.refill)
		if l.failed < 0 {
			l.failed = 0
		}
	}
	l.last = now
}

// ready reports whether another login attempt may be checked.
func (l *loginLimiter) ready(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drain(now)
	return l.failed < float64(l.burst)
}

// fail counts a failed attempt.
func (l *loginLimiter) fail(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drain(now)
	l.failed++
}
