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
//     valid text; the bytes of a legacy-encoded href are kept as they are);
//     other escapes (%2F, %26, %3D, ...) are left alone, since decoding them
//     changes the meaning;
//   - the fragment removed;
//   - strip parameters removed from the query, and ";name=value" path
//     parameters with those names removed from path segments (as Nutch
//     removes ";jsessionid=..."); empty query parameters ("&&") removed;
//     the remaining parameters keep their ORIGINAL order: the query is not
//     sorted, because the order is significant on some sites (repeated keys
//     read as a list, position-based parameters, signed URLs), so sorting
//     would merge URLs that are different pages; an empty "?" removed;
//   - userinfo is kept (percent-encoded as net/url writes it); nothing else
//     is dropped.
//
// The canonical form of a URL is a fixed point: canonicalizing it again
// gives the same string, and (*url.URL).String() of a returned URL is the
// canonical string.
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
	exact    map[string]struct{} // lower-case parameter names to strip
	prefixes []string            // lower-case prefixes of parameter names to strip
}

// DefaultStripParams returns the default strip list (a fresh slice): click
// trackers (utm_*, gclid, fbclid, mc_cid, mc_eid, _ga, yclid, msclkid,
// igshid) and session ids (jsessionid, phpsessid, sessionid, _sessionid,
// bv_sessionid, cfid, cftoken). "sid" and "_sid", which Nutch also strips,
// are not included: they are too often real content ids (Slashdot's
// "article.pl?sid=05/01/01/123" is a story id); add them when a site needs
// it.
func DefaultStripParams() []string {
	return []string{
		"utm_*", "gclid", "fbclid", "mc_cid", "mc_eid", "_ga", "yclid", "msclkid", "igshid",
		"jsessionid", "phpsessid", "sessionid", "_sessionid", "bv_sessionid", "cfid", "cftoken",
	}
}

// NewCanonicalizer returns a Canonicalizer that removes the parameters
// named in stripParams from queries (and from ";name=value" path
// parameters). Names are case-insensitive; a trailing "*" makes an entry a
// prefix match ("utm_*"). An empty entry, a lone "*", a "*" anywhere but at
// the end, or a name containing a character that cannot be part of a
// parameter name (& = ; # ? / space, controls) is an error naming the entry.
func NewCanonicalizer(stripParams []string) (*Canonicalizer, error) {
	c := &Canonicalizer{exact: make(map[string]struct{}, len(stripParams))}
	for i, p := range stripParams {
		if err := checkStripParam(p); err != nil {
			return nil, fmt.Errorf("urlx: strip param %d %q: %w", i, p, err)
		}
		// Compared with names as they appear in canonical queries: percent-
		// encoding normalized, ASCII lower case (hex digits included, on
		// both sides).
		name := asciiLower(string(appendEscaped(nil, p, &queryKeep)))
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			c.prefixes = append(c.prefixes, prefix)
		} else {
			c.exact[name] = struct{}{}
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

// stripped reports whether the query or path parameter name (as it appears
// in the canonical URL) is to be removed.
func (c *Canonicalizer) stripped(name []byte) bool {
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
	if _, ok := c.exact[string(key)]; ok {
		return true
	}
	for _, p := range c.prefixes {
		if len(key) >= len(p) && string(key[:len(p)]) == p {
			return true
		}
	}
	return false
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
