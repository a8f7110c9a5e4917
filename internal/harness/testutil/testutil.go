// Package testutil holds helpers shared by redcrawl's tests.
package testutil

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RepoRoot returns the directory holding go.mod, searching upward from the
// working directory (a test's package directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ConformanceFile returns the path of a file of the public conformance
// suites kept beside the project (../shared/conformance/SUB), or skips the
// test with a message when it is absent. REDCRAWL_CONFORMANCE overrides the
// folder.
func ConformanceFile(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("REDCRAWL_CONFORMANCE")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "..", "shared", "conformance")
	}
	p := filepath.Join(dir, sub)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("conformance data %s not found (set REDCRAWL_CONFORMANCE or place ../shared/conformance beside the repo): %v", p, err)
	}
	return p
}

// SelfCPU is this process's user + system CPU time so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcStatus returns a "kB" field of /proc/<pid>/status (VmHWM, VmRSS)
// in bytes, or 0 when the process is gone or has no such field.
func ProcStatus(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return n << 10
		}
	}
	return 0
}
