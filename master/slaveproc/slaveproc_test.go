package slaveproc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
)

// TestConfigFileRoundTrip checks that the config file written for
// slave processes loads back to the same config.
func TestConfigFileRoundTrip(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix) && k != config.EnvConfigFile {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	cfg := config.Default()
	cfg.Crawl.Name = "bench-roundtrip"
	cfg.Crawl.AllowHosts = []string{"127.0.0.2", "127.0.0.3"}
	cfg.Politeness.Delay = 0
	cfg.Politeness.HostConcurrency = 4
	cfg.Fetch.AllowPrivateNetworks = true
	cfg.Fetch.MaxBodyBytes = 3 << 20
	cfg.Master.Quiescence = 1500 * time.Millisecond
	cfg.Fetch.ProxyPools = map[string][]string{"eu": {"http://127.0.0.1:3128"}}
	path, err := WriteConfig(t.TempDir(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(path)
	if err != nil {
		b, _ := os.ReadFile(path)
		t.Fatalf("load: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(*got, cfg) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", *got, cfg)
	}
}

// fakeSlave writes a shell script that stands for the slave binary.
func fakeSlave(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slave")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStartStop starts two slaves that run until SIGTERM and stops them:
// Stop returns once they left, without calling Died.
func TestStartStop(t *testing.T) {
	bin := fakeSlave(t, `trap 'exit 0' TERM; echo "$@"; while :; do sleep 0.05; done`)
	dir := t.TempDir()
	died := make(chan error, 2)
	s, err := Start(Options{Binary: bin, Config: "c.yaml", LogDir: dir, StopTimeout: 5 * time.Second,
		Died: func(err error) { died <- err }}, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Pids()); n != 2 {
		t.Fatalf("%d pids, want 2", n)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("Stop took %v: SIGTERM was not a leave", d)
	}
	select {
	case err := <-died:
		t.Errorf("Died after Stop: %v", err)
	default:
	}
	b, err := os.ReadFile(filepath.Join(dir, "a.log"))
	if err != nil || strings.TrimSpace(string(b)) != "run --config c.yaml --id a" {
		t.Errorf("a.log = %q, %v; want the slave's arguments", b, err)
	}
}

// TestDied checks that a slave that exits on its own is reported with the
// end of its log.
func TestDied(t *testing.T) {
	bin := fakeSlave(t, `echo "slave: bad config"; exit 2`)
	died := make(chan error, 1)
	s, err := Start(Options{Binary: bin, Config: "c.yaml", LogDir: t.TempDir(), Died: func(err error) { died <- err }}, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	select {
	case err := <-died:
		if !strings.Contains(err.Error(), "slave x exited early") || !strings.Contains(err.Error(), "slave: bad config") {
			t.Errorf("Died(%v): want the id and the log's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Died not called")
	}
}

// TestBinaryName checks that a test binary, with no slave beside it, gets
// an error that says what to give instead.
func TestBinaryName(t *testing.T) {
	if _, err := Binary(); err == nil || !strings.Contains(err.Error(), "--slave-binary") {
		t.Errorf("Binary() = %v; want an error naming --slave-binary", err)
	}
}
