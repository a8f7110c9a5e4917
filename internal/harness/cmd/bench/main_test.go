package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsage checks what bench says before it crawls anything: its usage
// for --help, and exit 2 naming the problem for a bad flag, a bad config,
// bad slave counts or a missing binary.
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
	slave := filepath.Join(dir, "slave") // exists: only its path is checked before a crawl
	if err := os.WriteFile(slave, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(dir, "none")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, 0, "usage: bench [--config config.yaml]", ""},
		{"unknown flag", []string{"--keep"}, 2, "", "flag provided but not defined: -keep"},
		{"bad config", []string{"--config", bad}, 2, "", "bench: config: politeness.dealy: unknown key"},
		{"bad slave counts", []string{"--config", good, "--slave-counts", "1,x"}, 2, "", `bench: --slave-counts "1,x": want numbers like 1,2,4`},
		{"failing hosts", []string{"--config", good, "--hosts", "2", "--failing-hosts", "3"}, 2, "", "bench: --failing-hosts 3: want 0 to --hosts (2)"},
		{"no slave binary", []string{"--config", good, "--slave-binary", none}, 2, "", "bench: --slave-binary: "},
		{"no master binary", []string{"--config", good, "--slave-binary", slave, "--broad", "--master-binary", none}, 2, "", "bench: --master-binary: "},
		{"bad broad slave counts", []string{"--config", good, "--slave-binary", slave, "--master-binary", slave, "--broad", "--broad-slaves", "0"}, 2, "",
			`bench: --broad-slaves "0": want numbers like 1,4,16`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantStdout) || !strings.Contains(errOut.String(), tt.wantStderr) {
				t.Errorf("bench %q: exit %d, stdout %q, stderr %q; want %d, %q and %q",
					tt.args, code, out.String(), errOut.String(), tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}
