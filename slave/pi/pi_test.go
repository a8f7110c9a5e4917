// Package pi_test checks that the slave runs on a Raspberry Pi: the
// linux/arm64 build (CGO_ENABLED=0, as `make release` builds it) runs under
// qemu-user-static, joins a crawl of the test site on loopback through the
// real Redis, fetches every page exactly once, heartbeats with its RSS and
// leaves cleanly on SIGTERM. The linux/arm (GOARM=7) build is checked to
// start under qemu-arm-static.
//
// The emulator is found on PATH (qemu-aarch64-static, then qemu-aarch64;
// qemu-arm-static, then qemu-arm); REDCRAWL_QEMU and REDCRAWL_QEMU_ARM name
// it explicitly. Without it the tests skip (.ci/services qemu installs Debian's
// qemu-user-static).
package pi_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

const slavePkg = "github.com/redcrawl/redcrawl/slave"

// findQemu returns the emulator named by the environment variable env, or
// the first of names found on PATH, or skips the test.
func findQemu(t *testing.T, env string, names ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Skipf("%s=%q: emulator not found (%v); install qemu-user-static (make test-services does) to run the Raspberry Pi test", env, p, err)
		}
		return path
	}
	for _, n := range names {
		if path, err := exec.LookPath(n); err == nil {
			return path
		}
	}
	t.Skipf("none of %s on PATH and %s unset: install qemu-user-static (apt-get install qemu-user-static; make test-services does) to run the Raspberry Pi test", strings.Join(names, ", "), env)
	return ""
}

