package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/session"
)

// cookieSite serves a chain of pages on 127.0.0.1 that sets a session
// cookie with a secret value and counts the requests that send it back.
type cookieSite struct {
	url      string
	value    string
	returned atomic.Int64
}

const cookiePages = 30

func startCookieSite(t *testing.T, value string) *cookieSite {
	t.Helper()
	cs := &cookieSite{value: value}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if c, err := r.Cookie("sid"); err == nil && c.Value == cs.value {
			cs.returned.Add(1)
		} else {
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: cs.value, Path: "/"})
		}
		n := 0
		fmt.Sscanf(r.URL.Path, "/p%d", &n)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><body><h1>page %d</h1>", n)
		if n+1 < cookiePages {
			fmt.Fprintf(w, `<a href="/p%d">next</a>`, n+1)
		}
		fmt.Fprint(w, "</body></html>")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	cs.url = "http://" + ln.Addr().String() + "/"
	return cs
}

// TestNoSecretLeaks runs a crawl with a master and two slaves that holds
// every kind of secret redcrawl handles (a Redis ACL user's password, a
// MySQL user's password, the admin token, proxy credentials, a session
// cookie the site sets) and greps every output of the crawl for them: the
// logs of the master and the slaves at debug level, master status, every
// Redis key of the crawl (heartbeats included), the dashboard and every
// GET endpoint of the API, the master's and the slaves' /metrics, every
// column of every row of every MySQL table, the WARC request records, and
// the errors of deliberate failures (wrong passwords, a dead proxy, a
// malformed URL).
//
// The WARC response records keep the site's Set-Cookie header as received:
// archiving the response is their purpose. Request records carry no
// Cookie, Authorization or Proxy-Authorization header.
func TestNoSecretLeaks(t *testing.T) {
	c := startLeakCrawl(t)
	var all strings.Builder
	for _, out := range c.outputs() { // the logs last: they include what the failures logged
		t.Run(out.name, func(t *testing.T) {
			s := out.read(t)
			if strings.TrimSpace(s) == "" {
				t.Fatal("nothing captured")
			}
			all.WriteString(s)
			t.Logf("captured %d bytes", len(s))
			c.checkNoSecret(t, s)
		})
	}
	// the capture holds what it should, so the grep looked at real output
	for _, want := range []string{
		c.proxyHost,                  // the proxy, redacted, in the pages and proxy events
		"puser:xxxxx@" + c.proxyHost, // its redacted form
		c.deadAddr,                   // the dead proxy's failures
		c.siteURL.Host,               // the pages
		c.redisUser,                  // the wrong-password error names the user, not the password
		"Access denied for user '" + c.mysqlUser + "'",
		"redcrawl_events_stored_total", // master metrics
		"WARC-Type: request",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the capture lacks %q: the grep did not see real output", want)
		}
	}
}

// leakCrawl is TestNoSecretLeaks's crawl, finished, with its secrets and
// the servers that hold them.
type leakCrawl struct {
	ctx                  context.Context
	sec                  map[string]string // secret by what it is
	dir                  string            // the secret files, the WARC files
	cfg                  *config.Config
	redisAddr, redisUser string
	mysqlUser            string
	admin                *sql.DB // the test's own MySQL connection
	proxyHost, deadAddr  string
	site                 *cookieSite
	siteURL              *url.URL
	adminBase            string // the master's admin server
	status               masterd.StatusReport
	logs                 *crawltest.LockedBuffer
	logger               *slog.Logger
}

// leakOutput is one output of the crawl that TestNoSecretLeaks greps.
type leakOutput struct {
	name string
	read func(t *testing.T) string
}

