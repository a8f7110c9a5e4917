package urlx

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// canonURL is a parsed URL in canonical form, split into the parts a
// relative reference may take from it.
type canonURL struct {
	scheme string // "http" or "https"
	auth   string // [userinfo@]host[:port]
	path   string // starts with "/"
	query  string // without "?"; "" = no query
}

// String returns the canonical URL.
func (cu *canonURL) String() string {
	n := len(cu.scheme) + len("://") + len(cu.auth) + len(cu.path)
	if cu.query != "" {
		n += 1 + len(cu.query)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(cu.scheme)
	b.WriteString("://")
	b.WriteString(cu.auth)
	b.WriteString(cu.path)
	if cu.query != "" {
		b.WriteByte('?')
		b.WriteString(cu.query)
	}
	return b.String()
}

// url returns the canonical URL as a *url.URL whose String() is the
// canonical string.
func (cu *canonURL) url() (*url.URL, error) {
	s := cu.String()
	if len(s) > MaxURLLength {
		return nil, fmt.Errorf("urlx: url longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("urlx: %w", err)
	}
	return u, nil
}

var (
	errEmptyRef    = errors.New("urlx: empty reference")
	errFragmentRef = errors.New("urlx: fragment-only reference")
	errNoBase      = errors.New("urlx: relative reference without an http(s) base url")
	errEmptyHost   = errors.New("urlx: empty host")
	errTooLong     = fmt.Errorf("urlx: input longer than %d bytes", maxInputLen)
)

// cleanInput applies the WHATWG preprocessing: leading and trailing C0
// controls and spaces are trimmed, ASCII tabs and newlines removed.
func cleanInput(s string) string {
	start, end := 0, len(s)
	for start < end && s[start] <= ' ' {
		start++
	}
	for end > start && s[end-1] <= ' ' {
		end--
	}
	s = s[start:end]
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
	}
	return s
}

// splitScheme splits "scheme:rest"; ok is false when s has no scheme (it is
// a relative reference).
func splitScheme(s string) (scheme, rest string, ok bool) {
	if s == "" || !isAlpha(s[0]) {
		return "", s, false
	}
	for i := 1; i < len(s); i++ {
		switch b := s[i]; {
		case isAlpha(b) || '0' <= b && b <= '9' || b == '+' || b == '-' || b == '.':
		case b == ':':
			return s[:i], s[i+1:], true
		default:
			return "", s, false
		}
	}
	return "", s, false
}

func isAlpha(b byte) bool { return 'a' <= b|0x20 && b|0x20 <= 'z' }

func isSlash(b byte) bool { return b == '/' || b == '\\' }

// trimSlashes removes the slashes and backslashes s starts with.
func trimSlashes(s string) string {
	i := 0
	for i < len(s) && isSlash(s[i]) {
		i++
	}
	return s[i:]
}

// parse resolves ref against base (nil: ref must be absolute) following the
// WHATWG URL parser for special schemes, and canonicalizes the result; the
// query is UTF-8.
func (c *Canonicalizer) parse(base *canonURL, ref string) (canonURL, error) {
	return c.parseIn(base, ref, nil)
}

// parseIn is parse for a reference in a document whose query encoder is
// qe (nil: UTF-8).
func (c *Canonicalizer) parseIn(base *canonURL, ref string, qe *queryEncoder) (canonURL, error) {
	if len(ref) > maxInputLen {
		return canonURL{}, errTooLong
	}
	s := cleanInput(ref)
	switch {
	case s == "":
		return canonURL{}, errEmptyRef
	case s[0] == '#':
		return canonURL{}, errFragmentRef
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	scheme, rest, ok := splitScheme(s)
	if !ok {
		if base == nil {
			return canonURL{}, errNoBase
		}
		return c.relative(base, s, qe)
	}
	switch {
	case strings.EqualFold(scheme, "http"):
		scheme = "http"
	case strings.EqualFold(scheme, "https"):
		scheme = "https"
	default:
		if len(scheme) > 32 {
			scheme = scheme[:32] + "..."
		}
		return canonURL{}, fmt.Errorf("urlx: unsupported scheme %q", strings.ToLower(scheme))
	}
	if base != nil && base.scheme == scheme {
		// "http:foo" against an http base is relative (WHATWG "special
		// relative or authority state").
		return c.relative(base, rest, qe)
	}
	return c.absolute(scheme, trimSlashes(rest), qe)
}

// relative resolves a reference without scheme against base.
func (c *Canonicalizer) relative(base *canonURL, s string, qe *queryEncoder) (canonURL, error) {
	switch {
	case len(s) >= 2 && isSlash(s[0]) && isSlash(s[1]):
		// Scheme-relative "//host/path" (any mix of / and \).
		return c.absolute(base.scheme, trimSlashes(s), qe)
	case s == "":
		return *base, nil
	}
	out := canonURL{scheme: base.scheme, auth: base.auth}
	pathPart, query, hasQuery := strings.Cut(s, "?")
	switch {
	case pathPart == "":
		// "?query": the base path with a new query.
		out.path = base.path
	case isSlash(pathPart[0]):
		out.path = c.buildPath(nil, pathPart[1:])
	default:
		dir := base.path[:strings.LastIndexByte(base.path, '/')]
		out.path = c.buildPath([]byte(dir), pathPart)
	}
	if hasQuery {
		out.query = c.buildQuery(qe.encode(query))
	}
	return out, nil
}

// absolute parses what follows "scheme://" (slashes already skipped).
func (c *Canonicalizer) absolute(scheme, s string, qe *queryEncoder) (canonURL, error) {
	end := strings.IndexAny(s, "/\\?")
	if end < 0 {
		end = len(s)
	}
	auth, err := c.authority(scheme, s[:end])
	if err != nil {
		return canonURL{}, err
	}
	out := canonURL{scheme: scheme, auth: auth}
	pathPart, query, hasQuery := strings.Cut(s[end:], "?")
	if pathPart != "" {
		pathPart = pathPart[1:] // the slash that ended the authority
	}
	out.path = c.buildPath(nil, pathPart)
	if hasQuery {
		out.query = c.buildQuery(qe.encode(query))
	}
	return out, nil
}

// authority canonicalizes "userinfo@host:port".
func (c *Canonicalizer) authority(scheme, a string) (string, error) {
	var userinfo string
	hasUser := false
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		userinfo, a, hasUser = a[:i], a[i+1:], true
	}
	hostPart, port, hasPort := a, "", false
	inBrackets := false
	for i := 0; i < len(a); i++ {
		if b := a[i]; b == '[' {
			inBrackets = true
		} else if b == ']' {
			inBrackets = false
		} else if b == ':' && !inBrackets {
			hostPart, port, hasPort = a[:i], a[i+1:], true
			break
		}
	}
	if hostPart == "" {
		return "", errEmptyHost
	}
	host, err := parseHost(hostPart)
	if err != nil {
		return "", err
	}
	if hasPort {
		if port, err = canonPort(scheme, port); err != nil {
			return "", err
		}
	}
	n := len(host)
	if port != "" {
		n += 1 + len(port)
	}
	var ui string
	if hasUser {
		ui = canonUserinfo(userinfo)
		if ui != "" {
			n += len(ui) + 1
		}
	}
	var b strings.Builder
	b.Grow(n)
	if ui != "" {
		b.WriteString(ui)
		b.WriteByte('@')
	}
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	return b.String(), nil
}

// canonPort returns the canonical port: "" for an empty or default port,
// else the decimal number without leading zeros.
func canonPort(scheme, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	n := 0
	for i := 0; i < len(p); i++ {
		b := p[i]
		if b < '0' || b > '9' {
			return "", fmt.Errorf("urlx: invalid port %q", p)
		}
		if n = n*10 + int(b-'0'); n > 65535 {
			return "", fmt.Errorf("urlx: port %q out of range", p)
		}
	}
	if n == 80 && scheme == "http" || n == 443 && scheme == "https" {
		return "", nil
	}
	return strconv.Itoa(n), nil
}

// canonUserinfo returns the canonical "user[:password]", or "" when both
// are empty. The parts are percent-decoded and re-encoded as net/url
// encodes them, so that (*url.URL).String() reproduces them.
func canonUserinfo(ui string) string {
	user, pass, _ := strings.Cut(ui, ":")
	user, pass = lenientUnescape(user), lenientUnescape(pass)
	switch {
	case user == "" && pass == "":
		return ""
	case pass == "":
		return url.User(user).String()
	}
	return url.UserPassword(user, pass).String()
}

// lenientUnescape decodes the valid percent escapes of s and leaves any
// other "%" as it is.
func lenientUnescape(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// buildPath appends the segments of p (split at "/" and "\") to the
// canonical path dir ("" or "/a/b", no trailing slash), resolving dot
// segments and normalizing percent-encoding, and returns the path.
func (c *Canonicalizer) buildPath(dir []byte, p string) string {
	buf := dir
	if buf == nil {
		buf = make([]byte, 0, len(p)+8)
	}
	for {
		end := strings.IndexAny(p, "/\\")
		last := end < 0
		seg := p
		if !last {
			seg, p = p[:end], p[end+1:]
		}
		start := len(buf)
		buf = append(buf, '/')
		buf = appendEscaped(buf, seg, &pathKeep)
		if c.hasStrip() {
			buf = append(buf[:start+1], c.stripPathParams(buf[start+1:])...)
		}
		switch string(buf[start+1:]) {
		case "..":
			buf = buf[:start]
			if i := lastSlash(buf); i >= 0 {
				buf = buf[:i]
			}
			if last {
				buf = append(buf, '/')
			}
		case ".":
			buf = buf[:start]
			if last {
				buf = append(buf, '/')
			}
		}
		if last {
			break
		}
	}
	if len(buf) == 0 {
		return "/"
	}
	return string(buf)
}

func lastSlash(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '/' {
			return i
		}
	}
	return -1
}

func (c *Canonicalizer) hasStrip() bool { return len(c.exact) > 0 || len(c.prefixes) > 0 }

// stripPathParams removes the ";name=value" parameters of a path segment
// whose names are stripped ("foo.html;jsessionid=AB12" -> "foo.html"). The
// part before the first ";" is always kept. The result may alias seg.
func (c *Canonicalizer) stripPathParams(seg []byte) []byte {
	first := indexByte(seg, ';')
	if first < 0 {
		return seg
	}
	out := seg[:first:first] // appending copies: never overwrite seg
	rest := seg[first+1:]
	changed := false
	for {
		end := indexByte(rest, ';')
		param := rest
		if end >= 0 {
			param = rest[:end]
		}
		name, value := splitParam(param)
		if c.stripped(name, value) {
			changed = true
		} else {
			out = append(out, ';')
			out = append(out, param...)
		}
		if end < 0 {
			break
		}
		rest = rest[end+1:]
	}
	if !changed {
		return seg
	}
	return out
}

// splitParam splits "name=value"; value is nil when there is no "=".
func splitParam(p []byte) (name, value []byte) {
	if i := indexByte(p, '='); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// buildQuery returns the canonical query: percent-encoding normalized,
// empty parameters and stripped parameters removed. The remaining
// parameters keep their original order unless Options.SortQuery. Sorting
// them (as some crawlers do) would merge URLs that are different pages: the
// order is significant on some sites (repeated keys read as an ordered
// list, position-based parameters, signed URLs whose signature covers the
// raw query).
func (c *Canonicalizer) buildQuery(q string) string {
	if q == "" {
		return ""
	}
	norm := appendEscaped(make([]byte, 0, len(q)+8), q, &queryKeep)
	out := norm[:0] // compacted in place: writes never pass reads
	rest := norm
	for len(rest) > 0 {
		end := indexByte(rest, '&')
		part := rest
		if end >= 0 {
			part, rest = rest[:end], rest[end+1:]
		} else {
			rest = nil
		}
		if len(part) == 0 {
			continue
		}
		if c.hasStrip() {
			if part = c.stripQueryParam(part); len(part) == 0 {
				continue
			}
		}
		if len(out) > 0 {
			out = append(out, '&')
		}
		out = append(out, part...)
	}
	if c.sortQuery {
		return sortParams(out)
	}
	return string(out)
}

// sortParams returns the canonical query q ("a=1&b=2", no empty
// parameters) with its parameters sorted by name, stably.
func sortParams(q []byte) string {
	if indexByte(q, '&') < 0 {
		return string(q)
	}
	params := strings.Split(string(q), "&")
	name := func(p string) string {
		n, _, _ := strings.Cut(p, "=")
		return n
	}
	slices.SortStableFunc(params, func(a, b string) int { return strings.Compare(name(a), name(b)) })
	return strings.Join(params, "&")
}

// stripQueryParam returns the parameter "name=value" with its
// ";"-separated sub-parameters whose names are stripped removed (so that
// both "jsessionid=X" and "a=1;jsessionid=X" lose the session id), or an
// empty slice when nothing is left. The result may alias part or a fresh
// buffer.
func (c *Canonicalizer) stripQueryParam(part []byte) []byte {
	var out []byte
	changed := false
	rest := part
	for {
		end := indexByte(rest, ';')
		sub := rest
		if end >= 0 {
			sub = rest[:end]
		}
		name, value := splitParam(sub)
		if len(name) > 0 && c.stripped(name, value) {
			if !changed {
				changed = true
				out = append([]byte(nil), part[:len(part)-len(rest)]...)
				out = trimSemicolon(out)
			}
		} else if changed {
			if len(out) > 0 {
				out = append(out, ';')
			}
			out = append(out, sub...)
		}
		if end < 0 {
			break
		}
		rest = rest[end+1:]
	}
	if !changed {
		return part
	}
	return out
}

// trimSemicolon removes one trailing ";" (the separator before a removed
// sub-parameter).
func trimSemicolon(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == ';' {
		return b[:n-1]
	}
	return b
}

// Percent-encoding tables. keep[b] is true when byte b may appear raw in
// the canonical path (query). Never modified after init.
var (
	pathKeep   [256]bool
	queryKeep  [256]bool
	unreserved [256]bool
)

func init() {
	for b := 0; b < 256; b++ {
		c := byte(b)
		unreserved[b] = isAlpha(c) || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
		subDelim := strings.IndexByte("!$&'()*+,;=", c) >= 0
		pathKeep[b] = unreserved[b] || subDelim || c == ':' || c == '@'
		// The query keeps "/" and "?" raw; "'" is encoded, as browsers
		// encode it in the query of http(s) URLs.
		queryKeep[b] = (pathKeep[b] || c == '/' || c == '?') && c != '\''
	}
}

const upperHex = "0123456789ABCDEF"

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'f'
}

func unhex(b byte) byte {
	if b <= '9' {
		return b - '0'
	}
	return b | 0x20 - 'a' + 10
}

// appendEscaped appends s to dst with percent-encoding normalized: valid
// escapes get upper-case hex, escapes of unreserved characters are decoded,
// a "%" not starting a valid escape becomes "%25", and bytes not in keep
// are encoded.
func appendEscaped(dst []byte, s string, keep *[256]bool) []byte {
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == '%':
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				v := unhex(s[i+1])<<4 | unhex(s[i+2])
				if unreserved[v] {
					dst = append(dst, v)
				} else {
					dst = append(dst, '%', upperHex[v>>4], upperHex[v&15])
				}
				i += 2
			} else {
				dst = append(dst, '%', '2', '5')
			}
		case keep[b]:
			dst = append(dst, b)
		default:
			dst = append(dst, '%', upperHex[b>>4], upperHex[b&15])
		}
	}
	return dst
}
