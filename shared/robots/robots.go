// Package robots parses robots.txt files and answers whether a crawler may
// fetch a URL, following RFC 9309 (the Robots Exclusion Protocol) and, where
// the RFC leaves room, the behaviour of Google's reference parser
// (github.com/google/robotstxt).
//
// Parsing never fails: lines that cannot be understood are ignored. Rules are
// compiled once by Parse; a *Robots is immutable afterwards and safe for
// concurrent use.
//
// Summary of the behaviour:
//
//   - Only the first 500 KiB of the body are parsed (RFC 9309 §2.5); a line
//     cut by that limit is dropped rather than read truncated. Lines longer
//     than 16663 bytes are truncated, as Google does.
//   - A UTF-8 byte order mark is skipped; lines end at CR, LF or CRLF; "#"
//     starts a comment.
//   - Record names are matched case-insensitively by prefix, with Google's
//     list of common typos ("useragent", "user agent", "dissallow",
//     "disalow", ...). A line without a colon is accepted when it holds
//     exactly two whitespace-separated words ("Disallow /x").
//   - A group starts with one or more user-agent lines; the list of user
//     agents ends at the first allow, disallow or crawl-delay line. Unknown
//     records and sitemaps do not end it (as in Google's parser and its RFC
//     test cases), nor do blank lines. Allow, disallow and crawl-delay lines
//     before any user-agent line are ignored.
//   - A crawler obeys the groups naming its product token (merged, RFC 9309
//     §2.2.1); if there are none, the "*" groups; if there are none either,
//     everything is allowed. A group naming the crawler but holding no rules
//     allows everything.
//   - The longest matching pattern wins, its length counted in octets of
//     the percent-encoded pattern including "*" and "$"; Allow wins a tie;
//     an empty pattern matches nothing.
//   - Patterns are percent-encoded before matching: octets outside ASCII are
//     encoded and the hex digits of existing escapes are upper-cased. The
//     hex digits of escapes in the path are upper-cased too; no escape is
//     decoded, so "%62" does not match "b".
//   - "/robots.txt" is always allowed (RFC 9309 §2.2.2).
//   - Google extension: "Allow: /dir/index.htm[l]" also allows "/dir/".
package robots

import (
	"bytes"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// maxBodySize is how much of a robots.txt is parsed (RFC 9309 §2.5).
	maxBodySize = 500 << 10
	// maxLineLen is the longest line kept; longer lines are truncated, as
	// in Google's parser (2083*8 bytes of buffer including a terminator).
	maxLineLen = 2083*8 - 1
)

// Robots is a parsed robots.txt. Safe for concurrent use after Parse. The
// zero value is not used; use Parse, AllowAll or DisallowAll.
type Robots struct {
	// agents maps a lower-cased product token to the groups naming it.
	agents map[string][]*group
	// global holds the groups naming "*".
	global []*group
	// sitemaps lists the Sitemap records in file order, without duplicates.
	sitemaps []string
}

// group is the rules of one group of the file. A group naming several user
// agents is stored once and shared by all of them.
type group struct {
	// rules are sorted by priority, highest first, Allow before Disallow on
	// equal priority, so the first rule that matches decides.
	rules    []rule
	delay    time.Duration
	hasDelay bool
}

// rule is a compiled Allow or Disallow pattern.
type rule struct {
	// segs are the literal parts of the pattern between "*" wildcards:
	// segs[0] must be a prefix of the path; when len(segs) > 1 the pattern
	// has at least one wildcard.
	segs []string
	// anchored is set when the pattern ends with "$".
	anchored bool
	allow    bool
	// prio is the length of the percent-encoded pattern in octets.
	prio int
}

// Parse parses a robots.txt body. It never fails: anything it cannot
// understand is ignored.
func Parse(body []byte) *Robots {
	if len(body) > maxBodySize {
		body = body[:maxBodySize]
		// Drop the line the limit cut: a truncated "Allow: /private" would
		// read as "Allow: /".
		if i := bytes.LastIndexAny(body, "\r\n"); i >= 0 {
			body = body[:i]
		}
	}
	body = skipBOM(body)

	p := parser{r: &Robots{agents: make(map[string][]*group)}}
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		if len(line) > maxLineLen {
			line = line[:maxLineLen]
		}
		p.line(line)
	}
	p.finish()
	return p.r
}

