package admin

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

var (
	testRDBOnce sync.Once
	testRDB     *redis.Client
	testRDBErr  error
)

// testSessions returns a session store of a crawl of its own in the
// machine's Redis (REDCRAWL_TEST_REDIS overrides), deleted after the test.
func testSessions(t testing.TB) *frontier.Sessions {
	t.Helper()
	testRDBOnce.Do(func() {
		u := os.Getenv("REDCRAWL_TEST_REDIS")
		if u == "" {
			u = "redis://127.0.0.1:6379/0"
		}
		opt, err := redis.ParseURL(u)
		if err != nil {
			testRDBErr = err
			return
		}
		testRDB = redis.NewClient(opt)
		testRDBErr = testRDB.Ping(context.Background()).Err()
	})
	if testRDBErr != nil {
		t.Fatalf("test redis: %v", testRDBErr)
	}
	crawl := testutil.CrawlName("admin")
	t.Cleanup(func() { testRDB.Del(context.Background(), frontier.NewKeys(crawl).Sessions) })
	return frontier.NewSessions(testRDB, crawl)
}

// status is the status of a read of the overview with cookie c on s at
// time at.
func status(t *testing.T, s *Server, c *http.Cookie, at time.Time) int {
	t.Helper()
	s.now = func() time.Time { return at }
	resp := do(s, request{path: "/api/v1/overview", cookie: c})
	readBody(t, resp)
	return resp.StatusCode
}

// TestLogoutRevokesSession: a logout revokes its session on the server,
// so a copy of the cookie taken before no longer reads, at once on the
// master that served the logout and within SessionRefresh on another
// master of the same dashboard (same store in Redis).
func TestLogoutRevokesSession(t *testing.T) {
	st := testSessions(t)
	a := newTestServer(t, newFake(), func(o *Options) { o.Sessions = st })
	b := newTestServer(t, newFake(), func(o *Options) { o.Sessions = st })
	c := loginCookie(t, a)
	copied := *c
	other := loginCookie(t, a) // another browser's session

	got := map[string]int{"b before": status(t, b, &copied, testNow)}
	resp := do(a, request{method: http.MethodPost, path: "/logout", cookie: c})
	readBody(t, resp)
	got["logout"] = resp.StatusCode
	got["a after"] = status(t, a, &copied, testNow)
	got["b, cached"] = status(t, b, &copied, testNow.Add(SessionRefresh-time.Millisecond))
	got["b after refresh"] = status(t, b, &copied, testNow.Add(SessionRefresh))
	got["other session on a"] = status(t, a, other, testNow.Add(SessionRefresh))
	got["other session on b"] = status(t, b, other, testNow.Add(SessionRefresh))
	want := map[string]int{"b before": 200, "logout": 303, "a after": 401, "b, cached": 200, "b after refresh": 401,
		"other session on a": 200, "other session on b": 200}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("statuses (-want +got):\n%s", d)
	}
	state, err := st.State(context.Background(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Revoked) != 1 {
		t.Errorf("revoked in Redis: %v, want the one session", state.Revoked)
	}
	// a logout without a valid session revokes nothing
	forged := &http.Cookie{Name: cookieName, Value: other.Value[:len(other.Value)-2] + "xx"}
	readBody(t, do(a, request{method: http.MethodPost, path: "/logout", cookie: forged}))
	if state, _ := st.State(context.Background(), testNow); len(state.Revoked) != 1 {
		t.Errorf("a forged cookie's logout revoked %v", state.Revoked)
	}
	// the revoked session is dropped from Redis once it has expired
	if state, _ := st.State(context.Background(), testNow.Add(DefaultSessionTTL)); len(state.Revoked) != 0 {
		t.Errorf("revoked after expiry: %v", state.Revoked)
	}
}

