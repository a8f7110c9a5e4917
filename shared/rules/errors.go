package rules

import (
	"fmt"
	"strings"

	"github.com/redcrawl/redcrawl/shared/suggest"
)

// Error is one problem in a rule file, at a position. Line and Col are
// 1-based; 0 means unknown.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error formats the problem as file:line:col: msg, the form editors jump to.
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Errors is every problem found while loading a rule directory, in file
// and line order.
type Errors []*Error

// Error lists the problems one per line.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the problems for errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// didYouMean returns a did-you-mean hint for an unknown key, or "".
func didYouMean(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		d := suggest.Distance(strings.ToLower(key), k)
		if d < bestD && d <= len(k)/2 {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
