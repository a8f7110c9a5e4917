package admin

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// loginCookie logs in to s and returns the cookie it sets.
func loginCookie(t *testing.T, s *Server) *http.Cookie {
	t.Helper()
	return loginCookieWith(t, s, testToken)
}

// loginCookieWith logs in to s with token and returns the cookie it sets.
func loginCookieWith(t *testing.T, s *Server, token string) *http.Cookie {
	t.Helper()
	resp := do(s, request{
		method:  http.MethodPost,
		path:    "/login",
		body:    url.Values{"token": {token}}.Encode(),
		headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
	})
	readBody(t, resp)
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatalf("login set no %s cookie (status %d)", cookieName, resp.StatusCode)
	return nil
}

func TestAuth(t *testing.T) {
	st := testSessions(t)
	withStore := func(o *Options) { o.Sessions = st }
	valid := loginCookie(t, newTestServer(t, newFake(), withStore))
	forged := &http.Cookie{Name: cookieName, Value: valid.Value[:len(valid.Value)-2] + "xx"}
	past := newTestServer(t, newFake(), withStore)
	past.now = func() time.Time { return testNow.Add(-DefaultSessionTTL - time.Second) }
	expired := loginCookie(t, past)
	other := newTestServer(t, newFake(), func(o *Options) { o.Sessions, o.Token = st, "another-token-0123456789" })
	otherToken := loginCookieWith(t, other, "another-token-0123456789")
	rawToken := &http.Cookie{Name: cookieName, Value: testToken}

	const (
		read   = "/api/v1/overview"
		action = "/api/v1/actions"
		pause  = `{"kind":"pause","crawl":"news"}`
	)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	public := func(o *Options) { o.PublicRead = true }
	noToken := func(o *Options) { o.Token = "" }

	tests := []struct {
		name       string
		opt        func(*Options)
		req        request
		wantStatus int
		wantErr    string // the JSON "error"; "" = not checked
		wantLoc    string // Location of a redirect
		wantActs   int    // actions the backend received
	}{
		{name: "read without token", req: request{path: read}, wantStatus: 401, wantErr: msgBadToken},
		{name: "read with wrong bearer", req: request{path: read, headers: bearer("wrong")}, wantStatus: 401, wantErr: msgBadToken},
		{name: "read with token prefix", req: request{path: read, headers: bearer(testToken[:10])}, wantStatus: 401, wantErr: msgBadToken},
		{name: "read with bearer", req: request{path: read, headers: bearer(testToken)}, wantStatus: 200},
		{name: "bearer scheme is case-insensitive", req: request{path: read, headers: map[string]string{"Authorization": "bearer " + testToken}}, wantStatus: 200},
		{name: "basic auth is not bearer", req: request{path: read, headers: map[string]string{"Authorization": "Basic " + testToken}}, wantStatus: 401},
		{name: "read with cookie", req: request{path: read, cookie: valid}, wantStatus: 200},
		{name: "read with forged cookie", req: request{path: read, cookie: forged}, wantStatus: 401},
		{name: "read with expired cookie", req: request{path: read, cookie: expired}, wantStatus: 401},
		{name: "read with cookie of another token", req: request{path: read, cookie: otherToken}, wantStatus: 401},
		{name: "the raw token is no cookie", req: request{path: read, cookie: rawToken}, wantStatus: 401},
		{name: "wrong bearer beats a good cookie", req: request{path: read, cookie: valid, headers: bearer("wrong")}, wantStatus: 401},
		{name: "metrics need the token", req: request{path: "/metrics"}, wantStatus: 401, wantErr: msgBadToken},
		{name: "sd needs the token", req: request{path: "/api/v1/sd"}, wantStatus: 401, wantErr: msgBadToken},
		{name: "public read", opt: public, req: request{path: read}, wantStatus: 200},
		{name: "public exceptions", opt: public, req: request{path: "/api/v1/exceptions"}, wantStatus: 200},
		{name: "public dashboard", opt: public, req: request{path: "/"}, wantStatus: 200},
		{name: "public read, action without token", opt: public, req: request{method: "POST", path: action, body: pause, headers: jsonCT}, wantStatus: 401, wantErr: msgBadToken},
		{name: "public read, action with wrong token", opt: public, req: request{method: "POST", path: action, body: pause, headers: map[string]string{"Authorization": "Bearer nope", "Content-Type": "application/json"}}, wantStatus: 401},
		{name: "public read, action with bearer", opt: public, req: request{method: "POST", path: action, body: pause, headers: jsonBearer()}, wantStatus: 200, wantActs: 1},
		{name: "no token configured: reads refused", opt: noToken, req: request{path: read}, wantStatus: 401, wantErr: msgReadNoToken},
		{name: "no token configured: empty bearer refused", opt: noToken, req: request{path: read, headers: bearer("")}, wantStatus: 401, wantErr: msgReadNoToken},
		{name: "no token configured: actions refused", opt: noToken, req: request{method: "POST", path: action, body: pause, headers: map[string]string{"Authorization": "Bearer ", "Content-Type": "application/json"}}, wantStatus: 403, wantErr: msgActionNoToken},
		{name: "no token configured: dashboard refused", opt: noToken, req: request{path: "/"}, wantStatus: 401},
		{name: "no token configured, public read", opt: func(o *Options) { noToken(o); public(o) }, req: request{path: read}, wantStatus: 200},
		{name: "no token configured, public read: actions refused", opt: func(o *Options) { noToken(o); public(o) }, req: request{method: "POST", path: action, body: pause, headers: jsonCT}, wantStatus: 403, wantErr: msgActionNoToken},
		{name: "action without token", req: request{method: "POST", path: action, body: pause, headers: jsonCT}, wantStatus: 401, wantErr: msgBadToken},
		{name: "action with bearer", req: request{method: "POST", path: action, body: pause, headers: jsonBearer()}, wantStatus: 200, wantActs: 1},
		{name: "action with bearer needs no content type", req: request{method: "POST", path: action, body: pause, headers: bearer(testToken)}, wantStatus: 200, wantActs: 1},
		{name: "action with cookie and JSON", req: request{method: "POST", path: action, body: pause, cookie: valid, headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, wantStatus: 200, wantActs: 1},
		{name: "action with cookie and no content type", req: request{method: "POST", path: action, body: pause, cookie: valid}, wantStatus: 403, wantErr: msgNeedJSON},
		{name: "action with cookie and a form", req: request{method: "POST", path: action, body: pause, cookie: valid, headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, wantStatus: 403, wantErr: msgNeedJSON},
		{name: "action with cookie and text/plain", req: request{method: "POST", path: action, body: pause, cookie: valid, headers: map[string]string{"Content-Type": "text/plain"}}, wantStatus: 403, wantErr: msgNeedJSON},
		{name: "cross-site action with cookie", req: request{method: "POST", path: action, body: pause, cookie: valid, headers: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}}, wantStatus: 403, wantErr: msgCrossSite},
		{name: "action with forged cookie", req: request{method: "POST", path: action, body: pause, cookie: forged, headers: jsonCT}, wantStatus: 401},
		{name: "dashboard redirects to login", req: request{path: "/"}, wantStatus: 303, wantLoc: "/login"},
		{name: "dashboard with cookie", req: request{path: "/", cookie: valid}, wantStatus: 200},
		{name: "dashboard with bearer", req: request{path: "/", headers: bearer(testToken)}, wantStatus: 200},
		{name: "login form is public", req: request{path: "/login"}, wantStatus: 200},
		{name: "static files are public", req: request{path: "/static/dashboard.js"}, wantStatus: 200},
		{name: "unknown page", req: request{path: "/nope", cookie: valid}, wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			var logs bytes.Buffer
			s := newTestServer(t, f, func(o *Options) {
				o.Sessions = st
				o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				if tt.opt != nil {
					tt.opt(o)
				}
			})
			resp := do(s, tt.req)
			body := readBody(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %.300s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantErr != "" {
				got, ok := decodeJSON(t, body).(map[string]any)
				if !ok || got["error"] != tt.wantErr {
					t.Errorf("body %s, want error %q", body, tt.wantErr)
				}
			}
			if loc := resp.Header.Get("Location"); loc != tt.wantLoc {
				t.Errorf("Location %q, want %q", loc, tt.wantLoc)
			}
			if n := len(f.recorded()); n != tt.wantActs {
				t.Errorf("backend got %d actions, want %d", n, tt.wantActs)
			}
			if strings.Contains(body, testToken) || strings.Contains(logs.String(), testToken) {
				t.Errorf("the token leaked into the body or the log")
			}
		})
	}
}

func TestLogin(t *testing.T) {
	form := func(tok string) request {
		return request{
			method:  http.MethodPost,
			path:    "/login",
			body:    url.Values{"token": {tok}}.Encode(),
			headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		}
	}
	t.Run("right token sets the cookie", func(t *testing.T) {
		var logs bytes.Buffer
		s := newTestServer(t, newFake(), func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
		resp := do(s, form(testToken))
		readBody(t, resp)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Fatalf("got %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
		}
		cs := resp.Cookies()
		if len(cs) != 1 {
			t.Fatalf("got %d cookies, want 1", len(cs))
		}
		c := cs[0]
		type attrs struct {
			Name     string
			Path     string
			HttpOnly bool
			SameSite http.SameSite
			MaxAge   int
		}
		want := attrs{Name: cookieName, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: int(DefaultSessionTTL / time.Second)}
		if d := cmp.Diff(want, attrs{c.Name, c.Path, c.HttpOnly, c.SameSite, c.MaxAge}); d != "" {
			t.Errorf("cookie (-want +got):\n%s", d)
		}
		if strings.Contains(c.Value, testToken) || strings.Contains(logs.String(), testToken) {
			t.Error("the token leaked into the cookie or the log")
		}
		if resp := do(s, request{path: "/api/v1/overview", cookie: c}); resp.StatusCode != http.StatusOK {
			t.Errorf("read with the new cookie: status %d", resp.StatusCode)
		}
	})
	t.Run("wrong token is refused", func(t *testing.T) {
		s := newTestServer(t, newFake(), nil)
		resp := do(s, form("guess"))
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Fatalf("got %d with %d cookies, want 401 and none", resp.StatusCode, len(resp.Cookies()))
		}
		if !strings.Contains(body, "Wrong token.") || !strings.Contains(body, `id="login-form"`) {
			t.Errorf("the page should say so and show the form again:\n%s", body)
		}
	})
	t.Run("guessing is slowed down", func(t *testing.T) {
		s := newTestServer(t, newFake(), nil)
		var got []int
		for range 7 {
			resp := do(s, form("guess"))
			readBody(t, resp)
			got = append(got, resp.StatusCode)
		}
		resp := do(s, form(testToken))
		readBody(t, resp)
		got = append(got, resp.StatusCode)
		want := []int{401, 401, 401, 401, 401, 429, 429, 429}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("statuses (-want +got):\n%s", d)
		}
		later := testNow.Add(6 * time.Second)
		s.now = func() time.Time { return later }
		resp = do(s, form(testToken))
		readBody(t, resp)
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after a wait: status %d, want 303", resp.StatusCode)
		}
	})
	t.Run("no token configured", func(t *testing.T) {
		s := newTestServer(t, newFake(), func(o *Options) { o.Token = "" })
		for _, req := range []request{{path: "/login"}, form("")} {
			resp := do(s, req)
			body := readBody(t, resp)
			if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 || !strings.Contains(body, "admin.token is not set") {
				t.Errorf("%s /login: got %d with %d cookies, want 403 saying admin.token is not set", req.method, resp.StatusCode, len(resp.Cookies()))
			}
		}
	})
	t.Run("logout clears the cookie", func(t *testing.T) {
		s := newTestServer(t, newFake(), nil)
		resp := do(s, request{method: http.MethodPost, path: "/logout", cookie: loginCookie(t, s)})
		readBody(t, resp)
		cs := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || cs[0].Name != cookieName || cs[0].MaxAge >= 0 || cs[0].Value != "" {
			t.Errorf("got %d with cookies %v, want 303 and an expired empty cookie", resp.StatusCode, cs)
		}
		if resp := do(s, request{path: "/logout"}); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET /logout: status %d, want 405", resp.StatusCode)
		}
	})
}

func TestTokenEqual(t *testing.T) {
	tests := []struct {
		got, want string
		eq        bool
	}{
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"ab", "abc", false},
		{"", "abc", false},
		{"", "", true},
	}
	for _, tt := range tests {
		if eq := tokenEqual(tt.got, tt.want); eq != tt.eq {
			t.Errorf("tokenEqual(%q, %q) = %v, want %v", tt.got, tt.want, eq, tt.eq)
		}
	}
}
