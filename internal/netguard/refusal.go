package netguard

import "net/netip"

// nonPublic are the ranges refused beyond what netip's predicates name: ranges that are
// shared, reserved or reach the worker's own network by other routes.
var nonPublic = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	// Teredo tunnels to whatever IPv4 host the relay is told to, the server and client
	// addresses obfuscated: no check of the embedded address is worth trusting.
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
}

// IPv6 ranges whose addresses reach an IPv4 address embedded in them: refused when that
// address would be. The NAT64 prefixes embed it in their low 32 bits (RFC 6052's /96 form,
// the one DNS64 deployments use); 6to4 in bits 16 to 47 (RFC 3056).
var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUse = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour     = netip.MustParsePrefix("2002::/16")
)

var (
	metadata  = netip.AddrFrom4([4]byte{169, 254, 169, 254})
	broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// Refusal says why the worker must not connect to a, or "" when a is public. IPv4-mapped
// addresses are judged as the IPv4 address they map.
func Refusal(a netip.Addr) string {
	a = a.Unmap() // ::ffff:10.0.0.1 is 10.0.0.1
	if a.Is6() {
		b := a.As16()
		var embedded netip.Addr
		var via string
		switch {
		case nat64.Contains(a), nat64LocalUse.Contains(a):
			embedded, via = netip.AddrFrom4([4]byte(b[12:16])), "NAT64"
		case sixToFour.Contains(a):
			embedded, via = netip.AddrFrom4([4]byte(b[2:6])), "6to4"
		}
		if embedded.IsValid() {
			if r := Refusal(embedded); r != "" {
				return r + " (through " + via + ")"
			}
		}
	}
	switch {
	case !a.IsValid():
		return "not an IP address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast():
		if a == metadata {
			return "the cloud metadata address"
		}
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a == broadcast:
		return "the broadcast address"
	}
	for _, n := range nonPublic {
		if n.prefix.Contains(a) {
			return n.reason
		}
	}
	return ""
}