// AllowAll returns a Robots that allows everything, e.g. for a robots.txt
// answered with a 4xx status (RFC 9309 §2.3.1.3).
func AllowAll() *Robots {
	return &Robots{}
}

// DisallowAll returns a Robots that disallows everything but /robots.txt,
// e.g. for a robots.txt that is unreachable or answered with a 5xx status
// (RFC 9309 §2.3.1.4).
func DisallowAll() *Robots {
	g := &group{rules: []rule{compile("/", false)}}
	return &Robots{global: []*group{g}}
}

// Allowed reports whether the crawler with the given User-Agent string may
// fetch u, an absolute URL. The escaped path of u (u.EscapedPath, which
// percent-encodes what needs it) is matched, followed by "?" and the raw
// query when u has one; the fragment is ignored. See AllowedPath.
func (r *Robots) Allowed(userAgent string, u *url.URL) bool {
	if u == nil {
		return r.AllowedPath(userAgent, "/")
	}
	p := u.EscapedPath()
	if p == "" {
		p = u.Opaque
	}
	if u.RawQuery != "" || u.ForceQuery {
		p += "?" + u.RawQuery
	}
	return r.AllowedPath(userAgent, p)
}

// AllowedPath reports whether the crawler with the given User-Agent string
// may fetch the URL with the given path and query, which must already be
// percent-encoded as in an HTTP request line ("/a%20b?q=1"): octets outside
// ASCII are compared as they are. An empty path means "/".
//
// The crawler's product token is the leading run of [A-Za-z_-] characters of
// userAgent ("redcrawl" for "redcrawl/0.1 (+https://example.org)"), matched
// case-insensitively against the file's user-agent lines.
func (r *Robots) AllowedPath(userAgent, pathAndQuery string) bool {
	p := normalizePath(pathAndQuery)
	if p == "/robots.txt" || strings.HasPrefix(p, "/robots.txt?") {
		return true
	}
	groups := r.groupsFor(userAgent)
	best, allow := 0, true
	for _, g := range groups {
		for i := range g.rules {
			ru := &g.rules[i]
			if ru.prio < best || (ru.prio == best && allow) {
				// Sorted by priority: nothing further in this group can win.
				break
			}
			if ru.match(p) {
				if ru.prio > best || ru.allow {
					best, allow = ru.prio, ru.allow
				}
				break
			}
		}
	}
	return allow
}

// CrawlDelay returns the Crawl-delay of the group that applies to the
// crawler with the given User-Agent string, or 0 when it has none. When
// several groups apply (they are merged) the largest delay is returned.
func (r *Robots) CrawlDelay(userAgent string) time.Duration {
	var d time.Duration
	for _, g := range r.groupsFor(userAgent) {
		if g.hasDelay && g.delay > d {
			d = g.delay
		}
	}
	return d
}

// Sitemaps returns the values of the file's Sitemap records, in order and
// without duplicates. The caller owns the returned slice.
func (r *Robots) Sitemaps() []string {
	return slices.Clone(r.sitemaps)
}

// groupsFor returns the groups that apply to userAgent: those naming its
// product token if any, else those naming "*".
func (r *Robots) groupsFor(userAgent string) []*group {
	if tok := productToken(userAgent); tok != "" {
		if gs, ok := r.agents[strings.ToLower(tok)]; ok {
			return gs
		}
	}
	return r.global
}

// productToken returns the leading run of [A-Za-z_-] characters of s.
func productToken(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return s[:i]
		}
	}
	return s
}

// skipBOM drops a UTF-8 byte order mark, or a leading part of one, as
// Google's parser does.
func skipBOM(b []byte) []byte {
	const bom = "\xEF\xBB\xBF"
	n := 0
	for n < len(bom) && n < len(b) && b[n] == bom[n] {
		n++
	}
	return b[n:]
}

// keyKind is the kind of a robots.txt record.
type keyKind int

const (
	keyUnknown keyKind = iota
	keyUserAgent
	keyAllow
	keyDisallow
	keySitemap
	keyCrawlDelay
)

