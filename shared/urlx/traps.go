package urlx

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// TrapOptions are the limits of a Traps. A zero field disables its check.
type TrapOptions struct {
	// MaxURLLength is the longest URL accepted, in bytes of its string form.
	MaxURLLength int
	// MaxPathRepeat is how often one non-empty path segment may occur in a
	// path; a segment occurring more often makes the URL a trap.
	MaxPathRepeat int
	// MaxPathSegments is the largest number of path segments ("/a/b/" has
	// 3: "a", "b" and "").
	MaxPathSegments int
	// MaxQueryParams is the largest number of non-empty query parameters.
	MaxQueryParams int
}

// DefaultTrapOptions returns the default limits: URLs up to 2048 bytes, a
// path segment at most twice, at most 32 path segments and 20 query
// parameters. The package documentation of the trap filters says why.
func DefaultTrapOptions() TrapOptions {
	return TrapOptions{
		MaxURLLength:    2048,
		MaxPathRepeat:   2,
		MaxPathSegments: 32,
		MaxQueryParams:  20,
	}
}

// Reasons returned by Traps.Check.
const (
	ReasonInvalid         = "invalid"
	ReasonURLTooLong      = "url_too_long"
	ReasonPathRepeat      = "path_repeat"
	ReasonTooManySegments = "too_many_segments"
	ReasonTooManyParams   = "too_many_params"
)

// Traps refuses URLs that look like crawler traps. It is immutable and safe
// for concurrent use.
type Traps struct {
	o TrapOptions
}

// NewTraps returns a Traps with the limits o. A negative limit is an error
// naming the field; zero disables a check.
func NewTraps(o TrapOptions) (*Traps, error) {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxURLLength", o.MaxURLLength},
		{"MaxPathRepeat", o.MaxPathRepeat},
		{"MaxPathSegments", o.MaxPathSegments},
		{"MaxQueryParams", o.MaxQueryParams},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("urlx: traps: %s %d must be >= 0 (0 = no limit)", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Traps{o: o}, nil
}

// Check reports whether u passes the trap filters; if not, reason says
// which check refused it, tried in this order: ReasonURLTooLong,
// ReasonTooManySegments, ReasonPathRepeat, ReasonTooManyParams (a nil or
// opaque URL is refused with ReasonInvalid). u is expected in canonical
// form; segments are compared as they appear in its escaped path.
func (t *Traps) Check(u *url.URL) (ok bool, reason string) {
	if u == nil || u.Opaque != "" {
		return false, ReasonInvalid
	}
	if t.o.MaxURLLength > 0 && len(u.String()) > t.o.MaxURLLength {
		return false, ReasonURLTooLong
	}
	if t.o.MaxPathSegments > 0 || t.o.MaxPathRepeat > 0 {
		if r := t.checkPath(u.EscapedPath()); r != "" {
			return false, r
		}
	}
	if t.o.MaxQueryParams > 0 && countParams(u.RawQuery) > t.o.MaxQueryParams {
		return false, ReasonTooManyParams
	}
	return true, ""
}

// smallPath is the segment count up to which repeats are counted by
// comparing pairs instead of with a map.
const smallPath = 32

// checkPath checks the segment count and repeats of an escaped path.
func (t *Traps) checkPath(p string) string {
	p = strings.TrimPrefix(p, "/")
	n := strings.Count(p, "/") + 1
	if t.o.MaxPathSegments > 0 && n > t.o.MaxPathSegments {
		return ReasonTooManySegments
	}
	if t.o.MaxPathRepeat == 0 || n <= t.o.MaxPathRepeat {
		return ""
	}
	if n <= smallPath {
		var segs [smallPath]string
		i := 0
		for seg := range strings.SplitSeq(p, "/") {
			if seg == "" {
				continue
			}
			count := 1
			for _, s := range segs[:i] {
				if s == seg {
					count++
				}
			}
			if count > t.o.MaxPathRepeat {
				return ReasonPathRepeat
			}
			segs[i] = seg
			i++
		}
		return ""
	}
	counts := make(map[string]int, n)
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" {
			continue
		}
		counts[seg]++
		if counts[seg] > t.o.MaxPathRepeat {
			return ReasonPathRepeat
		}
	}
	return ""
}

