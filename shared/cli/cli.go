// Package cli gives the commands of both binaries one way of reading
// their flags: each command has its own flag set and usage; -h or --help
// prints that command's usage and flags on stdout and exits 0; a flag it
// does not know prints the error and the usage on stderr and exits 2.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// EnvConfig names the config file of every command that takes --config,
// when --config is not given (config.EnvConfigFile).
const EnvConfig = "CRAWLER_CONFIG"

// Flags is one command's flag set.
type Flags struct {
	*flag.FlagSet
	usage          string
	stdout, stderr io.Writer
	config         *string // ConfigFile's flag, nil without one
}

// New returns the flag set of the command name ("master seed"); usage is
// printed above its flags: the synopsis and what the command does.
func New(name, usage string, stdout, stderr io.Writer) *Flags {
	f := &Flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), usage: usage, stdout: stdout, stderr: stderr}
	f.SetOutput(stderr)         // Parse's error messages
	f.FlagSet.Usage = func() {} // Parse below prints the usage where it belongs
	return f
}

// Parse parses args. When ok is false the command is over and exits
// with exit: 0 after -h or --help (the usage on stdout), 2 after a bad
// flag (its error, then the usage, on stderr).
func (f *Flags) Parse(args []string) (exit int, ok bool) {
	err := f.FlagSet.Parse(args)
	switch {
	case err == nil:
		if f.config != nil && !f.Given("config") {
			if env := os.Getenv(EnvConfig); env != "" {
				*f.config = env
			}
		}
		if parseOnly.record(f) {
			return 0, false
		}
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		f.PrintUsage(f.stdout)
		return 0, false
	default:
		f.PrintUsage(f.stderr)
		return 2, false
	}
}

// PrintUsage writes the usage and the command's flags to w.
func (f *Flags) PrintUsage(w io.Writer) {
	fmt.Fprint(w, f.usage)
	if !strings.HasSuffix(f.usage, "\n") {
		fmt.Fprintln(w)
	}
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(f.stderr)
}

// Given reports whether a flag was given on the command line.
func (f *Flags) Given(name string) bool {
	given := false
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			given = true
		}
	})
	return given
}

// ConfigFile adds the --config flag: the config file, $CRAWLER_CONFIG when
// the flag is not given and that is set, else def.
func (f *Flags) ConfigFile(def, usage string) *string {
	f.config = f.String("config", def, usage+" ($"+EnvConfig+" when set)")
	return f.config
}

// Parsed is a command line that ParseOnly stopped after its flags.
type Parsed struct {
	Command string        // the flag set's name ("master seed")
	Args    []string      // what is left after the flags
	Flags   *flag.FlagSet // the command's flags, to read flags that follow its arguments
}

// parseOnly is ParseOnly's state.
var parseOnly parseOnlyState

type parseOnlyState struct {
	mu     sync.Mutex
	on     bool
	parsed []Parsed
}

// record notes f's parse and reports whether the command must end there.
func (p *parseOnlyState) record(f *Flags) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.parsed = append(p.parsed, Parsed{Command: f.Name(), Args: f.Args(), Flags: f.FlagSet})
	}
	return p.on
}

// ParseOnly runs fn with every command's Parse ending the command, exit
// 0, as soon as its flags parsed without an error, and returns what
// parsed: the tests that check that the command lines of the docs parse
// with the real flag sets run the commands' own code up to there and no
// further. Not for concurrent use with commands that must run.
func ParseOnly(fn func()) []Parsed {
	parseOnly.mu.Lock()
	parseOnly.on, parseOnly.parsed = true, nil
	parseOnly.mu.Unlock()
	defer func() {
		parseOnly.mu.Lock()
		parseOnly.on = false
		parseOnly.mu.Unlock()
	}()
	fn()
	parseOnly.mu.Lock()
	defer parseOnly.mu.Unlock()
	return parseOnly.parsed
}