// keyPrefixes maps record-name prefixes, lower case, to their kind. Order
// matters only in that no prefix of one kind starts another's.
var keyPrefixes = [...]struct {
	prefix string
	kind   keyKind
}{
	{"user-agent", keyUserAgent},
	{"useragent", keyUserAgent},
	{"user agent", keyUserAgent},
	{"allow", keyAllow},
	{"disallow", keyDisallow},
	{"dissallow", keyDisallow},
	{"dissalow", keyDisallow},
	{"disalow", keyDisallow},
	{"diasllow", keyDisallow},
	{"disallaw", keyDisallow},
	{"sitemap", keySitemap},
	{"site-map", keySitemap},
	{"crawl-delay", keyCrawlDelay},
	{"crawldelay", keyCrawlDelay},
	{"crawl delay", keyCrawlDelay},
}

func classify(key []byte) keyKind {
	for _, kp := range keyPrefixes {
		if len(key) >= len(kp.prefix) && strings.EqualFold(string(key[:len(kp.prefix)]), kp.prefix) {
			return kp.kind
		}
	}
	return keyUnknown
}

// parser holds the state of Parse.
type parser struct {
	r *Robots
	// cur is the group of the current run of user-agent lines, nil before
	// the first one.
	cur *group
	// inRules is set once an allow, disallow or crawl-delay line follows
	// the run of user-agent lines: the next user-agent line starts a new
	// group.
	inRules bool
	// all lists every group, to sort their rules at the end.
	all      []*group
	sitemaps map[string]bool
}

const asciiSpace = " \t\n\v\f\r"

// splitLine splits a robots.txt line into key and value as Google's parser
// does, reporting false for a line that is blank, a comment or junk.
func splitLine(line []byte) (key, value []byte, ok bool) {
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	line = bytes.Trim(line, asciiSpace)
	sep := bytes.IndexByte(line, ':')
	if sep < 0 {
		// Google: a missing colon may be replaced by whitespace when the
		// line holds exactly two words ("Disallow /x").
		sep = bytes.IndexAny(line, " \t")
		if sep < 0 {
			return nil, nil, false
		}
		if bytes.ContainsAny(bytes.TrimLeft(line[sep:], " \t"), " \t") {
			return nil, nil, false
		}
	}
	key = bytes.Trim(line[:sep], asciiSpace)
	if len(key) == 0 {
		return nil, nil, false
	}
	return key, bytes.Trim(line[sep+1:], asciiSpace), true
}

func (p *parser) line(line []byte) {
	key, value, ok := splitLine(line)
	if !ok {
		return
	}
	switch classify(key) {
	case keyUserAgent:
		p.userAgent(value)
	case keyAllow:
		p.rule(value, true)
	case keyDisallow:
		p.rule(value, false)
	case keySitemap:
		if len(value) > 0 {
			s := string(value)
			if p.sitemaps == nil {
				p.sitemaps = make(map[string]bool)
			}
			if !p.sitemaps[s] {
				p.sitemaps[s] = true
				p.r.sitemaps = append(p.r.sitemaps, s)
			}
		}
	case keyCrawlDelay:
		g := p.cur
		if g == nil {
			return
		}
		// Crawl-delay is a member of its group, like a rule: without this
		// "User-agent: *", "Crawl-delay: 5", "User-agent: BadBot",
		// "Disallow: /" would disallow everything for everyone.
		p.inRules = true
		if d, ok := parseDelay(value); ok && (!g.hasDelay || d > g.delay) {
			g.delay, g.hasDelay = d, true
		}
	}
}

func (p *parser) userAgent(value []byte) {
	if p.inRules || p.cur == nil {
		p.inRules = false
		p.cur = &group{}
		p.all = append(p.all, p.cur)
	}
	g := p.cur
	if len(value) > 0 && value[0] == '*' && (len(value) == 1 || strings.IndexByte(asciiSpace, value[1]) >= 0) {
		// Google: "*" followed by whitespace and more is still "*".
		if n := len(p.r.global); n == 0 || p.r.global[n-1] != g {
			p.r.global = append(p.r.global, g)
		}
		return
	}
	tok := productToken(string(value))
	if tok == "" {
		return
	}
	tok = strings.ToLower(tok)
	gs := p.r.agents[tok]
	if n := len(gs); n == 0 || gs[n-1] != g {
		p.r.agents[tok] = append(gs, g)
	}
}

