package urlx

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// idnaProfile maps host names to ASCII. It is idna.Lookup (UTS #46
// mapping, nontransitional, Bidi and ContextJ rules) with the two checks
// browsers leave off (WHATWG "domain to ASCII" with beStrict = false):
// STD3 rules, which reject "_" (common in real host names), and the hyphen
// checks, which reject labels such as "r3---sn-abc" (used by large CDNs).
// Immutable.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.CheckJoiners(true),
	idna.StrictDomainName(false), // after MapForLookup, which sets it
	idna.CheckHyphens(false),
)

// parseHost returns the canonical form of a URL host: a lower-case ASCII
// domain name without trailing dot, a dotted-decimal IPv4 address, or a
// bracketed IPv6 address.
//
// Domain names are stricter than in browsers: after IDNA mapping only
// letters, digits, "-" and "_" are accepted in labels, and empty labels are
// rejected. Other characters that browsers let through ("!", "$", "{", ...)
// cannot be resolved through DNS, so such a URL could never be fetched.
func parseHost(h string) (string, error) {
	if h[0] == '[' {
		if len(h) < 2 || h[len(h)-1] != ']' {
			return "", fmt.Errorf("urlx: invalid IPv6 host %q", h)
		}
		return parseIPv6(h[1 : len(h)-1])
	}
	var domain string
	if simpleHost(h) {
		domain = asciiLower(h)
	} else {
		d := h
		if strings.IndexByte(d, '%') >= 0 {
			d = lenientUnescape(d)
		}
		if !utf8.ValidString(d) {
			return "", fmt.Errorf("urlx: host %q is not valid UTF-8", h)
		}
		a, err := idnaProfile.ToASCII(d)
		if err != nil {
			return "", fmt.Errorf("urlx: invalid host %q: %w", h, err)
		}
		domain = a
	}
	for i := 0; i < len(domain); i++ {
		if !hostByte[domain[i]] {
			return "", fmt.Errorf("urlx: invalid character %q in host %q", domain[i], h)
		}
	}
	if endsInNumber(domain) {
		return parseIPv4(domain)
	}
	domain = strings.TrimSuffix(domain, ".")
	if domain == "" || domain[0] == '.' || strings.Contains(domain, "..") || strings.HasSuffix(domain, ".") {
		return "", fmt.Errorf("urlx: empty label in host %q", h)
	}
	return domain, nil
}

// hostByte[b] is true for the bytes of a canonical domain name. Never
// modified after init.
var hostByte [256]bool

func init() {
	for b := 0; b < 256; b++ {
		c := byte(b)
		hostByte[b] = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
	}
}

// simpleHost reports whether h is plain ASCII letters, digits, "-", "_"
// and "." without punycode labels, so that IDNA processing would only
// lower-case it.
func simpleHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(hostByte[c] || 'A' <= c && c <= 'Z') {
			return false
		}
		if (i == 0 || h[i-1] == '.') && len(h)-i >= 4 && (c == 'x' || c == 'X') && strings.EqualFold(h[i:i+4], "xn--") {
			return false
		}
	}
	return true
}

// endsInNumber is the WHATWG "ends in a number checker": the host is to be
// parsed as IPv4 when its last label is a number.
func endsInNumber(d string) bool {
	if strings.HasSuffix(d, ".") {
		d = d[:len(d)-1]
		if d == "" {
			return false
		}
	}
	last := d[strings.LastIndexByte(d, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true // all digits, even when not a valid number ("09")
	}
	_, ok := ipv4Number(last)
	return ok
}

// ipv4Number parses one part of a WHATWG IPv4 address: decimal, octal with
// a leading 0, or hex with 0x. Values above 2^32 saturate.
func ipv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	radix := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, radix = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, radix = s[1:], 8
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case radix == 16 && isHex(c):
			d = uint64(unhex(c))
		default:
			return 0, false
		}
		if d >= radix {
			return 0, false
		}
		if n = n*radix + d; n > 1<<32 {
			n = 1<<32 + 1
		}
	}
	return n, true
}

// parseIPv4 is the WHATWG IPv4 parser: "0x7f.1" and "2130706433" are
// 127.0.0.1.
func parseIPv4(d string) (string, error) {
	parts := strings.Split(d, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return "", fmt.Errorf("urlx: invalid IPv4 host %q", d)
	}
	var ip uint64
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return "", fmt.Errorf("urlx: invalid IPv4 host %q", d)
		}
		if i < len(parts)-1 {
			if n > 255 {
				return "", fmt.Errorf("urlx: invalid IPv4 host %q", d)
			}
			ip |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return "", fmt.Errorf("urlx: invalid IPv4 host %q", d)
		}
		ip |= n
	}
	b := make([]byte, 0, 15)
	for i := 3; i >= 0; i-- {
		b = strconv.AppendUint(b, ip>>(8*i)&0xff, 10)
		if i > 0 {
			b = append(b, '.')
		}
	}
	return string(b), nil
}

// parseIPv6 parses the inside of "[...]" and returns it bracketed and
// serialized as WHATWG does: lower-case hex, the first longest run of two
// or more zero pieces compressed to "::", no dotted IPv4 part. Zones are
// rejected.
func parseIPv6(s string) (string, error) {
	if strings.IndexByte(s, '%') >= 0 {
		return "", fmt.Errorf("urlx: IPv6 zone not allowed in host %q", s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return "", fmt.Errorf("urlx: invalid IPv6 host %q", s)
	}
	b := a.As16()
	var pieces [8]uint16
	for i := range pieces {
		pieces[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	bestStart, bestLen := -1, 1
	for i := 0; i < 8; {
		if pieces[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && pieces[j] == 0 {
			j++
		}
		if j-i > bestLen {
			bestStart, bestLen = i, j-i
		}
		i = j
	}
	out := make([]byte, 0, 41)
	out = append(out, '[')
	for i := 0; i < 8; i++ {
		if i == bestStart {
			out = append(out, ':', ':')
			i += bestLen - 1
			continue
		}
		if i > 0 && i != bestStart+bestLen {
			out = append(out, ':')
		}
		out = strconv.AppendUint(out, uint64(pieces[i]), 16)
	}
	out = append(out, ']')
	return string(out), nil
}
