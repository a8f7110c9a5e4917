package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp checks that "slave -h" and "slave run -h" print their usage on
// stdout and exit 0, and that a flag slave run does not know exits 2 with
// the error and the usage on stderr.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"run", "-h"}, {"run", "--help"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 || errOut.Len() > 0 || !strings.HasPrefix(out.String(), "usage: slave run") {
			t.Errorf("slave %q: exit %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	run([]string{"run", "-h"}, &out, &errOut)
	for _, flag := range []string{"-config", "-crawl", "-id", "-concurrency"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("slave run -h does not list %s:\n%s", flag, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"run", "--bogus"}, &out, &errOut); code != 2 || out.Len() > 0 ||
		!strings.Contains(errOut.String(), "flag provided but not defined: -bogus") || !strings.Contains(errOut.String(), "usage: slave run") {
		t.Errorf("slave run --bogus: exit %d, stdout %q, stderr %q; want 2, the error and the usage on stderr", code, out.String(), errOut.String())
	}
	errOut.Reset()
	if code := run(nil, &out, &errOut); code != 2 || !strings.HasPrefix(errOut.String(), "usage: slave run") {
		t.Errorf("slave: exit %d, stderr %q; want 2 and the usage", code, errOut.String())
	}
}
