package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server process a test started on a free
// loopback port.
type RedisServer struct {
	Addr string // 127.0.0.1:port
	Dir  string // its working directory (logs, files the test wrote)
}

// StartRedis starts redis-server on a free port of 127.0.0.1 with no
// persistence and the extra arguments given (an aclfile, TLS ports, ...).
// ready checks the server answers (nil: a PING without credentials, which
// only works when the default user may log in). The process is killed when
// the test ends. It skips the test when redis-server is not installed.
func StartRedis(t testing.TB, ready func(ctx context.Context, addr string) error, args ...string) *RedisServer {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	if ready == nil {
		ready = func(ctx context.Context, addr string) error {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err()
		}
	}
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := FreePort(t)
		argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}, args...)
		cmd := exec.Command(server, argv...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
			}
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	wait:
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			select {
			case <-exited:
				lastErr = fmt.Errorf("redis-server exited: %s", tail(filepath.Join(dir, "redis.log")))
				break wait
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := ready(ctx, addr)
			cancel()
			if err == nil {
				t.Cleanup(stop)
				return &RedisServer{Addr: addr, Dir: dir}
			}
			lastErr = err
		}
		stop()
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

// FreePort returns a port of 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
