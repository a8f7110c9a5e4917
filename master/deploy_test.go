package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/doccheck"
	"github.com/redcrawl/redcrawl/internal/harness/testcert"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/store/storetest"
	"github.com/redcrawl/redcrawl/shared/cli"
)

// deployDoc is the doc whose steps TestDeployAPISlave runs.
const deployDoc = "docs/deploy.md"

// TestDeployAPISlave runs docs/deploy.md's steps that fit on one machine,
// as written but for the server's address and paths (10.0.0.5, /etc/redcrawl,
// /root and the Pi's home made the test's): step 6's rcm, with the
// master's Redis and MySQL passwords in files (a Redis of the test's that
// requires one, a MySQL user of the test's), step 9's token commands
// (issue to a file, issue with limits, list, revoke), and step 10's
// Raspberry Pi: its token, its config.yaml as the doc writes it and its
// slave command, against a master serving the work API over TLS. The Pi
// crawls the test site through the API alone, and the crawl finishes whole.
func TestDeployAPISlave(t *testing.T) {
	t.Setenv(cli.EnvConfig, "")
	tmp := t.TempDir()
	etc, root, home := filepath.Join(tmp, "etc"), filepath.Join(tmp, "root"), filepath.Join(tmp, "pi")
	for _, d := range []string{etc, root, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	apiPort := testutil.FreePort(t)
	paths := strings.NewReplacer("/etc/redcrawl/", etc+"/", "/root/", root+"/", "/home/pi/redcrawl/", home+"/",
		"https://10.0.0.5:8443", "https://127.0.0.1:"+strconv.Itoa(apiPort))

	// rcm, as step 6 defines it, and what it runs
	var rcm []doccheck.Command
	var piSlave *doccheck.Command
	for _, c := range doccheck.Commands(t, "master", "redcrawl-master", "slave", "redcrawl-slave") {
		if c.File != deployDoc {
			continue
		}
		if strings.HasPrefix(c.Text, "rcm ") {
			rcm = append(rcm, c)
		}
		if filepath.Base(c.Args[0]) == "redcrawl-slave" && strings.Contains(c.Text, "--id pi4") {
			piSlave = &c
		}
	}
	find := func(prefix string) doccheck.Command {
		t.Helper()
		for _, c := range rcm {
			if strings.HasPrefix(c.Text, prefix) {
				return c
			}
		}
		t.Fatalf("%s has no command %q...", deployDoc, prefix)
		return doccheck.Command{}
	}
	if piSlave == nil {
		t.Fatalf("%s has no redcrawl-slave command of pi4 (step 10)", deployDoc)
	}
	rcmEnv := find("rcm seed ").Env
	for _, k := range []string{"CRAWLER_CONFIG", "CRAWLER_REDIS_PASSWORD_FILE", "CRAWLER_MYSQL_PASSWORD_FILE"} {
		if rcmEnv[k] == "" {
			t.Fatalf("%s's rcm does not set %s", deployDoc, k)
		}
	}

	// the secrets rcm reads, and the services that want them
	redisPW, mysqlPW := randomHex(), randomHex()
	for file, secret := range map[string]string{rcmEnv["CRAWLER_REDIS_PASSWORD_FILE"]: redisPW, rcmEnv["CRAWLER_MYSQL_PASSWORD_FILE"]: mysqlPW} {
		file = paths.Replace(file)
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rdb := testutil.StartRedis(t, func(ctx context.Context, addr string) error {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: redisPW, MaxRetries: -1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}, "--requirepass", redisPW)
	dsn := mysqlUser(t, mysqlPW)
	certs := testcert.Write(t, t.TempDir(), "127.0.0.1")
	crawl := testutil.CrawlName("deploy")
	site, err := testsite.Start(testsite.Options{Hosts: 1, PagesPerHost: 12, LinksPerPage: 3, Robots: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	// /etc/redcrawl/config.yaml: step 2's, on this machine's services
	conf := fmt.Sprintf(`redis:
  url: redis://%s/0
mysql:
  dsn: %s
crawl:
  name: %s
rules:
  dir: ""
admin:
  listen: ""
api:
  listen: 127.0.0.1:%d
  tls_cert: %s
  tls_key: %s
politeness:
  delay: 20ms
master:
  quiescence: 500ms
slave:
  heartbeat_interval: 300ms
`, rdb.Addr, dsn, crawl, apiPort, certs.ServerCert, certs.ServerKey)
	cfgFile := paths.Replace(rcmEnv["CRAWLER_CONFIG"])
	if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range rcmEnv {
		t.Setenv(k, paths.Replace(v))
	}
	rcmRun := func(c doccheck.Command, args ...string) (int, string, string) {
		t.Helper()
		if args == nil {
			for _, a := range c.Args[1:] {
				args = append(args, paths.Replace(a))
			}
		}
		var out, errOut bytes.Buffer
		code := run(args, nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	// step 9: tokens
	issue := find("rcm token issue --slave friend1 --out ")
	if code, _, errOut := rcmRun(issue); code != 0 {
		t.Fatalf("%s\nexit %d: %s", issue, code, errOut)
	}
	tokFile := paths.Replace(issue.Args[len(issue.Args)-1])
	if fi, err := os.Stat(tokFile); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() < 20 {
		t.Errorf("%s: the token file: %v %v, want a token, mode 0600", issue, fi, err)
	}
	limits := find("rcm token issue --slave big1 ")
	if code, out, errOut := rcmRun(limits); code != 0 || len(strings.TrimSpace(out)) < 20 {
		t.Errorf("%s\nexit %d, stdout %q: %s", limits, code, out, errOut)
	}
	revoke := find("rcm token revoke --slave friend1")
	if code, out, errOut := rcmRun(revoke); code != 0 || !strings.Contains(out, "1 token(s) of slave friend1 revoked") {
		t.Errorf("%s\nexit %d, stdout %q: %s", revoke, code, out, errOut)
	}
	list := find("rcm token list")
	code, out, errOut := rcmRun(list)
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(l); len(f) >= 6 {
			rows[f[1]] = strings.Join(f[3:], " ")
		}
	}
	if code != 0 || !regexp.MustCompile(`^\d{4}-`).MatchString(rows["friend1"]) || rows["big1"] != "- 512 2000" {
		t.Errorf("%s\nexit %d, want friend1 revoked and big1 with its limits:\n%s%s", list, code, out, errOut)
	}

	// step 10: the Pi's token, config file and slave, against the master's work API
	piIssue := find("rcm token issue --slave pi4 --out ")
	if code, _, errOut := rcmRun(piIssue); code != 0 {
		t.Fatalf("%s\nexit %d: %s", piIssue, code, errOut)
	}
	piToken := paths.Replace(piIssue.Args[len(piIssue.Args)-1])
	if err := os.Rename(piToken, filepath.Join(home, filepath.Base(piToken))); err != nil { // mv ~/pi4.token ~/ca.crt .
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "ca.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	piConf := piConfig(t)
	if !strings.Contains(piConf, "name: news\n") {
		t.Errorf("%s: the Pi's config.yaml does not name the crawl news, the crawl of its token", deployDoc)
	}
	piConf = strings.Replace(piConf, "name: news\n", "name: "+crawl+"\n", 1)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(paths.Replace(piConf)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"redis:", "mysql:", "password"} {
		if strings.Contains(piConf, k) {
			t.Errorf("%s: the Pi's config.yaml holds %q: it needs no Redis or MySQL credential", deployDoc, k)
		}
	}

	masterDone := make(chan [3]any, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run([]string{"run", "--exit-when-done"}, nil, &out, &errOut)
		masterDone <- [3]any{code, out.String(), errOut.String()}
	}()
	waitListening(t, "127.0.0.1:"+strconv.Itoa(apiPort))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	slaveArgs := append(piSlave.Args[1:], "--exit-when-done")
	slave := exec.CommandContext(ctx, buildSlave(t), slaveArgs...)
	slave.Dir = home
	// the test site is on loopback; nothing else of the slave's environment
	slave.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CRAWLER_FETCH_ALLOW_PRIVATE_NETWORKS=true"}
	var slaveLog bytes.Buffer
	slave.Stdout, slave.Stderr = &slaveLog, &slaveLog
	if err := slave.Start(); err != nil {
		t.Fatal(err)
	}
	seed := find("rcm seed ")
	if code, _, errOut := rcmRun(seed, "seed", site.Seeds()[0]); code != 0 {
		t.Fatalf("%s (with the test site's URL)\nexit %d: %s", seed, code, errOut)
	}
	if err := slave.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", piSlave, err, slaveLog.String())
	}
	if !strings.Contains(slaveLog.String(), "working through the master's work API") {
		t.Errorf("the Pi's slave does not say it works through the work API:\n%s", slaveLog.String())
	}
	select {
	case r := <-masterDone:
		if r[0] != 0 {
			t.Fatalf("master run --exit-when-done: exit %v\n%s\n%s", r[0], r[1], r[2])
		}
	case <-ctx.Done():
		t.Fatal("master run --exit-when-done did not end after the Pi's slave left")
	}
	code, out, errOut = rcmRun(find("rcm status"), "status", "--json")
	var st struct {
		Done, Failed, Queued int64
		Finished             bool
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || !st.Finished || st.Failed != 0 || st.Queued != 0 {
		t.Errorf("rcm status --json after the crawl: exit %d, %+v (%v), want finished, none failed or queued\n%s", code, st, err, errOut)
	}
	// every page of the site is in MySQL, fetched by pi4
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mc.Passwd = mysqlPW
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string]string{}
	rs, err := db.Query("SELECT url, slave_id FROM pages WHERE crawl = ?", crawl)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var u, s string
		if err := rs.Scan(&u, &s); err != nil {
			t.Fatal(err)
		}
		got[u] = s
	}
	rs.Close()
	for u := range site.Expected() {
		if got[u] != "pi4" {
			t.Errorf("page %s: fetched by %q, want pi4 (MySQL has %d pages)", u, got[u], len(got))
		}
	}
}

// piConfig is the Pi's config.yaml of docs/deploy.md step 10: its yaml
// block.
func piConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), deployDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, step, ok := strings.Cut(string(b), "**10. A Raspberry Pi by hand**")
	if ok {
		_, step, ok = strings.Cut(step, "```yaml\n")
	}
	if ok {
		step, _, ok = strings.Cut(step, "```")
	}
	if !ok {
		t.Fatalf("%s has no step 10 with a yaml block", deployDoc)
	}
	return step
}

// mysqlUser makes a MySQL user with password pw on a database of the
// test's and returns its DSN (without the password: rcm gives it from
// its file); the user is dropped when the test ends.
func mysqlUser(t *testing.T, pw string) string {
	t.Helper()
	rootDSN := storetest.DSN(t)
	cfg, err := mysql.ParseDSN(rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	user := "rc_t_" + randomHex()[:12]
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pw),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", cfg.DBName, user),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", rootDSN); err == nil {
			db.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user))
			db.Close()
		}
	})
	cfg.User, cfg.Passwd = user, ""
	return cfg.FormatDSN()
}

func randomHex() string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return hex.EncodeToString(b)
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on %s", addr)
}
