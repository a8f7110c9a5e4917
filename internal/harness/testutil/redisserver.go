package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a server process a test started on a free loopback port.
type Server struct {
	Port int
	Addr string // 127.0.0.1:Port
	Dir  string // its own directory (data, logs, files the test wrote)
	Log  string // Dir/server.log: where Args should send its log

	mu    sync.Mutex
	stop  func() // kills the process and waits (up to 10s) for its exit
	proc  *os.Process
	again func() error // starts the process again with the same arguments (Restart)
}

// Kill kills the process with SIGKILL (no shutdown, no final save) and
// waits for it to exit; the port is then closed. Killing twice is harmless.
func (s *Server) Kill() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	stop()
}

// Pause stops the process with SIGSTOP: it keeps its connections but
// reads and answers nothing until Resume.
func (s *Server) Pause() error { return s.process().Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() error { return s.process().Signal(syscall.SIGCONT) }

// Pid is the process id of the server's current process.
func (s *Server) Pid() int { return s.process().Pid }

func (s *Server) process() *os.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Restart kills the process (if it still runs) and starts it again with
// the same arguments, port and directory, so a server that keeps data
// (an AOF, a cluster's nodes.conf) reads it back; it waits until the
// server is ready again. The new process is killed when the test ends.
func (s *Server) Restart() error {
	s.Kill()
	return s.again()
}

// ServerOptions say how to start a server process.
type ServerOptions struct {
	// Name is the program (looked up in PATH); the test is skipped when
	// it is not installed.
	Name string
	// Args returns the command line for a port and the server's Server
	// (Dir and Log set).
	Args func(s *Server) []string
	// Ready answers nil once the server serves.
	Ready func(ctx context.Context, s *Server) error
	// Wait bounds the wait for Ready at each attempt (default 10s).
	Wait time.Duration
}

// StartServer starts a server process on a free port of 127.0.0.1 and
// waits until it is ready. Another process may take the port between the
// pick and the bind, so it tries up to three ports; it fails the test with
// the log's tail after that. The process is killed when the test ends.
func StartServer(t testing.TB, opt ServerOptions) *Server {
	t.Helper()
	prog, err := exec.LookPath(opt.Name)
	if err != nil {
		t.Skipf("%s is not installed", opt.Name)
	}
	if opt.Wait <= 0 {
		opt.Wait = 10 * time.Second
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := FreePort(t)
		dir := t.TempDir()
		s := &Server{Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir,
			Log: filepath.Join(dir, "server.log")}
		args := opt.Args(s)
		s.again = func() error { return s.start(prog, args, opt) }
		if lastErr = s.again(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("%s did not start in 3 attempts: %v", opt.Name, lastErr)
	return nil
}

// start starts the server's process and waits until it is ready; on
// failure the process is killed.
func (s *Server) start(prog string, args []string, opt ServerOptions) error {
	cmd := exec.Command(prog, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", opt.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill() // SIGKILL; an error means it has exited already
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	}
	s.mu.Lock()
	s.stop, s.proc = stop, cmd.Process
	s.mu.Unlock()
	var lastErr error
	for deadline := time.Now().Add(opt.Wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			stop()
			return fmt.Errorf("%s exited: %s", opt.Name, tail(s.Log))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := opt.Ready(ctx, s)
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
	}
	stop()
	return fmt.Errorf("%s not ready in %v: %w", opt.Name, opt.Wait, lastErr)
}

// RedisServer is a private redis-server process a test started.
type RedisServer = Server

// StartRedis starts redis-server on a free port of 127.0.0.1 with no
// persistence and the extra arguments given (an aclfile, ...). ready
// checks the server answers (nil: a PING without credentials, which only
// works when the default user may log in).
func StartRedis(t testing.TB, ready func(ctx context.Context, addr string) error, args ...string) *Server {
	t.Helper()
	if ready == nil {
		ready = func(ctx context.Context, addr string) error {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err()
		}
	}
	return StartServer(t, ServerOptions{Name: "redis-server",
		Args: func(s *Server) []string {
			return append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", s.Dir,
				"--logfile", s.Log, "--daemonize", "no"}, args...)
		},
		Ready: func(ctx context.Context, s *Server) error { return ready(ctx, s.Addr) },
	})
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
