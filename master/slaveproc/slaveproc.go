// Package slaveproc runs slaves as processes of the slave binary, for the
// programs that crawl with their own slaves (master crawl, the demo, the
// bench): so the master binary never links the slave. It writes the
// master's config to a file the slaves load, starts one process per slave
// id, and stops them with SIGTERM, a slave's graceful leave.
package slaveproc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
)

// Binary returns the slave binary beside the running program: its own
// name with "master" replaced by "slave" (bin/master → bin/slave, the
// release's redcrawl-master → redcrawl-slave, master-linux-arm64 →
// slave-linux-arm64), or "slave" in its directory for a program not named
// like a master (bin/demo, bin/bench). The error says how to get one.
func Binary() (string, error) {
	return Beside("master", "slave")
}

// Beside returns the program named like the running one with from
// replaced by to, or named to when its name has no from, in its
// directory; the error names --<to>-binary.
func Beside(from, to string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("slaveproc: find the %s binary: %w", to, err)
	}
	dir, name := filepath.Split(exe)
	p := filepath.Join(dir, to)
	if strings.Contains(name, from) {
		p = filepath.Join(dir, strings.Replace(name, from, to, 1))
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("slaveproc: no %s binary beside %s (make build, or --%s-binary): %w", to, exe, to, err)
	}
	return p, nil
}

// Find is the binary a --<name>-binary flag names (flagValue), by
// default the one beside this program (Beside("master", name)).
func Find(flagValue, name string) (string, error) {
	if flagValue == "" {
		return Beside("master", name)
	}
	if _, err := os.Stat(flagValue); err != nil {
		return "", fmt.Errorf("--%s-binary: %w", name, err)
	}
	return flagValue, nil
}

// Env is this process's environment without CRAWLER_ variables, which
// would override the slaves' config file.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, config.EnvPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// Options say how to start slave processes.
type Options struct {
	Binary string // the slave binary
	Config string // the config file they load (WriteConfig)
	// LogDir receives each slave's output as ID.log, whose end an early
	// exit's error quotes; "" = Output.
	LogDir string
	Output io.Writer // each slave's output when LogDir is ""; nil = discarded
	// StopTimeout bounds a slave's graceful leave after SIGTERM, after
	// which it is killed; default 20 s.
	StopTimeout time.Duration
	// Died is called when a slave exits before Stop, with why.
	Died func(error)
	// EnvFor, when set, gives a slave's own environment variables (added
	// to Env), such as its work API token file.
	EnvFor func(id string) []string
	// ExitWhenDone runs the slaves with --exit-when-done: they leave by
	// themselves once the crawl is finished (Wait), and a slave that
	// exits 0 before Stop is not a death.
	ExitWhenDone bool
}

// Set is the slave processes Start started.
type Set struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cmds   []*exec.Cmd
}

// Start starts one slave process per id: `BINARY run --config CONFIG --id
// ID`, with Env. On an error the processes already started are stopped.
func Start(opt Options, ids ...string) (*Set, error) {
	if opt.StopTimeout <= 0 {
		opt.StopTimeout = 20 * time.Second
	}
	if _, ok := opt.Output.(*os.File); !ok && opt.Output != nil {
		// every slave's output is copied to it by a goroutine of its own
		opt.Output = &lockedWriter{w: opt.Output}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Set{ctx: ctx, cancel: cancel}
	for _, id := range ids {
		if err := s.start(opt, id); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *Set) start(opt Options, id string) error {
	args := []string{"run", "--config", opt.Config, "--id", id}
	if opt.ExitWhenDone {
		args = append(args, "--exit-when-done")
	}
	cmd := exec.CommandContext(s.ctx, opt.Binary, args...)
	cmd.Env = Env()
	if opt.EnvFor != nil {
		cmd.Env = append(cmd.Env, opt.EnvFor(id)...)
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = opt.StopTimeout
	var logPath string
	var logf *os.File
	if opt.LogDir != "" {
		logPath = filepath.Join(opt.LogDir, id+".log")
		var err error
		if logf, err = os.Create(logPath); err != nil {
			return fmt.Errorf("slaveproc: slave log: %w", err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
	} else if opt.Output != nil {
		cmd.Stdout, cmd.Stderr = opt.Output, opt.Output
	}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return fmt.Errorf("slaveproc: start slave %s: %w", id, err)
	}
	s.cmds = append(s.cmds, cmd)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		if s.ctx.Err() == nil && opt.Died != nil && (err != nil || !opt.ExitWhenDone) {
			why := fmt.Errorf("slave %s exited early (%v)", id, err)
			if logPath != "" {
				why = fmt.Errorf("%w: %s", why, tail(logPath))
			}
			opt.Died(why)
		}
	}()
	return nil
}

// Stop sends every slave SIGTERM and waits for them to leave (killing
// those that outlast Options.StopTimeout). It may be called again.
func (s *Set) Stop() {
	s.cancel()
	s.wg.Wait()
}

// Kill kills every slave at once (SIGKILL): their leases go back when a
// master finds them dead. Stop then only waits for them.
func (s *Set) Kill() {
	for _, c := range s.cmds {
		c.Process.Kill()
	}
}

// Wait waits for every slave to exit by itself (Options.ExitWhenDone),
// at most limit; it reports whether they all did. Stop ends the rest.
func (s *Set) Wait(limit time.Duration) bool {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// Pids returns the slaves' process ids.
func (s *Set) Pids() []int {
	out := make([]int, len(s.cmds))
	for i, c := range s.cmds {
		out[i] = c.Process.Pid
	}
	return out
}

// lockedWriter serializes the writes of several slaves' output copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tail returns the end of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
