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

// keyAliases are the names other scrapers (Scrapy, colly, Portia, …) give
// to keys of a rule file: an unknown key near one of them is taken for the
// key it names, when that key is known where it was found.
var keyAliases = map[string]string{
	"selector": "css", "css_selector": "css", "sel": "css", "query": "css",
	"xpath_selector": "xpath", "attribute": "attr", "regexp": "regex", "re": "regex", "pattern": "regex",
	"jsonpath": "json", "json_path": "json", "multiple": "list", "many": "list",
	"transforms": "transform", "filters": "transform", "urls": "match", "pattern_match": "match",
	"domains": "hosts", "allowed_domains": "hosts", "host": "hosts", "item": "items", "field": "fields",
}

// didYouMean returns a did-you-mean hint for an unknown key, or "": the
// known key nearest to it, or the one an alias near it names
// (slector → selector → css).
func didYouMean(key string, known []string) string {
	key = strings.ToLower(key)
	best, bestD := "", 3
	for _, k := range known {
		d := suggest.Distance(key, k)
		if d < bestD && d <= len(k)/2 {
			best, bestD = k, d
		}
	}
	for alias, k := range keyAliases {
		if !contains(known, k) {
			continue
		}
		d := suggest.Distance(key, alias)
		if d < bestD && d <= len(alias)/2 {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
