// Package urlx turns URLs into the one canonical form the crawler uses for
// deduplication and fetching, extracts links from HTML, and decides which
// URLs are in a crawl's scope.
//
// # Parsing
//
// URLs are parsed the way browsers parse http and https URLs (the WHATWG URL
// Standard, special schemes): leading and trailing C0 controls and spaces
// are trimmed, ASCII tabs and newlines anywhere are removed, "\" is a path
// separator like "/", any number of slashes may follow "http:", hosts are
// percent-decoded and IDNA-mapped, and numeric IPv4 forms ("0x7f.1",
// "2130706433") are read as IPv4 addresses. Only http and https are
// accepted; every other scheme (javascript:, mailto:, data:, tel:, ftp:,
// file:, ...) is an error.
//
// # Canonical form
//
//   - scheme and host lower case; IDN hosts in punycode (IDNA UTS #46
//     mapping, nontransitional); one trailing dot of the host removed;
//     numeric IPv4 hosts in dotted decimal; IPv6 hosts compressed
//     (RFC 5952 style, as WHATWG serializes them);
//   - default port (80 for http, 443 for https) and an empty port removed;
//   - empty path is "/"; "." and ".." segments resolved (also their
//     percent-encoded forms); empty segments ("//") are kept: they are
//     significant on some servers (web.archive.org/web/2020/http://...);
//   - percent-encoding normalized in path and query: hex digits upper case,
//     escapes of unreserved characters (A-Z a-z 0-9 - . _ ~) decoded, a "%"
//     that does not start an escape encoded as "%25", and characters that
//     may not appear raw (controls, space, non-ASCII bytes, " < > [ \ ] ^ `
//     { | } and, in the query, ') percent-encoded byte by byte (UTF-8 for
//     valid text, except the query of a link in a document of a legacy
//     encoding, which is encoded in that encoding first, as browsers do:
//     see LinkOptions.Encoding; invalid UTF-8 bytes are kept as they are);
//     other escapes (%2F, %26, %3D, ...) are left alone, since decoding them
//     changes the meaning;
//   - the fragment removed;
//   - strip parameters (click trackers and session ids, see
//     DefaultStripParams) removed from the query, also as ";"-separated
//     sub-parameters ("?a=1;jsessionid=X"), and ";name=value" path
//     parameters with those names removed from path segments (as Nutch
//     removes ";jsessionid=..."); an entry such as "sid=<token>" strips the
//     parameter only when its value looks like a session token; empty
//     query parameters ("&&") removed;
//     the remaining parameters keep their ORIGINAL order by default: the
//     query is not sorted, because the order is significant on some sites
//     (repeated keys read as a list, position-based parameters, signed
//     URLs), so sorting would merge URLs that are different pages, and the
//     canonical URL is also the one fetched (Options.SortQuery sorts them
//     by name, for crawls of sites where order means nothing); an empty
//     "?" removed;
//   - userinfo is kept (percent-encoded as net/url writes it); nothing else
//     is dropped.
//
// The canonical form of a URL is a fixed point: canonicalizing it again
// gives the same string, and (*url.URL).String() of a returned URL is the
// canonical string.
//
// # Crawler traps
//
// Traps (NewTraps) are stateless checks on one URL that refuse the shapes
// endless generated URL spaces take: very long URLs, a path segment that repeats
// (relative links resolved against a page that serves every path:
// /a/b/a/b/a/...), very deep paths, and queries with very many parameters
// (faceted search, calendars). What needs state across URLs (how many
// query variants of one path were seen: see PathKey) is left to the
// frontier.
//
// The defaults follow the URL filters of production crawlers (the files of
// ../shared/conformance/traps/ and Heritrix's decide rules):
//
//   - MaxURLLength 2048: Nutch's default regex-urlfilter.txt comments the
//     rule "skip URLs longer than 2048 characters" (db.max.outlink.length);
//     StormCrawler's BasicURLFilter ships maxLength 1024. We take Nutch's
//     2048, the sitemaps protocol's limit and about that of old browsers
//     (IE: 2083), so links that work in a browser pass, because 1024
//     refuses real pages (long search and faceted URLs, signed
//     links), while the trap URLs of interest grow without bound and pass
//     2048 after a few more steps anyway.
//   - MaxPathRepeat 2: StormCrawler's BasicURLFilter (maxPathRepetition 3)
//     refuses a URL in which one "/"-separated part occurs 3 times
//     anywhere, Nutch's regex "-.*(/[^/]+)/[^/]+\1/[^/]+\1/" one in which a
//     segment occurs 3 times at every other position (/x/a/x/b/x/), and
//     Heritrix's
//     PathologicalPathDecideRule (max-repetitions 2) one whose segment
//     repeats more than twice in a row (/a/a/a/). Counting occurrences
//     anywhere in the path, as StormCrawler does, catches all three shapes;
//     "more than 2" is the limit all three share. Empty segments ("//")
//     are not counted here (MaxPathSegments bounds them).
//   - MaxPathSegments 32: Heritrix's TooManyPathSegmentsDecideRule refuses
//     more than 20; Nutch and StormCrawler have no such rule. We allow 32
//     because real deep trees (source browsers, file shares, nested
//     categories) pass 20, and repeated-segment traps are already caught by
//     MaxPathRepeat; what is left is traps whose segments all differ
//     (/1/2/3/4/...), which still end at 32.
//   - MaxQueryParams 20: no reference crawler has one (Nutch's default
//     filter refuses every URL with "?" or "=", which we do not); 20
//     non-empty parameters is more than real forms send, and faceted
//     navigation that adds a parameter per click stops there.
//
// Nutch's and StormCrawler's other default rules are not trap rules and are
// not adopted here: their file-suffix lists (images, archives: a crawl
// decides what it fetches with its own deny regexes), the refusal of
// private addresses by URL regex (netguard refuses them at dial time, which
// also catches "0x7f000001" and DNS names), and the scheme rule (only http
// and https canonicalize at all).
package urlx

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// maxInputLen bounds the length of a URL or reference accepted as input.
const maxInputLen = 64 << 10

