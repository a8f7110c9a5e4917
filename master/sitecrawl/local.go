package sitecrawl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/config"
)

// LocalOptions say what a local crawl runs: its seeds, its master and its
// slaves.
type LocalOptions struct {
	// Config is the crawl's config, the master's; validated.
	Config *config.Config
	// Seeds are enqueued (masterd.Seed) before anything starts. Seeded,
	// when set, is given the result before the master and the slaves
	// start (what a caller prints or measures of the seeding); its error
	// ends the run before they start.
	Seeds  []string
	Seeded func(masterd.SeedResult) error
	// Master is the options of the master, which runs in this process;
	// ExitWhenDone is always set.
	Master masterd.Options
	// MasterBinary, when set, runs the master as a process of that binary
	// instead (`run --config FILE --exit-when-done`), so that its CPU is
	// its own; Master is then unused and its log goes to
	// Dir/<crawl>-master.log.
	MasterBinary string
	// SlaveIDs are the slaves' ids, one slave each.
	SlaveIDs []string
	// SlaveConfig is the config the slaves load; nil = Config.
	SlaveConfig *config.Config
	// Slaves say how the slave processes run (Binary, LogDir or Output,
	// StopTimeout, EnvFor, ExitWhenDone); Config and Died are set here: a
	// slave that dies stops the master, and Wait returns why.
	Slaves slaveproc.Options
	// StartSlaves, when set, starts the slaves instead of processes of
	// Slaves.Binary (in this process: the tests); they stop when stop is
	// called, and call died if one ends before that.
	StartSlaves func(ids []string, died func(error)) (stop func(), err error)
	// SlavesAfterAPI starts the slaves once the master's work API listens
	// (masterd.Options.APIReady) instead of with the master, so that a
	// slave of the work API does not wait out a retry.
	SlavesAfterAPI bool
	// Dir receives the config files written for the slaves and the master
	// process; "" = a temporary directory that Stop removes.
	Dir string
}

// Local is a crawl running on this machine, started by StartLocal: a
// master that exits once the crawl is finished and its slaves.
type Local struct {
	opt        LocalOptions
	parent     context.Context
	mctx       context.Context
	stopMaster context.CancelCauseFunc
	tmp        string // Dir when StartLocal made it

	done    chan struct{} // closed when the master has exited
	doneErr error         // the master's error, set before done closes
	master  *exec.Cmd     // MasterBinary's process

	mu         sync.Mutex
	slavesUp   chan struct{} // closed once the slaves started, or never will
	procs      *slaveproc.Set
	stopSlaves func()
	stopOnce   sync.Once
}

// StartLocal runs one crawl on this machine, in order: it seeds the
// crawl, writes the config file the slaves load, starts the master with
// exit-when-done, and starts the slaves. master crawl, the demo and the
// bench all crawl through it. The caller waits for the master's exit
// (Done, Wait) and calls Stop.
func StartLocal(ctx context.Context, opt LocalOptions) (*Local, error) {
	if len(opt.SlaveIDs) == 0 {
		return nil, errors.New("local crawl: no slaves")
	}
	if opt.StartSlaves == nil && opt.Slaves.Binary == "" {
		return nil, errors.New("local crawl: no slave binary")
	}
	res, err := masterd.Seed(ctx, opt.Config, opt.Seeds)
	if err != nil {
		return nil, err
	}
	if opt.Seeded != nil {
		if err := opt.Seeded(res); err != nil {
			return nil, err
		}
	}
	l := &Local{opt: opt, parent: ctx, done: make(chan struct{}), slavesUp: make(chan struct{})}
	if opt.Dir == "" {
		if l.tmp, err = os.MkdirTemp("", "redcrawl-local-"); err != nil {
			return nil, fmt.Errorf("local crawl: %w", err)
		}
		l.opt.Dir = l.tmp
	}
	if opt.StartSlaves == nil {
		slaveCfg := opt.SlaveConfig
		if slaveCfg == nil {
			slaveCfg = opt.Config
		}
		if l.opt.Slaves.Config, err = slaveproc.WriteConfig(l.opt.Dir, slaveCfg); err != nil {
			l.removeDir()
			return nil, err
		}
	}
	l.mctx, l.stopMaster = context.WithCancelCause(ctx)
	if err := l.startMaster(); err != nil {
		l.stopMaster(err)
		l.removeDir()
		return nil, err
	}
	if !opt.SlavesAfterAPI {
		if err := l.startSlaves(); err != nil {
			l.stopMaster(err)
			<-l.done
			l.removeDir()
			return nil, err
		}
	}
	return l, nil
}

// startMaster starts the master, in this process or as a process of
// MasterBinary; done closes when it exits.
func (l *Local) startMaster() error {
	if l.opt.MasterBinary != "" {
		cmd, err := startMasterProcess(l.mctx, l.opt.MasterBinary, l.opt.Dir, l.opt.Config)
		if err != nil {
			return err
		}
		l.master = cmd
		go func() {
			l.doneErr = waitMasterProcess(cmd, filepath.Join(l.opt.Dir, l.opt.Config.Crawl.Name+"-master.log"))
			l.slavesNever()
			close(l.done)
		}()
		return nil
	}
	mopt := l.opt.Master
	mopt.ExitWhenDone = true
	if l.opt.SlavesAfterAPI {
		ready := mopt.APIReady
		mopt.APIReady = func(addr string) {
			if ready != nil {
				ready(addr)
			}
			if err := l.startSlaves(); err != nil {
				l.stopMaster(err)
			}
		}
	}
	go func() {
		l.doneErr = masterd.New(l.opt.Config, mopt).Run(l.mctx)
		l.slavesNever()
		close(l.done)
	}()
	return nil
}

