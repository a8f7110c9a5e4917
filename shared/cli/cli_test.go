package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	newFlags := func(out, errOut *bytes.Buffer) (*Flags, *string) {
		f := New("tool cmd", "usage: tool cmd [--name N]\n\nDoes a thing.\n", out, errOut)
		return f, f.String("name", "x", "the name")
	}
	var out, errOut bytes.Buffer
	f, name := newFlags(&out, &errOut)
	if code, ok := f.Parse([]string{"--name", "y", "arg"}); !ok || code != 0 || *name != "y" || f.NArg() != 1 || !f.Given("name") {
		t.Errorf("Parse = %d, %v, name %q, args %q", code, ok, *name, f.Args())
	}
	if out.Len()+errOut.Len() > 0 {
		t.Errorf("printed %q %q", out.String(), errOut.String())
	}

	for _, help := range []string{"-h", "--help", "-help"} {
		out.Reset()
		errOut.Reset()
		f, _ = newFlags(&out, &errOut)
		code, ok := f.Parse([]string{help})
		want := "usage: tool cmd [--name N]\n\nDoes a thing.\n\nflags:\n  -name string\n    \tthe name (default \"x\")\n"
		if ok || code != 0 || out.String() != want || errOut.Len() > 0 {
			t.Errorf("%s: %d, %v, stdout %q, stderr %q; want 0 and\n%s", help, code, ok, out.String(), errOut.String(), want)
		}
	}

	out.Reset()
	errOut.Reset()
	f, _ = newFlags(&out, &errOut)
	code, ok := f.Parse([]string{"--other"})
	if ok || code != 2 || out.Len() > 0 || !strings.HasPrefix(errOut.String(), "flag provided but not defined: -other\nusage: tool cmd") {
		t.Errorf("unknown flag: %d, %v, stdout %q, stderr %q", code, ok, out.String(), errOut.String())
	}
	if f.Given("name") {
		t.Error("Given(name) without --name")
	}
}