// MaxURLLength is the longest canonical URL accepted, in bytes. Longer URLs
// are rejected: most servers refuse request lines above 8 KiB, and such
// URLs are almost always crawler traps.
const MaxURLLength = 8 << 10

// Canonicalizer turns URLs into the one canonical form used for dedup and
// fetching. It is immutable and safe for concurrent use.
type Canonicalizer struct {
	exact     map[string]bool // lower-case parameter names to strip; true: only when the value is a session token
	prefixes  []stripPrefix   // lower-case prefixes of parameter names to strip
	sortQuery bool            // Options.SortQuery
}

// Options configure a Canonicalizer.
type Options struct {
	// StripParams are the query (and ";name=value" path) parameters
	// removed: see NewCanonicalizer.
	StripParams []string
	// SortQuery orders the query's parameters by name (bytewise on their
	// canonical form, stable: repeated names keep their order, "?b=2&a=1"
	// becomes "?a=1&b=2", "?t=y&t=x" stays). The canonical URL is also
	// the URL fetched, so the site gets the sorted query: only for sites
	// where parameter order means nothing. Off, the order is kept.
	SortQuery bool
}

// stripPrefix is a prefix entry of the strip list ("utm_*").
type stripPrefix struct {
	prefix    string
	tokenOnly bool // only when the value is a session token
}

// tokenQualifier ends a strip-list entry that only strips a parameter whose
// value looks like a session token ("sid=<token>").
const tokenQualifier = "=<token>"

