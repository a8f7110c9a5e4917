package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// cookieName is the login cookie. Its value is EXP.ID.MAC: the
	// session's expiry (unix seconds), its random id, and an HMAC of them
	// and the shared session epoch (SessionStore) keyed by the token, never
	// the token itself. Changing the token or the epoch
	// (dashboard-link --revoke-all) logs every browser out; a logout
	// revokes its session's id.
	cookieName = "redcrawl_admin"
	// DefaultSessionTTL is how long a login lasts when
	// Options.SessionTTL is 0.
	DefaultSessionTTL = 12 * time.Hour
	// sessionSkew is how far past now + the session lifetime a cookie's
	// expiry may be (the clocks of masters that share the dashboard).
	sessionSkew = time.Minute
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
	if c, err := r.Cookie(cookieName); err == nil {
		if _, ok := s.validSession(r, c.Value); ok {
			return credCookie
		}
	}
	return credNone
}

// tokenEqual compares in constant time, also hiding the token's length.
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// session is a login: its id and expiry.
type session struct {
	id  string
	exp time.Time
}

// sessionValue is the cookie value of a login under epoch.
func (s *Server) sessionValue(epoch string, sess session) string {
	e := strconv.FormatInt(sess.exp.Unix(), 10)
	return e + "." + sess.id + "." + base64.RawURLEncoding.EncodeToString(s.sessionMAC(epoch, e, sess.id))
}

func (s *Server) sessionMAC(epoch, exp, id string) []byte {
	m := hmac.New(sha256.New, []byte(s.opt.Token))
	m.Write([]byte("redcrawl admin session\x00"))
	m.Write([]byte(epoch + "\x00" + exp + "." + id))
	return m.Sum(nil)
}

// validSession checks a login cookie's value: not expired, not longer
// than a session lasts, not revoked, signed under the current epoch.
func (s *Server) validSession(r *http.Request, v string) (session, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || s.sessions == nil {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	now := s.now()
	if err != nil || now.Unix() >= exp || exp > now.Add(s.ttl+sessionSkew).Unix() {
		return session{}, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return session{}, false
	}
	epoch, revoked, err := s.sessions.state(r.Context(), now, parts[1], false)
	if err != nil {
		s.logError(r, "admin session check failed: cookies refused", err)
		return session{}, false
	}
	if revoked || !hmac.Equal(mac, s.sessionMAC(epoch, parts[0], parts[1])) {
		return session{}, false
	}
	return session{id: parts[1], exp: time.Unix(exp, 0)}, true
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
	client := clientOf(r.RemoteAddr)
	if !s.logins.ready(client, now) {
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
		s.logins.fail(client, now)
		s.log.Warn("admin login failed: wrong token", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "Wrong token.")
		return
	}
	if !s.setSession(w, r, now) {
		return
	}
	s.log.Info("admin login", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// msgNoSessions is the login page's message when no session can start.
const msgNoSessions = "The master cannot reach its session store (Redis) to start a session; try again shortly, or use the token as a Bearer header."

// setSession starts a session and sets its login cookie; when the session
// store cannot be read it answers the login page with the reason instead
// and returns false.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, now time.Time) bool {
	var epoch string
	err := errors.New("no session store")
	if s.sessions != nil {
		epoch, _, err = s.sessions.state(r.Context(), now, "", true)
	}
	if err != nil {
		s.logError(r, "admin login failed: no session", err)
		s.renderLogin(w, r, http.StatusServiceUnavailable, msgNoSessions)
		return false
	}
	id := make([]byte, 16)
	rand.Read(id)
	sess := session{id: base64.RawURLEncoding.EncodeToString(id), exp: now.Add(s.ttl)}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    s.sessionValue(epoch, sess),
		Path:     "/",
		Expires:  sess.exp,
		MaxAge:   int(s.ttl / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	return true
}

// handleLogout revokes the login cookie's session on every master and
// clears the cookie.
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
	if c, err := r.Cookie(cookieName); err == nil {
		if sess, ok := s.validSession(r, c.Value); ok {
			if err := s.sessions.revoke(r.Context(), sess.id, sess.exp); err != nil {
				s.logError(r, "admin logout: session not revoked on the other masters", err)
				s.renderLogin(w, r, http.StatusServiceUnavailable, "Logged out here, but the master could not revoke the session "+
					"in its session store (Redis): other masters of the dashboard still take it until it expires "+
					"(bin/master dashboard-link --revoke-all ends every session).")
				return
			}
			s.log.Info("admin logout", "remote", r.RemoteAddr)
		}
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
