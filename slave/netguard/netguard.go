// Package netguard keeps the crawler from connecting to non-public
// addresses (SSRF protection).
//
// The check runs on the resolved IP address at dial time, as a
// net.Dialer.Control function, so it sees exactly the address the socket is
// about to connect to. That catches every way of spelling a private address
// in a URL (decimal "2130706433", octal "0177.0.0.1", hex "0x7f000001",
// short "127.1", IPv4-mapped "[::ffff:127.0.0.1]", ...) and DNS names that
// resolve to one (including DNS rebinding), none of which a check on the URL
// string can catch reliably: whether "0x7f000001" resolves at all depends on
// the resolver (glibc's getaddrinfo accepts it, Go's own resolver does not).
//
// The policy follows the lists of github.com/daenney/ssrf and
// github.com/doyensec/safeurl:
//
//   - IPv4: every special-purpose range of the IANA registry that is not
//     globally reachable is refused (this network 0/8, RFC 1918, CGNAT
//     100.64/10, loopback, link-local, IETF protocol assignments 192.0.0/24,
//     documentation, benchmarking, AS112, AMT, the deprecated 6to4 relay
//     anycast, multicast, reserved 240/4 and broadcast).
//   - IPv6: only global unicast 2000::/3 is allowed, and inside it the IETF
//     protocol assignments 2001::/23 (Teredo, benchmarking, ORCHID, ...),
//     documentation (2001:db8::/32, 3fff::/20), 6to4 2002::/16 and the AS112
//     delegation are refused. Everything outside 2000::/3 is refused:
//     unspecified, loopback, IPv4-compatible, discard-only, unique local,
//     link-local, site-local, multicast.
//   - Addresses that carry an IPv4 address and are routed to it are judged by
//     that IPv4 address: IPv4-mapped ::ffff:a.b.c.d and NAT64 64:ff9b::a.b.c.d
//     (RFC 6052). The NAT64 well-known prefix is not refused outright (both
//     reference lists do) because on an IPv6-only network behind DNS64 every
//     IPv4-only web site resolves into it; what it reaches is the embedded
//     IPv4 address, which is checked. The tunnelling forms 6to4 and Teredo
//     are refused outright whatever they embed: no web server is reached
//     through them any more (RFC 7526).
//   - Addresses with an IPv6 zone (fe80::1%eth0) are refused.
//
// The check does not depend on the resolver: DialerWith takes any
// *net.Resolver, and the tests dial every URL host form of the SSRF
// vectors, directly and as a redirect target, through both Go's own
// resolver and the cgo one (glibc resolves the legacy numeric forms, Go's
// resolver does not), against listeners on loopback addresses.
//
// Only connections made through the Dialer are checked. A Dialer's own DNS
// queries do not go through its Control function, so a local resolver such
// as 127.0.0.53 keeps working.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// BlockedError is returned by the Control function, wrapped in the dial
// error, when the address a connection is about to be made to is not
// public.
type BlockedError struct {
	// Addr is the refused dial address, "ip:port".
	Addr string
}

// Error implements error.
func (e *BlockedError) Error() string {
	return fmt.Sprintf("netguard: connection to non-public address %s refused", e.Addr)
}

// blockedV4 are the IPv4 ranges that are refused. Never modified.
var blockedV4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network" (RFC 791, RFC 1122)
	netip.MustParsePrefix("10.0.0.0/8"),      // private use (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space, CGNAT (RFC 6598)
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback (RFC 1122)
	netip.MustParsePrefix("169.254.0.0/16"),  // link local (RFC 3927)
	netip.MustParsePrefix("172.16.0.0/12"),   // private use (RFC 1918)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("192.31.196.0/24"), // AS112-v4 (RFC 7535)
	netip.MustParsePrefix("192.52.193.0/24"), // AMT (RFC 7450)
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast (RFC 7526)
	netip.MustParsePrefix("192.168.0.0/16"),  // private use (RFC 1918)
	netip.MustParsePrefix("192.175.48.0/24"), // direct delegation AS112 service (RFC 7534)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation TEST-NET-2 (RFC 5737)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation TEST-NET-3 (RFC 5737)
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast (RFC 1112)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved (RFC 1112), includes broadcast 255.255.255.255
}

