package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsage checks what demo says before it crawls anything: its usage
// for --help, and exit 2 naming the problem for a bad flag, a bad config
// or a missing slave binary.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("politeness:\n  dealy: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, 0, "usage: demo [--config config.yaml]", ""},
		{"unknown flag", []string{"--rounds", "3"}, 2, "", "flag provided but not defined: -rounds"},
		{"bad config", []string{"--config", bad}, 2, "", "demo: config: politeness.dealy: unknown key"},
		{"no slave binary", []string{"--config", good, "--slave-binary", filepath.Join(dir, "none")}, 2, "", "demo: --slave-binary: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantStdout) || !strings.Contains(errOut.String(), tt.wantStderr) {
				t.Errorf("demo %q: exit %d, stdout %q, stderr %q; want %d, %q and %q",
					tt.args, code, out.String(), errOut.String(), tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}