// DefaultStripParams returns the default strip list (a fresh slice):
//
//   - click trackers: utm_*, gclid, fbclid, mc_cid, mc_eid, _ga, yclid,
//     msclkid, igshid;
//   - session ids whose name says so, always stripped: the names Nutch's
//     regex-normalize default strips, "_?(l|j|bv_)?(phpsessid|sessionid)",
//     less the combinations no server uses (jphpsessid, lphpsessid, ...):
//     phpsessid, _phpsessid, sessionid, _sessionid, jsessionid, _jsessionid,
//     lsessionid, _lsessionid, bv_sessionid, _bv_sessionid; and the session
//     parameters of common server software: aspsessionid* (classic ASP),
//     cfid and cftoken (ColdFusion), oscsid (osCommerce), zenid (Zen Cart);
//   - "sid=<token>" and "_sid=<token>": sid and _sid, which Nutch strips
//     whatever their value, only when the value looks like a session token
//     (see NewCanonicalizer). Unqualified they would merge real pages: "sid"
//     is often a content id (Slashdot's "article.pl?sid=05/01/01/123" is a
//     story id, "sid=12" a section or station id), while phpBB, PHP and
//     osCommerce-style session ids are 26 to 32 random letters and digits.
func DefaultStripParams() []string {
	return []string{
		"utm_*", "gclid", "fbclid", "mc_cid", "mc_eid", "_ga", "yclid", "msclkid", "igshid",
		"phpsessid", "_phpsessid", "sessionid", "_sessionid", "jsessionid", "_jsessionid",
		"lsessionid", "_lsessionid", "bv_sessionid", "_bv_sessionid",
		"aspsessionid*", "cfid", "cftoken", "oscsid", "zenid",
		"sid" + tokenQualifier, "_sid" + tokenQualifier,
	}
}

// NewCanonicalizer returns a Canonicalizer that removes the parameters
// named in stripParams from queries (and from ";name=value" path
// parameters). Names are case-insensitive; a trailing "*" makes an entry a
// prefix match ("utm_*"). An entry ending in "=<token>" ("sid=<token>",
// "s_*=<token>") only strips a parameter whose value looks like a session
// token: 16 to 128 ASCII letters and digits, at least one of each (a
// 32-hex-digit PHP or phpBB session id is one; "12345", "xyz",
// "05/01/01/123" and a 20-digit number are not). An empty entry, a lone
// "*", a "*" anywhere but at the end of the name, or a name containing a
// character that cannot be part of a parameter name (& = ; # ? / space,
// controls) is an error naming the entry.
func NewCanonicalizer(stripParams []string) (*Canonicalizer, error) {
	return NewCanonicalizerWith(Options{StripParams: stripParams})
}

// NewCanonicalizerWith is NewCanonicalizer with options.
func NewCanonicalizerWith(opt Options) (*Canonicalizer, error) {
	stripParams := opt.StripParams
	c := &Canonicalizer{exact: make(map[string]bool, len(stripParams)), sortQuery: opt.SortQuery}
	for i, p := range stripParams {
		raw, tokenOnly := strings.CutSuffix(p, tokenQualifier)
		if err := checkStripParam(raw); err != nil {
			return nil, fmt.Errorf("urlx: strip param %d %q: %w", i, p, err)
		}
		// Compared with names as they appear in canonical queries: percent-
		// encoding normalized, ASCII lower case (hex digits included, on
		// both sides).
		name := asciiLower(string(appendEscaped(nil, raw, &queryKeep)))
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			c.prefixes = append(c.prefixes, stripPrefix{prefix: prefix, tokenOnly: tokenOnly})
		} else if only, dup := c.exact[name]; !dup || only {
			// An unqualified entry wins over a "=<token>" one.
			c.exact[name] = tokenOnly
		}
	}
	return c, nil
}

func checkStripParam(p string) error {
	switch {
	case p == "":
		return errors.New("empty parameter name")
	case p == "*":
		return errors.New("a lone * would strip every parameter")
	}
	for i := 0; i < len(p); i++ {
		switch b := p[i]; {
		case b == '*' && i != len(p)-1:
			return errors.New("* is only allowed at the end (a prefix match)")
		case b <= ' ' || b == 0x7f || strings.IndexByte("&=;#?/", b) >= 0:
			return fmt.Errorf("character %q cannot be part of a parameter name", b)
		}
	}
	return nil
}