// globalUnicast6 is the only IPv6 range connections may go to, apart from
// the NAT64 prefix judged by its embedded IPv4 address.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// nat64 is the NAT64 well-known prefix (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// blockedV6 are the ranges inside 2000::/3 that are refused. Never modified.
var blockedV6 = []netip.Prefix{
	netip.MustParsePrefix("2001::/23"),         // IETF protocol assignments (RFC 2928): Teredo 2001::/32, benchmarking, ORCHID, ...
	netip.MustParsePrefix("2001:db8::/32"),     // documentation (RFC 3849)
	netip.MustParsePrefix("2002::/16"),         // 6to4 (RFC 3056, deprecated by RFC 7526)
	netip.MustParsePrefix("2620:4f:8000::/48"), // direct delegation AS112 service (RFC 7534)
	netip.MustParsePrefix("3fff::/20"),         // documentation (RFC 9637)
}

// IsBlocked reports whether connections to ip must be refused because it is
// not a public unicast address: loopback, private, link-local, unspecified,
// multicast, CGNAT, documentation, benchmarking and other special-purpose
// ranges, in IPv4 or IPv6, and the IPv6 forms that reach a refused IPv4
// address. An invalid (zero) Addr is blocked. See the package documentation
// for the full policy.
func IsBlocked(ip netip.Addr) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return true
	}
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is4() {
		for _, p := range blockedV4 {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return IsBlocked(netip.AddrFrom4([4]byte(b[12:16])))
	}
	if !globalUnicast6.Contains(ip) {
		return true
	}
	for _, p := range blockedV6 {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Control returns a net.Dialer Control function that refuses, with a
// *BlockedError, connections to addresses IsBlocked reports, unless
// allowPrivate is set (then it allows everything). It also refuses an
// IPv4-mapped address on an IPv6 socket (Go's dialer always connects to an
// IPv4 address through an IPv4 socket, so such an address only comes from
// a dialer that bypasses the usual path), non-IP networks, and addresses it
// cannot parse.
func Control(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	if allowPrivate {
		return func(string, string, syscall.RawConn) error { return nil }
	}
	return func(network, address string, _ syscall.RawConn) error {
		return check(network, address)
	}
}

// check is the Control function of a guarded dialer.
func check(network, address string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return fmt.Errorf("netguard: refusing to dial network %q", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: cannot parse dial address %q: %w", address, err)
	}
	ip := ap.Addr()
	if IsBlocked(ip) || (ip.Is4In6() && strings.HasSuffix(network, "6")) {
		return &BlockedError{Addr: address}
	}
	return nil
}

// Options configure a guarded dialer (DialerWith).
type Options struct {
	// Timeout is the connect timeout (0: none but the operating system's).
	Timeout time.Duration
	// AllowPrivate turns the guard off (see Control).
	AllowPrivate bool
	// Resolver looks up host names; nil is net.DefaultResolver. Whatever
	// it returns for a name, numeric or not, is checked at dial time:
	// glibc's getaddrinfo (a resolver with PreferGo false, when cgo is in
	// use) turns "0x7f000001" and "127.1" into 127.0.0.1, which is refused
	// like the literal address.
	Resolver *net.Resolver
}

// Dialer returns a *net.Dialer with the given connect timeout, a 30 s TCP
// keep-alive and Control(allowPrivate) as its Control function. It is
// DialerWith(Options{Timeout: timeout, AllowPrivate: allowPrivate}).
func Dialer(timeout time.Duration, allowPrivate bool) *net.Dialer {
	return DialerWith(Options{Timeout: timeout, AllowPrivate: allowPrivate})
}

// DialerWith returns a *net.Dialer with o's connect timeout and resolver, a
// 30 s TCP keep-alive and Control(o.AllowPrivate) as its Control function.
func DialerWith(o Options) *net.Dialer {
	return &net.Dialer{
		Timeout:   o.Timeout,
		KeepAlive: 30 * time.Second,
		Resolver:  o.Resolver,
		Control:   Control(o.AllowPrivate),
	}
}