func (p *parser) rule(value []byte, allow bool) {
	g := p.cur
	if g == nil {
		return // Rules before any user-agent line belong to no group.
	}
	p.inRules = true
	if len(value) == 0 {
		return // An empty pattern matches nothing.
	}
	pattern := escapePattern(value)
	g.rules = append(g.rules, compile(pattern, allow))
	if allow {
		// Google: "Allow: /dir/index.htm[l]" also allows "/dir/".
		if i := strings.LastIndexByte(pattern, '/'); i >= 0 && strings.HasPrefix(pattern[i:], "/index.htm") {
			g.rules = append(g.rules, compile(pattern[:i+1]+"$", true))
		}
	}
}

func (p *parser) finish() {
	for _, g := range p.all {
		slices.SortStableFunc(g.rules, func(a, b rule) int {
			if a.prio != b.prio {
				return b.prio - a.prio
			}
			switch {
			case a.allow == b.allow:
				return 0
			case a.allow:
				return -1
			default:
				return 1
			}
		})
	}
}

// parseDelay parses a Crawl-delay value: a non-negative decimal number of
// seconds, possibly fractional ("10", "0.5", ".5"). Anything else is
// rejected.
func parseDelay(v []byte) (time.Duration, bool) {
	digits, dot := 0, 0
	for _, c := range v {
		switch {
		case '0' <= c && c <= '9':
			digits++
		case c == '.':
			dot++
		default:
			return 0, false
		}
	}
	if digits == 0 || dot > 1 {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false
	}
	if f >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(f * float64(time.Second)), true
}

const upperHex = "0123456789ABCDEF"

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func toUpper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// escapePattern percent-encodes the octets of a pattern that are outside
// ASCII and upper-cases the hex digits of existing escapes ("%aa" becomes
// "%AA"), as Google's parser does.
func escapePattern(v []byte) string {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '%' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]):
			b.WriteByte('%')
			b.WriteByte(toUpper(v[i+1]))
			b.WriteByte(toUpper(v[i+2]))
			i += 2
		case c >= 0x80:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// normalizePath returns p starting with "/" and with the hex digits of its
// escapes upper-cased. It allocates only when p changes.
func normalizePath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	for i := 0; i+2 < len(p); i++ {
		if p[i] == '%' && isHex(p[i+1]) && isHex(p[i+2]) {
			if p[i+1] != toUpper(p[i+1]) || p[i+2] != toUpper(p[i+2]) {
				return upperEscapes(p)
			}
			i += 2
		}
	}
	return p
}

func upperEscapes(p string) string {
	b := []byte(p)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' && isHex(b[i+1]) && isHex(b[i+2]) {
			b[i+1], b[i+2] = toUpper(b[i+1]), toUpper(b[i+2])
			i += 2
		}
	}
	return string(b)
}

// compile compiles a percent-encoded pattern. "*" matches any run of
// octets; "$" anchors the pattern at the end of the path when it is the
// last octet and is literal elsewhere.
func compile(pattern string, allow bool) rule {
	r := rule{allow: allow, prio: len(pattern)}
	if strings.HasSuffix(pattern, "$") {
		r.anchored = true
		pattern = pattern[:len(pattern)-1]
	}
	r.segs = strings.Split(pattern, "*")
	if len(r.segs) > 2 {
		// Drop the empty parts of runs of "*", keeping the first and last
		// parts where they are.
		mid := r.segs[1 : len(r.segs)-1]
		kept := mid[:0]
		for _, s := range mid {
			if s != "" {
				kept = append(kept, s)
			}
		}
		n := copy(r.segs[1:], kept)
		r.segs[n+1] = r.segs[len(r.segs)-1]
		r.segs = slices.Clip(r.segs[:n+2])
	}
	return r
}

// match reports whether the rule matches path p, anchored at its start. It
// runs in time linear in len(p) times the number of wildcards at worst (one
// leftmost search per literal part, never backtracking): the leftmost
// placement of each part leaves the most room for the rest.
func (r *rule) match(p string) bool {
	head := r.segs[0]
	if !strings.HasPrefix(p, head) {
		return false
	}
	if len(r.segs) == 1 {
		return !r.anchored || len(p) == len(head)
	}
	pos := len(head)
	last := len(r.segs) - 1
	for _, s := range r.segs[1:last] {
		i := strings.Index(p[pos:], s)
		if i < 0 {
			return false
		}
		pos += i + len(s)
	}
	tail := r.segs[last]
	if r.anchored {
		return len(p)-pos >= len(tail) && strings.HasSuffix(p, tail)
	}
	return strings.Contains(p[pos:], tail)
}
