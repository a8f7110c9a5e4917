// Package testutil holds helpers shared by redcrawl's tests.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
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