// TestRevokeAllSessions: RevokeAll (bin/master dashboard-link
// --revoke-all, another process) ends every session on every master
// within SessionRefresh; a login after it works on every master.
func TestRevokeAllSessions(t *testing.T) {
	st := testSessions(t)
	a := newTestServer(t, newFake(), func(o *Options) { o.Sessions = st })
	b := newTestServer(t, newFake(), func(o *Options) { o.Sessions = st })
	ca, cb := loginCookie(t, a), loginCookie(t, b)
	got := map[string]int{"a's on b": status(t, b, ca, testNow), "b's on a": status(t, a, cb, testNow)}
	if err := st.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	later := testNow.Add(SessionRefresh)
	for name, c := range map[string]*http.Cookie{"a's": ca, "b's": cb} {
		got[name+" on a after"] = status(t, a, c, later)
		got[name+" on b after"] = status(t, b, c, later)
	}
	a.now = func() time.Time { return later }
	fresh := loginCookie(t, a)
	got["new on b"] = status(t, b, fresh, later)
	want := map[string]int{"a's on b": 200, "b's on a": 200, "a's on a after": 401, "a's on b after": 401,
		"b's on a after": 401, "b's on b after": 401, "new on b": 200}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("statuses (-want +got):\n%s", d)
	}
}

// TestSessionLifetime: a login lasts Options.SessionTTL, 12 hours by
// default (the cookie's Max-Age, its expiry, the login page); a cookie
// that claims to last longer than that (made by a master with a longer
// lifetime) is refused.
func TestSessionLifetime(t *testing.T) {
	st := testSessions(t)
	tests := []struct {
		name       string
		ttl        time.Duration
		wantMaxAge int
		wantPage   string
	}{
		{"default", 0, 12 * 3600, "for 12 hours"},
		{"one hour", time.Hour, 3600, "for 1 hour,"},
		{"90 minutes", 90 * time.Minute, 5400, "for 90 minutes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, newFake(), func(o *Options) { o.Sessions, o.SessionTTL = st, tt.ttl })
			c := loginCookie(t, s)
			if c.MaxAge != tt.wantMaxAge {
				t.Errorf("Max-Age %d, want %d", c.MaxAge, tt.wantMaxAge)
			}
			ttl := time.Duration(tt.wantMaxAge) * time.Second
			got := []int{status(t, s, c, testNow.Add(ttl-time.Second)), status(t, s, c, testNow.Add(ttl))}
			if d := cmp.Diff([]int{200, 401}, got); d != "" {
				t.Errorf("just before and at the expiry (-want +got):\n%s", d)
			}
			s.now = func() time.Time { return testNow }
			if body := readBody(t, do(s, request{path: "/login"})); !strings.Contains(body, tt.wantPage) {
				t.Errorf("login page lacks %q", tt.wantPage)
			}
		})
	}
	long := newTestServer(t, newFake(), func(o *Options) { o.Sessions, o.SessionTTL = st, 24*time.Hour })
	short := newTestServer(t, newFake(), func(o *Options) { o.Sessions, o.SessionTTL = st, time.Hour })
	c := loginCookie(t, long)
	if got := status(t, short, c, testNow); got != 401 {
		t.Errorf("a 24h cookie on a master of 1h sessions: %d, want 401", got)
	}
}

// TestSessionStoreDown: with its session store (Redis) gone a master
// refuses logins (503, saying why) and, once its copy of the state is
// sessionStale old, cookies; the Bearer token still works.
func TestSessionStoreDown(t *testing.T) {
	srv := testutil.StartRedis(t, nil)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	s := newTestServer(t, newFake(), func(o *Options) { o.Sessions = frontier.NewSessions(rdb, testutil.CrawlName("down")) })
	c := loginCookie(t, s)
	srv.Kill()

	got := map[string]int{
		"cookie, state fresh":     status(t, s, c, testNow.Add(SessionRefresh)),
		"cookie, state not stale": status(t, s, c, testNow.Add(sessionStale-time.Millisecond)),
		"cookie, state stale":     status(t, s, c, testNow.Add(sessionStale)),
	}
	resp := do(s, request{path: "/api/v1/overview", headers: bearer(testToken)})
	readBody(t, resp)
	got["bearer"] = resp.StatusCode
	resp = do(s, request{method: http.MethodPost, path: "/login", body: "token=" + testToken,
		headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	body := readBody(t, resp)
	got["login"] = resp.StatusCode
	want := map[string]int{"cookie, state fresh": 200, "cookie, state not stale": 200, "cookie, state stale": 401,
		"bearer": 200, "login": 503}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("statuses (-want +got):\n%s", d)
	}
	if !strings.Contains(body, "cannot reach its session store") || len(resp.Cookies()) != 0 {
		t.Errorf("the login page should say why and set no cookie:\n%s", body)
	}
}
