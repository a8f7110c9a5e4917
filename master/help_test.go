package main

import (
	"bytes"
	"strings"
	"testing"
)

// helpOf runs "master ARGS... --help" and returns stdout; it fails the
// test unless that exits 0 with nothing on stderr.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(append(args, "--help"), nil, &out, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("master %s --help: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// flagsIn returns the flag names a usage lists ("  -name ...").
func flagsIn(usage string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ := strings.Cut(rest, " ")
			out[name] = true
		}
	}
	return out
}

// TestSeedHelp: master seed --help prints seed's flags, and only them.
func TestSeedHelp(t *testing.T) {
	out := helpOf(t, "seed")
	if !strings.HasPrefix(out, "usage: master seed ") {
		t.Errorf("master seed --help does not start with its usage:\n%s", out)
	}
	got := flagsIn(out)
	for _, f := range []string{"config", "crawl", "file", "recrawl"} {
		if !got[f] {
			t.Errorf("master seed --help does not list -%s:\n%s", f, out)
		}
	}
	if len(got) != 4 {
		t.Errorf("master seed --help lists %d flags, want seed's 4:\n%s", len(got), out)
	}
}

// TestCommandHelp checks every command's -h: its own usage on stdout,
// exit 0, and --crawl on every command that reads a crawl.
func TestCommandHelp(t *testing.T) {
	readsCrawl := map[string]bool{"run": true, "seed": true, "status": true, "export": true, "acl": true, "crawl": true}
	for name := range adminCommands {
		readsCrawl[name] = true
	}
	cmds := [][]string{{"migrate"}, {"rules", "check"}, {"acl", "--mysql"}}
	for name := range readsCrawl {
		cmds = append(cmds, []string{name})
	}
	for _, cmd := range cmds {
		out := helpOf(t, cmd...)
		if !strings.HasPrefix(out, "usage: master "+strings.Join(cmd, " ")) {
			t.Errorf("master %s --help: want its usage first, got:\n%s", strings.Join(cmd, " "), out)
		}
		if readsCrawl[strings.Join(cmd, " ")] && !flagsIn(out)["crawl"] {
			t.Errorf("master %s reads a crawl but has no --crawl:\n%s", strings.Join(cmd, " "), out)
		}
		if flagsIn(out)["rounds"] {
			t.Errorf("master %s --help lists bench's -rounds", strings.Join(cmd, " "))
		}
	}
	if out := helpOf(t); !strings.HasPrefix(out, "usage: master <command>") {
		t.Errorf("master --help:\n%s", out)
	}
	if out := helpOf(t, "rules"); !strings.HasPrefix(out, "usage: master rules check") {
		t.Errorf("master rules --help:\n%s", out)
	}
}

// TestUnknownFlag: a flag the command does not have exits 2 with a
// message and the command's usage on stderr.
func TestUnknownFlag(t *testing.T) {
	for _, args := range [][]string{{"seed", "--rounds", "3"}, {"status", "--pages", "5"}, {"slaves", "--bogus"}, {"acl", "--bogus"}} {
		var out, errOut bytes.Buffer
		code := run(args, nil, &out, &errOut)
		if code != 2 || out.Len() > 0 || !strings.Contains(errOut.String(), "flag provided but not defined: "+strings.TrimPrefix(args[1], "-")) ||
			!strings.Contains(errOut.String(), "usage: master "+args[0]) {
			t.Errorf("master %q: exit %d, stdout %q, stderr %q; want 2, the error and the usage on stderr", args, code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"frobnicate"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, errOut.String())
	}
}