// startLeakCrawl runs a crawl holding every kind of secret to its end,
// the master still running (its admin server and the slaves' /metrics
// are read next).
func startLeakCrawl(t *testing.T) *leakCrawl {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	b := make([]byte, 8)
	rand.Read(b)
	tag := hex.EncodeToString(b)
	c := &leakCrawl{ctx: ctx, dir: t.TempDir(), cfg: crawltest.Config(t), logs: &crawltest.LockedBuffer{}, sec: map[string]string{
		"redis password":         "RedisPw" + tag,
		"mysql password":         "MysqlPw" + tag,
		"admin token":            "AdminTok" + tag,
		"proxy password":         "ProxyPw" + tag,
		"dead proxy password":    "DeadProxyPw" + tag,
		"cookie value":           "CookieVal" + tag,
		"wrong redis password":   "WrongRedisPw" + tag,
		"wrong mysql password":   "WrongMysqlPw" + tag,
		"malformed url password": "BadUrlPw" + tag,
		"wrong proxy password":   "WrongProxyPw" + tag,
	}}
	c.logger = slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c.addRedisUser(t, tag)
	userDSN := c.addMySQLUser(t, tag)
	proxy := c.startProxies(t)
	c.site = startCookieSite(t, c.sec["cookie value"])
	c.siteURL, _ = url.Parse(c.site.url)

	// the config: every secret in a file or a URL, as an operator would
	cfg := c.cfg
	cfg.Redis.URL = "redis://" + c.redisUser + "@" + c.redisAddr + "/0"
	cfg.Redis.PasswordFile = c.file(t, "redis.pw", c.sec["redis password"]+"\n")
	cfg.MySQL.DSN = userDSN
	cfg.MySQL.PasswordFile = c.file(t, "mysql.pw", c.sec["mysql password"]+"\n")
	cfg.Admin.TokenFile = c.file(t, "admin.token", c.sec["admin token"]+"\n")
	// the slaves serve /metrics on loopback, where Prometheus scrapes them
	cfg.Admin.SDAllow = []string{"127.0.0.0/8"}
	cfg.Fetch.Proxies = []string{
		"http://puser:" + c.sec["proxy password"] + "@" + c.proxyHost,
		"http://duser:" + c.sec["dead proxy password"] + "@" + c.deadAddr,
	}
	cfg.Fetch.Cookies = true
	cfg.Fetch.ProxyMaxErrors = 2
	cfg.Lease.MaxAttempts = 20
	cfg.Crawl.AllowHosts = []string{c.siteURL.Hostname()}
	cfg.Storage.WARCDir = filepath.Join(c.dir, "warc")
	cfg.Rules.Dir = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Token != c.sec["admin token"] {
		t.Fatal("admin.token_file was not read")
	}

	if _, err := masterd.Seed(ctx, cfg, []string{c.site.url}); err != nil {
		t.Fatal(err)
	}
	c.startMaster(t)
	for _, id := range []string{"leak-1", "leak-2"} {
		crawltest.StartSlaveLogged(t, cfg, id, c.logger.With("proc", id))
	}
	c.waitFinished(t)
	if c.site.returned.Load() == 0 {
		t.Fatal("no request sent the site's cookie back: the cookie secret was not exercised")
	}
	if proxy.Requests() == 0 {
		t.Fatal("no request went through the proxy")
	}
	return c
}