// asciiLower returns s with A-Z mapped to a-z.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// stripped reports whether the query or path parameter name=value (as it
// appears in the canonical URL; value is nil when there is no "=") is to be
// removed.
func (c *Canonicalizer) stripped(name, value []byte) bool {
	if len(c.exact) == 0 && len(c.prefixes) == 0 {
		return false
	}
	var small [64]byte
	key := small[:0]
	if len(name) > len(small) {
		key = make([]byte, 0, len(name))
	}
	for _, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		key = append(key, b)
	}
	if tokenOnly, ok := c.exact[string(key)]; ok && (!tokenOnly || isSessionToken(value)) {
		return true
	}
	for _, p := range c.prefixes {
		if len(key) >= len(p.prefix) && string(key[:len(p.prefix)]) == p.prefix && (!p.tokenOnly || isSessionToken(value)) {
			return true
		}
	}
	return false
}

// isSessionToken reports whether a parameter value looks like a generated
// session id: 16 to 128 ASCII letters and digits with at least one of each.
// Session ids are random (PHP: 26 or 32 characters of [0-9a-v] or hex,
// phpBB and osCommerce: 32 hex digits), so they almost always mix both;
// content ids are mostly short, all digits, or carry punctuation.
func isSessionToken(v []byte) bool {
	if len(v) < 16 || len(v) > 128 {
		return false
	}
	letter, digit := false, false
	for _, b := range v {
		switch {
		case '0' <= b && b <= '9':
			digit = true
		case isAlpha(b):
			letter = true
		default:
			return false
		}
	}
	return letter && digit
}

// Canonicalize parses raw, which must be an absolute http or https URL, and
// returns its canonical form.
func (c *Canonicalizer) Canonicalize(raw string) (*url.URL, error) {
	cu, err := c.parse(nil, raw)
	if err != nil {
		return nil, err
	}
	return cu.url()
}

// Resolve resolves the reference ref against base, as a browser resolves a
// link, and returns the canonical form of the result. It is an error when
// ref is empty or only a fragment (a link to the page itself), when the
// result is not an http or https URL (javascript:, mailto:, data:, tel:,
// ftp:, ...), or when ref is relative and base is nil or not http(s).
func (c *Canonicalizer) Resolve(base *url.URL, ref string) (*url.URL, error) {
	b, err := c.baseOf(base)
	if err != nil {
		return nil, err
	}
	cu, err := c.parse(b, ref)
	if err != nil {
		return nil, err
	}
	return cu.url()
}

// baseOf parses a base URL; a nil or non-http(s) base gives a nil base.
func (c *Canonicalizer) baseOf(base *url.URL) (*canonURL, error) {
	if base == nil {
		return nil, nil
	}
	if s := strings.ToLower(base.Scheme); s != "http" && s != "https" {
		return nil, nil
	}
	b, err := c.parse(nil, base.String())
	if err != nil {
		return nil, fmt.Errorf("urlx: base: %w", err)
	}
	return &b, nil
}

// Fingerprint returns the 64-bit fingerprint of a canonical URL: the first
// 8 bytes, big endian, of its SHA-256. It is stored in Redis, so it must
// never change.
func Fingerprint(canonical string) uint64 {
	sum := sha256.Sum256([]byte(canonical))
	return binary.BigEndian.Uint64(sum[:8])
}

// HostKey returns the politeness key of u: its lower-case host, without a
// trailing dot, followed by ":port" only when the port is not the default
// of the scheme ("example.com", "127.0.0.2:8080"). IPv6 hosts keep their
// brackets ("[2001:db8::1]", "[2001:db8::1]:8080").
func HostKey(u *url.URL) string {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	port := u.Port()
	switch {
	case port == "",
		port == "80" && strings.EqualFold(u.Scheme, "http"),
		port == "443" && strings.EqualFold(u.Scheme, "https"):
		return host
	}
	return host + ":" + port
}
