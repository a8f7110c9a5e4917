package masterd

import (
	"errors"
	"fmt"
	"net/netip"
)

// A slave reports where it serves /metrics in its heartbeat, which is the
// slave's to write: the master lists an address for Prometheus service
// discovery only when it is a literal IP:port inside admin.sd_allow, and
// never one of the addresses below, whatever admin.sd_allow says, so a
// stolen slave cannot point Prometheus at a cloud's metadata service or
// anything else the admin did not allow. A host name is refused: it
// could resolve to anything when Prometheus looks it up.

// Cloud metadata services outside the link-local range (which is refused
// as a whole): AWS's IPv6 one, Alibaba's, Azure's WireServer.
var (
	metadataAWSv6   = netip.MustParseAddr("fd00:ec2::254")
	metadataAlibaba = netip.MustParseAddr("100.100.100.200")
	metadataAzure   = netip.MustParseAddr("168.63.129.16")
	// nat64 is the NAT64 well-known prefix (RFC 6052): its addresses
	// reach the IPv4 address in their last 4 bytes, judged as that
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// sdTarget returns the scrape target to list for a slave's reported
// metrics address addr, or why it is not listed. The target is addr
// written canonically (an IPv4-mapped IPv6 address as IPv4), so what
// Prometheus scrapes is exactly what was checked.
func sdTarget(addr string, allow []netip.Prefix) (string, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return "", errors.New("not a literal IP:port (host names are not listed: set the slave's slave.metrics_listen to its IP)")
	}
	if ap.Addr().Zone() != "" {
		return "", errors.New("an address with a zone")
	}
	if ap.Port() == 0 {
		return "", errors.New("port 0")
	}
	ip := ap.Addr().Unmap()
	if err := neverListed(ip); err != nil {
		return "", err
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		if err := neverListed(netip.AddrFrom4([4]byte(b[12:]))); err != nil {
			return "", fmt.Errorf("NAT64 to %w", err)
		}
	}
	for _, p := range allow {
		if p.Contains(ip) {
			return netip.AddrPortFrom(ip, ap.Port()).String(), nil
		}
	}
	return "", errors.New("outside admin.sd_allow")
}

// neverListed says why ip may never be a scrape target, or nil.
func neverListed(ip netip.Addr) error {
	switch {
	case ip.IsUnspecified():
		return errors.New("an unspecified address")
	case ip.IsLinkLocalUnicast():
		return errors.New("a link-local address (metadata services live there)")
	case ip.IsMulticast():
		return errors.New("a multicast address")
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("the broadcast address")
	case ip == metadataAWSv6 || ip == metadataAlibaba || ip == metadataAzure:
		return errors.New("a cloud metadata address")
	}
	return nil
}
