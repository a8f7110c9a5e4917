package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMasterDeps checks what bin/master links: no package of the slave
// (its slaves are processes of bin/slave), no chromedp (rendering is the
// slave's) and nothing of the test, demo and bench harness.
func TestMasterDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/redcrawl/redcrawl/"
	forbidden := []struct{ prefix, why string }{
		{mod + "slave/", "a slave package"},
		{mod + "slave", "the slave's main"},
		{"github.com/chromedp/", "chromedp"},
		{mod + "internal/harness/", "a harness package"},
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if pkg == f.prefix || (strings.HasSuffix(f.prefix, "/") && strings.HasPrefix(pkg, f.prefix)) {
				t.Errorf("bin/master links %s: %s", f.why, pkg)
			}
		}
	}
}
