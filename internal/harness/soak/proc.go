package soak

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one program of a crawl (the master, a slave) that faults kill,
// freeze and restart: every run of it appends to one log file, and every
// exit the soak did not cause is recorded.
type proc struct {
	name, role string
	path       string
	args       []string
	logPath    string
	mem        *memory

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current run exits
	killing bool          // the current run is being killed by the soak
	starts  int
	exits   []exit // runs that ended by themselves
}

// exit is how a run ended by itself.
type exit struct {
	at   time.Time
	code int    // -1: by a signal
	err  string // the wait's error
}

func newProc(name, role, path, logPath string, mem *memory, args ...string) *proc {
	p := &proc{name: name, role: role, path: path, args: args, logPath: logPath, mem: mem}
	mem.watch(role, p.pid)
	return p
}

// start starts a run; it is an error to start a proc that runs.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("%s: started while it runs", p.name)
		}
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.name, err)
	}
	fmt.Fprintf(logf, "=== soak: start %d of %s at %s\n", p.starts+1, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: start: %w", p.name, err)
	}
	p.cmd, p.exited, p.killing = cmd, make(chan struct{}), false
	p.starts++
	exited := p.exited
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		if !p.killing {
			e := exit{at: time.Now(), code: cmd.ProcessState.ExitCode()}
			if err != nil {
				e.err = err.Error()
			}
			p.exits = append(p.exits, e)
		}
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// endedByItself reports whether the last run has exited, and not by the
// soak's kill.
func (p *proc) endedByItself() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return !p.killing
	default:
		return false
	}
}

// runs is how many times the proc was started.
func (p *proc) runs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// pid is the running process's id, 0 when none runs.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// running reports whether a run is under way.
func (p *proc) running() bool { return p.pid() != 0 }

// kill kills the running process with SIGKILL (a frozen one too) and
// waits for it to exit; nothing when none runs.
func (p *proc) kill() {
	p.mu.Lock()
	if p.cmd == nil {
		p.mu.Unlock()
		return
	}
	select {
	case <-p.exited:
		p.mu.Unlock()
		return
	default:
	}
	p.killing = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	p.mem.sample(p.role, cmd.Process.Pid) // not under p.mu: the sampler takes it through pid
	cmd.Process.Kill()
	<-exited
}

// signal sends sig to the running process (SIGSTOP, SIGCONT).
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s: not started", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// wait waits up to d for the running process to exit by itself; true
// when none runs (any more).
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return true
	}
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

// ended returns the runs that ended by themselves.
func (p *proc) ended() []exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]exit(nil), p.exits...)
}

// crashed returns the lines of the log that say a Go program crashed.
func (p *proc) crashed() []string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") || strings.Contains(l, "DATA RACE") {
			out = append(out, l)
		}
	}
	return out
}

// tail returns the last n bytes of the log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
