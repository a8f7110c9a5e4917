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
	"strings"
)

// Flags is one command's flag set.
type Flags struct {
	*flag.FlagSet
	usage          string
	stdout, stderr io.Writer
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
