package soak

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// memoryCap is the most RSS a process of each role may reach in a soak:
// several times what a crawl of the soak's size needs (an hour's peaks
// are in docs/CONTRIBUTING.md), so that only a leak that grows with the
// run's length or its faults reaches it.
var memoryCap = map[string]int64{
	"master":       256 << 20,
	"slave":        192 << 20,
	"api_slave":    192 << 20,
	"redis":        256 << 20,
	"cluster_node": 256 << 20,
	// the test itself: the sites, their request logs, the clock slave
	"test": 1 << 30,
}

// memory samples the peak RSS (VmHWM) of the soak's processes by role,
// every second and when one is about to be killed.
type memory struct {
	mu      sync.Mutex
	watched map[string][]func() int // role → the pids of its processes (0: none now)
	peak    map[string]int64
	done    chan struct{}
	wg      sync.WaitGroup
}

func startMemory(t testing.TB) *memory {
	m := &memory{watched: map[string][]func() int{}, peak: map[string]int64{}, done: make(chan struct{})}
	m.watch("test", os.Getpid)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-tick.C:
			}
			m.sampleAll()
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// watch adds a process of role, by a function that gives its current pid.
func (m *memory) watch(role string, pid func() int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watched[role] = append(m.watched[role], pid)
}

func (m *memory) sampleAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for role, pids := range m.watched {
		for _, pid := range pids {
			m.note(role, pid())
		}
	}
}

// sample notes the peak of one process now (before a kill).
func (m *memory) sample(role string, pid int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.note(role, pid)
}

func (m *memory) note(role string, pid int) {
	if pid <= 0 {
		return
	}
	if v := testutil.ProcStatus(pid, "VmHWM"); v > m.peak[role] {
		m.peak[role] = v
	}
}

func (m *memory) stop() {
	select {
	case <-m.done:
	default:
		close(m.done)
	}
	m.wg.Wait()
}

func (m *memory) peaks() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.peak))
	for k, v := range m.peak {
		out[k] = v
	}
	return out
}

// check fails t when a role's peak passed its cap.
func (m *memory) check(t testing.TB) {
	t.Helper()
	for role, v := range m.peaks() {
		if c, ok := memoryCap[role]; ok && v > c {
			t.Errorf("memory: a %s process reached %d MiB RSS, more than its cap of %d MiB", role, v>>20, c>>20)
		}
	}
}