// startSlaves starts the slaves; a slave that dies stops the master.
func (l *Local) startSlaves() error {
	defer l.slavesNever()
	died := func(err error) { l.stopMaster(err) }
	if l.opt.StartSlaves != nil {
		stop, err := l.opt.StartSlaves(l.opt.SlaveIDs, died)
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.stopSlaves = stop
		l.mu.Unlock()
		return nil
	}
	sopt := l.opt.Slaves
	sopt.Died = died
	procs, err := slaveproc.Start(sopt, l.opt.SlaveIDs...)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.procs, l.stopSlaves = procs, procs.Stop
	l.mu.Unlock()
	return nil
}

// slavesNever closes slavesUp unless it is closed: the slaves started, or
// never will.
func (l *Local) slavesNever() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.slavesUp:
	default:
		close(l.slavesUp)
	}
}

// Done is closed when the master has exited: the crawl is finished, or
// the run was stopped (a slave died, ctx ended).
func (l *Local) Done() <-chan struct{} { return l.done }

// errStopped is the cause with which Stop ends the master.
var errStopped = errors.New("local crawl stopped")

// Wait waits for the master's exit and says why the run ended early: a
// slave that died (unless ctx ended or Stop was called first), or the
// master's error; nil when the master exited as it should.
func (l *Local) Wait() error {
	<-l.done
	if cause := context.Cause(l.mctx); cause != nil && cause != errStopped && l.parent.Err() == nil {
		return cause
	}
	return l.doneErr
}

// SlavesStarted reports whether the slaves have started (with
// SlavesAfterAPI they start once the master's work API listens).
func (l *Local) SlavesStarted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopSlaves != nil
}

// SlavePids returns the slave processes' ids: none before they start, or
// when StartSlaves runs them.
func (l *Local) SlavePids() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.procs == nil {
		return nil
	}
	return l.procs.Pids()
}

// WaitSlaves waits, at most limit, for the slave processes to leave by
// themselves (Slaves.ExitWhenDone, after the crawl is finished); it
// reports whether they all did.
func (l *Local) WaitSlaves(limit time.Duration) bool {
	l.mu.Lock()
	procs := l.procs
	l.mu.Unlock()
	return procs == nil || procs.Wait(limit)
}

// StopSlaves stops the slaves (SIGTERM, their graceful leave) once they
// started or the master exited; it may be called again.
func (l *Local) StopSlaves() {
	select {
	case <-l.slavesUp:
	case <-l.done:
	}
	l.mu.Lock()
	stop := l.stopSlaves
	l.mu.Unlock()
	if stop != nil {
		l.stopOnce.Do(stop)
	}
}

// Kill kills the slave processes at once (Slaves.Binary's; slaves of
// StartSlaves are stopped) and ends the master without waiting for it.
func (l *Local) Kill() {
	l.mu.Lock()
	procs, stop := l.procs, l.stopSlaves
	l.mu.Unlock()
	if procs != nil {
		procs.Kill()
	} else if stop != nil {
		go l.stopOnce.Do(stop)
	}
	l.stopMaster(errStopped)
	if l.master != nil && l.master.Process != nil {
		l.master.Process.Kill()
	}
}

// Stop ends the run: the slaves, then the master (which a finished crawl
// has already ended), and removes the temporary directory. Slaves that
// wait for the work API are kept from starting: the master stops first.
func (l *Local) Stop() {
	select {
	case <-l.slavesUp:
	default:
		l.stopMaster(errStopped)
	}
	l.StopSlaves()
	l.stopMaster(errStopped)
	<-l.done
	l.removeDir()
}

// MasterProcess is the master's process (MasterBinary), nil when the
// master runs in this process; its ProcessState is set once Done closes.
func (l *Local) MasterProcess() *exec.Cmd { return l.master }

func (l *Local) removeDir() {
	if l.tmp != "" {
		os.RemoveAll(l.tmp)
	}
}

// startMasterProcess starts `bin run --config FILE --exit-when-done` on
// cfg, its output in dir/<crawl>-master.log; ctx ending sends it SIGTERM.
func startMasterProcess(ctx context.Context, bin, dir string, cfg *config.Config) (*exec.Cmd, error) {
	path, err := slaveproc.WriteConfig(dir, cfg)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, cfg.Crawl.Name+"-master.log"))
	if err != nil {
		return nil, fmt.Errorf("master log: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.CommandContext(ctx, bin, "run", "--config", path, "--exit-when-done")
	cmd.Env = slaveproc.Env()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = cfg.Slave.ShutdownTimeout + 5*time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start master: %w", err)
	}
	return cmd, nil
}

// waitMasterProcess waits for the master process's exit; an error carries
// its log's end.
func waitMasterProcess(cmd *exec.Cmd, logPath string) error {
	if err := cmd.Wait(); err != nil {
		b, _ := os.ReadFile(logPath)
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		return fmt.Errorf("master exited: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return nil
}
