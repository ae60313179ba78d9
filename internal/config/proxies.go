package config

import (
	"net/netip"
	"strings"
)

// parseTrustedProxy parses one listen.trusted_proxies entry: an IP address
// (a prefix of its full length) or a CIDR prefix, IPv4-mapped IPv6
// unmapped. It refuses a prefix with host bits set ("10.0.0.1/8"), which
// usually means a typo.
func parseTrustedProxy(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			return netip.Prefix{}, false
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			return netip.PrefixFrom(a.Unmap(), p.Bits()-96), true
		}
		return p, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// TrustedProxyPrefixes returns listen.trusted_proxies parsed; valid after
// Parse (entries that do not parse are left out).
func (l Listen) TrustedProxyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range l.TrustedProxies {
		if p, ok := parseTrustedProxy(s); ok {
			out = append(out, p)
		}
	}
	return out
}

// checkTrustedProxies reports the listen.trusted_proxies entries that are
// neither an IP address nor a CIDR prefix.
func checkTrustedProxies(c *Config, probs *Problems) {
	for i, s := range c.Listen.TrustedProxies {
		if _, ok := parseTrustedProxy(s); !ok {
			probs.addf(joinIndex("listen.trusted_proxies", i),
				"must be an IP address (10.0.0.7) or a CIDR prefix without host bits (10.0.0.0/8, fd00::/8), got %q", s)
		}
	}
}