// buildSlave cross-compiles the slave for linux/goarch (goarm for arm)
// into a temporary directory, with the flags `make release` uses.
func buildSlave(t *testing.T, goarch, goarm string) string {
	t.Helper()
	name := "slave-linux-" + goarch
	if goarm != "" {
		name = "slave-linux-armv" + goarm
	}
	out := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, slavePkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM="+goarm)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build GOARCH=%s GOARM=%s: %v\n%s", goarch, goarm, err, b)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s (%d bytes) in %v", filepath.Base(out), fi.Size(), time.Since(start).Round(time.Millisecond))
	return out
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append([]byte(nil), w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// vmHWM returns a process's peak resident set size from /proc, or 0.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// TestArm64SlaveCrawls runs the arm64 slave under qemu against the test
// site and checks the crawl, the heartbeat and the graceful leave.
func TestArm64SlaveCrawls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and emulates the arm64 slave; skipped in -short mode")
	}
	t.Parallel()
	qemu := findQemu(t, "REDCRAWL_QEMU", "qemu-aarch64-static", "qemu-aarch64")
	start := time.Now()
	bin := buildSlave(t, "arm64", "")

	site, err := testsite.Start(testsite.Options{Hosts: 2, PagesPerHost: 40, Robots: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()

	// The slave's config file; the test loads it first so that it is
	// known to be valid.
	redisURL := "redis://127.0.0.1:6379/0"
	if u := os.Getenv("REDCRAWL_TEST_REDIS"); u != "" {
		redisURL = u
	}
	crawl := testutil.CrawlName("pi")
	var hosts []string
	for _, raw := range site.HostURLs() {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, u.Hostname())
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf(`crawl:
  name: %q
  allow_hosts: [%s]
redis:
  url: %q
fetch:
  allow_private_networks: true
politeness:
  delay: 5ms
slave:
  profile: small
  heartbeat_interval: 200ms
  idle_poll: 20ms
render:
  enabled: false
`, crawl, `"`+strings.Join(hosts, `", "`)+`"`, redisURL)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatalf("the slave's config does not load: %v\n%s", err, yaml)
	}

	ropt, err := cfg.RedisOptions()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v (make services starts it)", redisURL, err)
	}
	t.Cleanup(func() { testutil.DeleteCrawl(context.Background(), rdb, crawl) })
	f, err := frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	seedURL, err := url.Parse(site.Seeds()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed(ctx, []frontier.Task{{URL: seedURL.String(), Host: seedURL.Host, ScopeHost: seedURL.Hostname()}}); err != nil {
		t.Fatal(err)
	}

	// Run the emulated slave.
	stderr := &tailBuffer{max: 64 << 10}
	cmd := exec.Command(qemu, bin, "run", "--config", cfgPath, "--id", "pi-1")
	cmd.Dir = dir
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", qemu, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	running := true
	defer func() {
		if running {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("slave output (tail):\n%s", stderr.String())
		}
	}()

	// Poll until every expected page is done and the slave's heartbeat
	// has been seen, or the slave exits, or 3 minutes pass.
	want := site.Expected()
	var (
		stats     frontier.Stats
		hb        *frontier.SlaveInfo
		crawledIn time.Duration
		peak      int64
	)
	crawlStart := time.Now()
poll:
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		select {
		case exitErr = <-exited:
			running = false
			t.Fatalf("the slave exited before the crawl was done: %v", exitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if s, err := f.Stats(ctx); err == nil {
			stats = s
		}
		if ss, err := f.Slaves(ctx); err == nil {
			for i := range ss {
				if ss[i].Slave == "pi-1" {
					hb = &ss[i]
				}
			}
		}
		if h := vmHWM(cmd.Process.Pid); h > peak {
			peak = h
		}
		done := stats.Done >= int64(len(want)) && stats.Queued == 0 && stats.InFlight == 0 && stats.Retry == 0
		if done && crawledIn == 0 {
			crawledIn = time.Since(crawlStart)
		}
		if done && hb != nil && hb.Pages > 0 {
			break poll
		}
	}
	if crawledIn == 0 {
		t.Fatalf("the crawl did not finish within 3 minutes: %+v (want %d pages done)", stats, len(want))
	}
	if hb == nil {
		t.Fatal("no heartbeat from slave pi-1 while it ran")
	}
	t.Logf("arm64 slave under %s emptied the frontier in %v: %d expected pages, %d tasks done (robots.txt and disallowed links included), %d failed",
		filepath.Base(qemu), crawledIn.Round(time.Millisecond), len(want), stats.Done, stats.Failed)
	t.Logf("heartbeat: slave %s pid %d state %s pages %d concurrency %d rss %s (the emulator's, as /proc/self/statm shows it); emulator peak RSS (VmHWM) %s",
		hb.Slave, hb.PID, hb.State, hb.Pages, hb.Concurrency, mib(hb.RSS), mib(peak))
	if hb.RSS <= 0 {
		t.Errorf("heartbeat without an RSS: %+v", hb.Heartbeat)
	}
	if hb.Crawl != crawl {
		t.Errorf("heartbeat of crawl %q, want %q", hb.Crawl, crawl)
	}

	// Graceful leave: SIGTERM, exit 0 within a bounded time.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case exitErr = <-exited:
		running = false
	case <-time.After(60 * time.Second):
		t.Fatal("the slave did not exit within 60s of SIGTERM")
	}
	if exitErr != nil {
		var ee *exec.ExitError
		if errors.As(exitErr, &ee) {
			t.Errorf("the slave exited with %v after SIGTERM, want status 0", ee.ProcessState)
		} else {
			t.Errorf("wait: %v", exitErr)
		}
	}
	if ss, err := f.Slaves(ctx); err != nil {
		t.Error(err)
	} else if len(ss) != 0 {
		t.Errorf("slaves still registered after the leave: %+v", ss)
	}
	if s, err := f.Stats(ctx); err != nil {
		t.Error(err)
	} else if s.InFlight != 0 {
		t.Errorf("%d leases left after the leave", s.InFlight)
	}

	// Every expected URL fetched exactly as expected, nothing else but
	// robots.txt, never a /private/ page.
	got := site.HitCounts()
	var robots int
	for u, n := range want {
		if got[u] != n {
			t.Errorf("%s fetched %d times, want %d", u, got[u], n)
		}
	}
	for u, n := range got {
		if _, ok := want[u]; ok {
			continue
		}
		switch {
		case strings.HasSuffix(u, "/robots.txt"):
			robots += n
		default:
			t.Errorf("unexpected request: %s (%d times)", u, n)
		}
	}
	if robots == 0 {
		t.Error("robots.txt was never fetched")
	}
	t.Logf("%d expected URLs fetched exactly as expected, robots.txt %d times; test took %v",
		len(want), robots, time.Since(start).Round(time.Millisecond))
}

// TestArmv7SlaveStarts builds the slave for a 32-bit Raspberry Pi
// (GOARCH=arm GOARM=7) and checks that it starts under qemu-arm-static.
func TestArmv7SlaveStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and emulates the armv7 slave; skipped in -short mode")
	}
	t.Parallel()
	qemu := findQemu(t, "REDCRAWL_QEMU_ARM", "qemu-arm-static", "qemu-arm")
	bin := buildSlave(t, "arm", "7")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, qemu, bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s --help: %v\n%s", filepath.Base(qemu), filepath.Base(bin), err, out)
	}
	if !strings.Contains(string(out), "usage: slave run") {
		t.Errorf("--help printed %q, want the usage", out)
	}
	t.Logf("armv7 slave under %s: --help exits 0", filepath.Base(qemu))
}
