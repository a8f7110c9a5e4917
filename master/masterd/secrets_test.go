package masterd_test

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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/session"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// lockedBuffer is a bytes.Buffer for loggers of several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := make([]byte, 8)
	rand.Read(b)
	tag := hex.EncodeToString(b)
	sec := map[string]string{
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
	}
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// A Redis ACL user with a password (deleted after the crawl's keys).
	redisAddr := "127.0.0.1:6379"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		if pu, err := url.Parse(u); err == nil {
			redisAddr = pu.Host
		}
	}
	root := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer root.Close()
	redisUser := "redcrawl-leak-" + tag
	if err := root.Do(ctx, "ACL", "SETUSER", redisUser, "on", ">"+sec["redis password"], "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() { root.Do(context.Background(), "ACL", "DELUSER", redisUser) })

	cfg := clusterConfig(t)

	// A MySQL user with a password on the crawl's database.
	dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	mysqlUser := "rc_leak_" + tag
	for _, q := range []string{
		"CREATE USER '" + mysqlUser + "'@'%' IDENTIFIED BY '" + sec["mysql password"] + "'",
		"GRANT ALL ON `" + dsn.DBName + "`.* TO '" + mysqlUser + "'@'%'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { admin.Exec("DROP USER IF EXISTS '" + mysqlUser + "'@'%'") })
	userDSN := dsn.Clone()
	userDSN.User, userDSN.Passwd = mysqlUser, ""

	// Proxies: one that wants credentials, one dead (its port closed).
	proxies, err := testsite.StartProxies(1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxies[0].Close()
	proxies[0].RequireAuth("puser", sec["proxy password"])
	proxyHost := strings.TrimPrefix(proxies[0].URL(), "http://")
	// a dead proxy: it hangs up on every connection. It keeps its port
	// (a closed listener's port could go to another test's server, which
	// would answer the request)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	deadAddr := dead.Addr().String()

	site := startCookieSite(t, sec["cookie value"])
	siteURL, _ := url.Parse(site.url)

	// The config: every secret in a file or a URL, as an operator would.
	cfg.Redis.URL = "redis://" + redisUser + "@" + redisAddr + "/0"
	cfg.Redis.PasswordFile = file("redis.pw", sec["redis password"]+"\n")
	cfg.MySQL.DSN = userDSN.FormatDSN()
	cfg.MySQL.PasswordFile = file("mysql.pw", sec["mysql password"]+"\n")
	cfg.Admin.TokenFile = file("admin.token", sec["admin token"]+"\n")
	cfg.Fetch.Proxies = []string{
		"http://puser:" + sec["proxy password"] + "@" + proxyHost,
		"http://duser:" + sec["dead proxy password"] + "@" + deadAddr,
	}
	cfg.Fetch.Cookies = true
	cfg.Fetch.ProxyMaxErrors = 2
	cfg.Lease.MaxAttempts = 20
	cfg.Crawl.AllowHosts = []string{siteURL.Hostname()}
	cfg.Storage.WARCDir = filepath.Join(dir, "warc")
	cfg.Rules.Dir = ""
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Token != sec["admin token"] {
		t.Fatal("admin.token_file was not read")
	}

	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := masterd.Seed(ctx, cfg, []string{site.url}); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	mctx, stopMaster := context.WithCancel(ctx)
	mdone := make(chan error, 1)
	go func() {
		mdone <- masterd.New(cfg, masterd.Options{Logger: logger.With("proc", "master"),
			AdminReady: func(a string) { addrc <- a }}).Run(mctx)
	}()
	defer func() {
		stopMaster()
		if err := <-mdone; err != nil {
			t.Errorf("master: %v", err)
		}
	}()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a
	case err := <-mdone:
		t.Fatalf("master stopped before its admin server listened: %v", err)
	}
	for _, id := range []string{"leak-1", "leak-2"} {
		startSlaveLogged(t, cfg, id, logger.With("proc", id))
	}

	// Wait for the crawl to finish (bounded: 600 polls).
	var st masterd.StatusReport
	for i := 0; ; i++ {
		if i == 600 {
			t.Fatalf("crawl not finished: %+v", st)
		}
		if st, err = masterd.Status(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if st.Finished {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.Done < cookiePages {
		t.Fatalf("%d pages done, want %d", st.Done, cookiePages)
	}
	if site.returned.Load() == 0 {
		t.Fatal("no request sent the site's cookie back: the cookie secret was not exercised")
	}
	if proxies[0].Requests() == 0 {
		t.Fatal("no request went through the proxy")
	}

	capture := map[string]string{}
	add := func(what, s string) { capture[what] += s + "\n" }

	// master status, text and JSON.
	add("status text", fmt.Sprintf("%+v", st))
	js, _ := json.MarshalIndent(st, "", "  ")
	add("status json", string(js))

	// Every Redis key of the crawl, heartbeats included.
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, Username: redisUser, Password: sec["redis password"]})
	defer rdb.Close()
	add("redis", dumpCrawlKeys(t, ctx, rdb, cfg.Crawl.Name))

	// The admin server: dashboard, login page, every GET endpoint,
	// /metrics; then each slave's /metrics listed by /api/v1/sd.
	get := func(u string, auth bool) (string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+sec["admin token"])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var hdr bytes.Buffer
		resp.Header.Write(&hdr)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", u, resp.Status)
		}
		return hdr.String(), string(body)
	}
	getAll := func(u string, auth bool) string { h, b := get(u, auth); return h + b }
	for _, p := range []string{"/", "/api/v1/overview", "/api/v1/series?span=1h&step=30s", "/api/v1/exceptions",
		"/api/v1/lost", "/api/v1/proxies", "/api/v1/sd", "/metrics"} {
		add("admin "+p, getAll(base+p, true))
	}
	add("admin /login", getAll(base+"/login", false))
	login, err := http.PostForm(base+"/login", url.Values{"token": {sec["admin token"]}})
	if err != nil {
		t.Fatal(err)
	}
	var lh bytes.Buffer
	login.Header.Write(&lh) // the session cookie: an HMAC, not the token
	lb, _ := io.ReadAll(login.Body)
	login.Body.Close()
	add("admin login response", lh.String()+string(lb))
	var sd []struct {
		Targets []string `json:"targets"`
	}
	if _, body := get(base+"/api/v1/sd", true); json.Unmarshal([]byte(body), &sd) != nil || len(sd) == 0 {
		t.Fatalf("sd: %q", body)
	}
	for _, s := range sd {
		for _, target := range s.Targets {
			add("slave /metrics "+target, getAll("http://"+target+"/metrics", false))
		}
	}

	// Every column of every row of every MySQL table of the crawl.
	add("mysql", dumpTables(t, ctx, admin))

	// WARC request records.
	add("warc requests", warcRequests(t, cfg.Storage.WARCDir))

	// Deliberate failures.
	wrong := *cfg
	wrong.Redis.PasswordFile = file("wrong-redis.pw", sec["wrong redis password"])
	if err := wrong.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := masterd.Status(ctx, &wrong); err == nil {
		t.Error("status with a wrong redis password succeeded")
	} else {
		add("wrong redis password", err.Error())
	}
	wrong = *cfg
	wrong.MySQL.PasswordFile = file("wrong-mysql.pw", sec["wrong mysql password"])
	if err := wrong.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenMigrated(ctx, wrong.MySQL.DSN, wrong.MySQL.MigrateDSN); err == nil {
		t.Error("open with a wrong mysql password succeeded")
	} else {
		add("wrong mysql password", err.Error())
	}
	badURL := file("bad.yaml", "redis:\n  url: \"redis://u:"+sec["malformed url password"]+"@[::1\"\n")
	if _, err := config.Load(badURL); err == nil {
		t.Error("a malformed redis url loaded")
	} else {
		add("malformed url", err.Error())
	}
	// Proxy failures: a dead proxy and a wrong proxy password, through a
	// session pool as a slave's fetcher uses it (its events and logs too).
	for name, raw := range map[string]string{
		"dead proxy":           "http://duser:" + sec["dead proxy password"] + "@" + deadAddr,
		"wrong proxy password": "http://puser:" + sec["wrong proxy password"] + "@" + proxyHost,
	} {
		var events []string
		pool, err := session.New(session.Options{Proxies: []string{raw}, MaxErrors: 1, Logger: logger.With("proc", name),
			OnEvent: func(e session.Event) { events = append(events, fmt.Sprintf("%+v", e)) }})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := pool.Acquire(ctx, siteURL.Host)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, site.url, nil)
		res, err := sess.RoundTripper().RoundTrip(req)
		r := session.Result{Err: err}
		if err == nil {
			r.Status = res.StatusCode
			add(name, res.Status)
			res.Body.Close()
		} else {
			add(name, err.Error())
		}
		if r.Status == http.StatusOK {
			t.Errorf("%s: the request went through", name)
		}
		add(name+" verdict", fmt.Sprintf("%+v", pool.Report(sess, r)))
		add(name+" events", strings.Join(events, "\n"))
		add(name+" status", fmt.Sprintf("%+v", pool.Proxies()))
		pool.CloseIdleConnections()
	}
	add("logs", logs.String()) // last: includes what the failures logged

	all := ""
	for what, s := range capture {
		if strings.TrimSpace(s) == "" {
			t.Errorf("capture %q is empty", what)
		}
		all += s
		t.Logf("captured %s: %d bytes", what, len(s))
		for name, v := range sec {
			for _, spelling := range []string{v, url.QueryEscape(v), strings.ToLower(v)} {
				if strings.Contains(s, spelling) {
					i := strings.Index(s, spelling)
					t.Errorf("%s leaks the %s: …%s…", what, name, s[max(0, i-120):min(len(s), i+len(spelling)+40)])
				}
			}
		}
	}
	// Self-check: the capture holds what it should, so the grep above
	// looked at real output.
	for _, want := range []string{
		proxyHost,                  // the proxy, redacted, in the pages and proxy events
		"puser:xxxxx@" + proxyHost, // its redacted form
		deadAddr,                   // the dead proxy's failures
		siteURL.Host,               // the pages
		redisUser,                  // the wrong-password error names the user, not the password
		"Access denied for user '" + mysqlUser + "'",
		"redcrawl_events_stored_total", // master metrics
		"WARC-Type: request",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the capture lacks %q: the grep did not see real output", want)
		}
	}
}

// startSlaveLogged runs an in-process slave logging to log.
func startSlaveLogged(t *testing.T, cfg *config.Config, id string, log *slog.Logger) {
	t.Helper()
	s, err := slaved.New(cfg, slaved.Options{ID: id, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &slaveHandle{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(h.done); s.Run(ctx) }()
	t.Cleanup(h.stop)
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