// file writes a secret file.
func (c *leakCrawl) file(t *testing.T, name, content string) string {
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// addRedisUser adds a Redis ACL user with a password, deleted when the
// test ends (after the crawl's keys).
func (c *leakCrawl) addRedisUser(t *testing.T, tag string) {
	c.redisAddr = "127.0.0.1:6379"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		if pu, err := url.Parse(u); err == nil {
			c.redisAddr = pu.Host
		}
	}
	root := redis.NewClient(&redis.Options{Addr: c.redisAddr})
	t.Cleanup(func() { root.Close() })
	c.redisUser = "redcrawl-leak-" + tag
	if err := root.Do(c.ctx, "ACL", "SETUSER", c.redisUser, "on", ">"+c.sec["redis password"], "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { root.Do(context.Background(), "ACL", "DELUSER", c.redisUser) })
}

// addMySQLUser adds a MySQL user with a password on the crawl's
// database, dropped when the test ends, and returns its DSN without the
// password.
func (c *leakCrawl) addMySQLUser(t *testing.T, tag string) string {
	dsn, err := mysql.ParseDSN(c.cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if c.admin, err = sql.Open("mysql", c.cfg.MySQL.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.admin.Close() })
	c.mysqlUser = "rc_leak_" + tag
	for _, q := range []string{
		"CREATE USER '" + c.mysqlUser + "'@'%' IDENTIFIED BY '" + c.sec["mysql password"] + "'",
		"GRANT ALL ON `" + dsn.DBName + "`.* TO '" + c.mysqlUser + "'@'%'",
	} {
		if _, err := c.admin.ExecContext(c.ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { c.admin.Exec("DROP USER IF EXISTS '" + c.mysqlUser + "'@'%'") })
	user := dsn.Clone()
	user.User, user.Passwd = c.mysqlUser, ""
	return user.FormatDSN()
}

// startProxies starts a proxy that wants credentials and a dead one (it
// hangs up on every connection, and keeps its port: a closed listener's
// port could go to another test's server, which would answer).
func (c *leakCrawl) startProxies(t *testing.T) *testsite.Proxy {
	proxies, err := testsite.StartProxies(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxies[0].Close() })
	proxies[0].RequireAuth("puser", c.sec["proxy password"])
	c.proxyHost = strings.TrimPrefix(proxies[0].URL(), "http://")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	go func() {
		for {
			conn, err := dead.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	c.deadAddr = dead.Addr().String()
	return proxies[0]
}

// startMaster runs the master, stopped when the test ends, and waits for
// its admin server.
func (c *leakCrawl) startMaster(t *testing.T) {
	addrc := make(chan string, 1)
	mctx, stopMaster := context.WithCancel(c.ctx)
	mdone := make(chan error, 1)
	go func() {
		mdone <- masterd.New(c.cfg, masterd.Options{Logger: c.logger.With("proc", "master"),
			AdminReady: func(a string) { addrc <- a }}).Run(mctx)
	}()
	t.Cleanup(func() {
		stopMaster()
		if err := <-mdone; err != nil {
			t.Errorf("master: %v", err)
		}
	})
	select {
	case a := <-addrc:
		c.adminBase = "http://" + a
	case err := <-mdone:
		t.Fatalf("master stopped before its admin server listened: %v", err)
	}
}

// waitFinished waits for the crawl to finish (bounded: 600 polls).
func (c *leakCrawl) waitFinished(t *testing.T) {
	for i := 0; ; i++ {
		if i == 600 {
			t.Fatalf("crawl not finished: %+v", c.status)
		}
		var err error
		if c.status, err = masterd.Status(c.ctx, c.cfg); err != nil {
			t.Fatal(err)
		}
		if c.status.Finished {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if c.status.Done < cookiePages {
		t.Fatalf("%d pages done, want %d", c.status.Done, cookiePages)
	}
}

// checkNoSecret fails the test for each secret s holds, as is, escaped
// for a URL or in lower case.
func (c *leakCrawl) checkNoSecret(t *testing.T, s string) {
	for name, v := range c.sec {
		for _, spelling := range []string{v, url.QueryEscape(v), strings.ToLower(v)} {
			if i := strings.Index(s, spelling); i >= 0 {
				t.Errorf("leaks the %s: …%s…", name, s[max(0, i-120):min(len(s), i+len(spelling)+40)])
			}
		}
	}
}

// outputs are every output of the crawl, the logs last.
func (c *leakCrawl) outputs() []leakOutput {
	outs := []leakOutput{
		{"status text", func(*testing.T) string { return fmt.Sprintf("%+v", c.status) }},
		{"status json", func(*testing.T) string { js, _ := json.MarshalIndent(c.status, "", "  "); return string(js) }},
		{"redis keys", c.redisKeys},
	}
	for _, p := range []string{"/", "/api/v1/overview", "/api/v1/series?span=1h&step=30s", "/api/v1/exceptions",
		"/api/v1/lost", "/api/v1/proxies", "/api/v1/sd", "/metrics"} {
		outs = append(outs, leakOutput{"admin " + p, func(t *testing.T) string { return c.get(t, c.adminBase+p, true) }})
	}
	outs = append(outs,
		leakOutput{"admin /login", func(t *testing.T) string { return c.get(t, c.adminBase+"/login", false) }},
		leakOutput{"admin login response", c.loginResponse},
		leakOutput{"slave /metrics", c.slaveMetrics},
		leakOutput{"mysql rows", func(t *testing.T) string { return dumpTables(t, c.ctx, c.admin) }},
		leakOutput{"warc requests", func(t *testing.T) string { return warcRequests(t, c.cfg.Storage.WARCDir) }},
		leakOutput{"wrong redis password", c.wrongRedisPassword},
		leakOutput{"wrong mysql password", c.wrongMySQLPassword},
		leakOutput{"malformed url", c.malformedURL},
		leakOutput{"dead proxy", c.proxyFailure("http://duser:" + c.sec["dead proxy password"] + "@" + c.deadAddr)},
		leakOutput{"wrong proxy password", c.proxyFailure("http://puser:" + c.sec["wrong proxy password"] + "@" + c.proxyHost)},
		leakOutput{"logs", func(*testing.T) string { return c.logs.String() }},
	)
	return outs
}

// redisKeys is every Redis key of the crawl, heartbeats included.
func (c *leakCrawl) redisKeys(t *testing.T) string {
	rdb := redis.NewClient(&redis.Options{Addr: c.redisAddr, Username: c.redisUser, Password: c.sec["redis password"]})
	defer rdb.Close()
	return dumpCrawlKeys(t, c.ctx, rdb, c.cfg.Crawl.Name)
}

// get returns the headers and the body of a GET of u (with the admin
// token when auth), which must answer 200.
func (c *leakCrawl) get(t *testing.T, u string, auth bool) string {
	t.Helper()
	hdr, body := c.getParts(t, u, auth)
	return hdr + body
}

func (c *leakCrawl) getParts(t *testing.T, u string, auth bool) (hdr, body string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(c.ctx, http.MethodGet, u, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.sec["admin token"])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h bytes.Buffer
	resp.Header.Write(&h)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", u, resp.Status)
	}
	return h.String(), string(b)
}

// loginResponse is the answer to a login with the admin token: its
// session cookie is an HMAC, not the token.
func (c *leakCrawl) loginResponse(t *testing.T) string {
	login, err := http.PostForm(c.adminBase+"/login", url.Values{"token": {c.sec["admin token"]}})
	if err != nil {
		t.Fatal(err)
	}
	defer login.Body.Close()
	var hdr bytes.Buffer
	login.Header.Write(&hdr)
	body, _ := io.ReadAll(login.Body)
	return hdr.String() + string(body)
}

// slaveMetrics is each slave's /metrics, found by /api/v1/sd.
func (c *leakCrawl) slaveMetrics(t *testing.T) string {
	var sd []struct {
		Targets []string `json:"targets"`
	}
	if _, body := c.getParts(t, c.adminBase+"/api/v1/sd", true); json.Unmarshal([]byte(body), &sd) != nil || len(sd) == 0 {
		t.Fatalf("sd: %q", body)
	}
	var out strings.Builder
	for _, s := range sd {
		for _, target := range s.Targets {
			out.WriteString(c.get(t, "http://"+target+"/metrics", false))
		}
	}
	return out.String()
}

// wrongRedisPassword is the error of master status with a wrong Redis
// password.
func (c *leakCrawl) wrongRedisPassword(t *testing.T) string {
	wrong := *c.cfg
	wrong.Redis.PasswordFile = c.file(t, "wrong-redis.pw", c.sec["wrong redis password"])
	if err := wrong.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := masterd.Status(c.ctx, &wrong)
	if err == nil {
		t.Fatal("status with a wrong redis password succeeded")
	}
	return err.Error()
}

// wrongMySQLPassword is the error of opening the store with a wrong MySQL
// password.
func (c *leakCrawl) wrongMySQLPassword(t *testing.T) string {
	wrong := *c.cfg
	wrong.MySQL.PasswordFile = c.file(t, "wrong-mysql.pw", c.sec["wrong mysql password"])
	if err := wrong.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := store.OpenMigrated(c.ctx, wrong.MySQL.DSN, wrong.MySQL.MigrateDSN)
	if err == nil {
		t.Fatal("open with a wrong mysql password succeeded")
	}
	return err.Error()
}

// malformedURL is the error of loading a config whose redis.url, with a
// password, does not parse.
func (c *leakCrawl) malformedURL(t *testing.T) string {
	bad := c.file(t, "bad.yaml", "redis:\n  url: \"redis://u:"+c.sec["malformed url password"]+"@[::1\"\n")
	_, err := config.Load(bad)
	if err == nil {
		t.Fatal("a malformed redis url loaded")
	}
	return err.Error()
}

// proxyFailure fetches the site through a proxy that fails (raw: its URL
// with credentials) with a session pool as a slave's fetcher uses it, and
// returns the error, the pool's verdict, its events and its proxies'
// status.
func (c *leakCrawl) proxyFailure(raw string) func(t *testing.T) string {
	return func(t *testing.T) string {
		var events []string
		pool, err := session.New(session.Options{Proxies: []string{raw}, MaxErrors: 1, Logger: c.logger.With("proc", t.Name()),
			OnEvent: func(e session.Event) { events = append(events, fmt.Sprintf("%+v", e)) }})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.CloseIdleConnections()
		sess, err := pool.Acquire(c.ctx, c.siteURL.Host)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		req, _ := http.NewRequestWithContext(c.ctx, http.MethodGet, c.site.url, nil)
		res, err := sess.RoundTripper().RoundTrip(req)
		r := session.Result{Err: err}
		if err == nil {
			r.Status = res.StatusCode
			out.WriteString(res.Status + "\n")
			res.Body.Close()
		} else {
			out.WriteString(err.Error() + "\n")
		}
		if r.Status == http.StatusOK {
			t.Error("the request went through")
		}
		if len(events) == 0 {
			t.Error("the pool reported no event")
		}
		fmt.Fprintf(&out, "%+v\n%s\n%+v\n", pool.Report(sess, r), strings.Join(events, "\n"), pool.Proxies())
		return out.String()
	}
}

// dumpCrawlKeys returns every key of a crawl with its value, whatever its
// type (bounded: 100,000 keys).
func dumpCrawlKeys(t *testing.T, ctx context.Context, rdb *redis.Client, crawl string) string {
	t.Helper()
	var b strings.Builder
	iter := rdb.Scan(ctx, 0, "crawl:{"+crawl+"}:*", 1000).Iterator()
	for n := 0; iter.Next(ctx) && n < 100_000; n++ {
		k := iter.Val()
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		default:
			v = "(type " + typ + ")"
		}
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		fmt.Fprintf(&b, "%s %s %v\n", k, typ, v)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// dumpTables returns every column of every row of every table of the
// database, as text.
func dumpTables(t *testing.T, ctx context.Context, db *sql.DB) string {
	t.Helper()
	var tables []string
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 10 {
		t.Fatalf("%d tables", len(tables))
	}
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.QueryContext(ctx, "SELECT * FROM `"+table+"`")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			b.WriteString(table)
			for i, v := range vals {
				fmt.Fprintf(&b, " %s=%s", cols[i], v)
			}
			b.WriteString("\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return b.String()
}

// warcRequests returns the request records of every WARC file in dir.
func warcRequests(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz*")) // .open while the slave runs
	if err != nil || len(files) == 0 {
		t.Fatalf("no WARC files in %s: %v", dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(zr)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, rec := range strings.Split(string(data), "WARC/1.") {
			if strings.Contains(rec, "WARC-Type: request") {
				b.WriteString(rec)
			}
		}
	}
	return b.String()
}
