package config

import "errors"

// Error is a configuration problem. Load and Validate return only *Error, so
// that a main can tell a bad configuration (exit status 2, see ExitCode) from
// a failure at run time.
type Error struct {
	// Key names what is wrong: a dotted key path ("politeness.delay"), an
	// element of a list ("crawl.deny[1]") or an environment variable
	// ("CRAWLER_POLITNESS_DELAY"). It is empty for a problem with the file as
	// a whole (unreadable, malformed YAML), whose Msg then starts with the
	// file's path.
	Key string
	// Msg says what is wrong, in lower case.
	Msg string
	// Err is the underlying error, if any; its text is appended to Msg.
	Err error
}

// Error formats the error as "config: <key>: <msg>[: <err>]", or
// "config: <msg>[: <err>]" when there is no key.
func (e *Error) Error() string {
	s := "config: "
	if e.Key != "" {
		s += e.Key + ": "
	}
	s += e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error, so that errors.Is(err,
// fs.ErrNotExist) reports a missing config file.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the process exit status for an error returned by a main: 0 for
// nil, 2 for a configuration error (an *Error anywhere in the chain) and 1
// for anything else.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ce *Error
	if errors.As(err, &ce) {
		return 2
	}
	return 1
}
