package config

import (
	"errors"
	"fmt"
	"net/netip"
)

// parseCIDR parses an admin.sd_allow entry: an IPv4 or IPv6 prefix in CIDR
// notation, without a zone and not an IPv4-mapped IPv6 range (write the
// IPv4 one: the check unmaps addresses first). The host bits are
// dropped (10.1.2.3/8 is 10.0.0.0/8).
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("parse cidr: %w", err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("an IPv4-mapped IPv6 range: write its IPv4 range")
	}
	return p.Masked(), nil
}

// SDAllowPrefixes returns admin.sd_allow parsed (Validate has checked
// every entry; one that does not parse is left out).
func (c *Config) SDAllowPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(c.Admin.SDAllow))
	for _, s := range c.Admin.SDAllow {
		if p, err := parseCIDR(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}
