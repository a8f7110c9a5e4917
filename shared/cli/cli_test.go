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

// TestConfigFile: --config given wins, else $CRAWLER_CONFIG, else the
// default.
func TestConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"default", "", nil, "config.yaml"},
		{"env", "/etc/redcrawl/config.yaml", nil, "/etc/redcrawl/config.yaml"},
		{"flag over env", "/etc/redcrawl/config.yaml", []string{"--config", "my.yaml"}, "my.yaml"},
		{"flag", "", []string{"--config", "my.yaml"}, "my.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvConfig, tc.env)
			var out, errOut bytes.Buffer
			f := New("tool cmd", "usage: tool cmd\n", &out, &errOut)
			cfg := f.ConfigFile("config.yaml", "config file")
			if code, ok := f.Parse(tc.args); !ok || code != 0 {
				t.Fatalf("Parse = %d, %v: %s", code, ok, errOut.String())
			}
			if *cfg != tc.want {
				t.Errorf("--config = %q, want %q", *cfg, tc.want)
			}
		})
	}
}

// TestParseOnly: inside ParseOnly a command ends, exit 0, once its flags
// parsed, and what parsed is returned; a bad flag still fails; outside
// it, Parse goes on.
func TestParseOnly(t *testing.T) {
	var out, errOut bytes.Buffer
	newFlags := func() *Flags {
		f := New("tool cmd", "usage: tool cmd\n", &out, &errOut)
		f.String("name", "", "the name")
		return f
	}
	var codes []int
	var oks []bool
	parsed := ParseOnly(func() {
		for _, args := range [][]string{{"--name", "x", "arg", "--late"}, {"--bogus"}} {
			code, ok := newFlags().Parse(args)
			codes, oks = append(codes, code), append(oks, ok)
		}
	})
	if len(parsed) != 1 || parsed[0].Command != "tool cmd" || strings.Join(parsed[0].Args, " ") != "arg --late" {
		t.Errorf("ParseOnly = %+v, want tool cmd with arg --late left", parsed)
	}
	if codes[0] != 0 || oks[0] || codes[1] != 2 || oks[1] {
		t.Errorf("Parse in ParseOnly = %v %v, want (0, false) then (2, false)", codes, oks)
	}
	if code, ok := newFlags().Parse([]string{"--name", "x"}); code != 0 || !ok {
		t.Errorf("Parse after ParseOnly = %d, %v, want 0, true", code, ok)
	}
}