// countParams counts the non-empty "&"-separated parameters of a query.
func countParams(q string) int {
	n := 0
	for part := range strings.SplitSeq(q, "&") {
		if part != "" {
			n++
		}
	}
	return n
}

// UpwardPaths returns the URLs of the directories above u, nearest first,
// for upward-path crawling: for http://h/a/b/c.html?q they are
// http://h/a/b/, http://h/a/ and http://h/. They are the prefixes of u's
// path that end in "/" and are shorter than the path, so a directory URL
// (http://h/a/b/) does not list itself. Scheme, userinfo, host and port are
// kept; query and fragment are dropped. A nil or opaque URL has none.
func UpwardPaths(u *url.URL) []*url.URL {
	if u == nil || u.Opaque != "" {
		return nil
	}
	p := u.EscapedPath()
	if p == "" {
		return nil
	}
	var out []*url.URL
	for end := len(p) - 1; end > 0; {
		i := strings.LastIndexByte(p[:end], '/')
		if i < 0 {
			break
		}
		dir := p[:i+1]
		end = i
		path, err := url.PathUnescape(dir)
		if err != nil {
			continue
		}
		d := &url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host, Path: path, RawPath: dir}
		out = append(out, d)
	}
	return out
}

// PathKey returns scheme://host/path of u, without userinfo, query and
// fragment ("https://example.com:8443/a/b"), to count the query variants of
// one path. Scheme and host are lower-cased; an empty path is "/".
func PathKey(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return asciiLower(u.Scheme) + "://" + asciiLower(u.Host) + p
}

// DateQuery reports whether a query parameter of u holds a date: a
// calendar's link ("?d=2026-11-24", "?date=20261124", "?month=2026-11",
// "?day=24/11/2026"), whose next-day links never end, as a listing's
// "?page=N" does. A date needs a plausible year (1900 to 2199) and month
// (and day, when given).
func DateQuery(u *url.URL) bool {
	if u.RawQuery == "" {
		return false
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if isDate(v) {
				return true
			}
		}
	}
	return false
}

// isDate recognises YYYY-MM[-DD], YYYY/MM[/DD], YYYY.MM.DD, YYYYMMDD and
// DD/MM/YYYY or MM/DD/YYYY (with - or . too).
func isDate(v string) bool {
	if len(v) < 6 || len(v) > 10 {
		return false
	}
	num := func(s string) (int, bool) {
		if s == "" || len(s) > 4 {
			return 0, false
		}
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, false
			}
			n = n*10 + int(s[i]-'0')
		}
		return n, true
	}
	ymd := func(y, m, d int, hasDay bool) bool {
		return y >= 1900 && y <= 2199 && m >= 1 && m <= 12 && (!hasDay || d >= 1 && d <= 31)
	}
	if len(v) == 8 { // YYYYMMDD
		y, ok1 := num(v[:4])
		m, ok2 := num(v[4:6])
		d, ok3 := num(v[6:])
		return ok1 && ok2 && ok3 && ymd(y, m, d, true)
	}
	sep := -1
	for i := 0; i < len(v); i++ {
		if v[i] == '-' || v[i] == '/' || v[i] == '.' {
			sep = i
			break
		}
	}
	if sep < 0 {
		return false
	}
	parts := strings.Split(v, string(v[sep]))
	switch len(parts) {
	case 2: // YYYY-MM
		y, ok1 := num(parts[0])
		m, ok2 := num(parts[1])
		return ok1 && ok2 && len(parts[0]) == 4 && ymd(y, m, 1, false)
	case 3:
		a, ok1 := num(parts[0])
		b, ok2 := num(parts[1])
		c, ok3 := num(parts[2])
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		if len(parts[0]) == 4 { // YYYY-MM-DD
			return ymd(a, b, c, true)
		}
		if len(parts[2]) == 4 { // DD/MM/YYYY or MM/DD/YYYY
			return ymd(c, b, a, true) || ymd(c, a, b, true)
		}
	}
	return false
}
