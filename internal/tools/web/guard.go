package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to network address addr ("203.0.113.7:443"); the address has
// been checked when it is called. net.Dialer.DialContext is one.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// nonPublic are the ranges web_fetch refuses beyond what netip's predicates name: ranges
// that are shared, reserved or reach the worker's own network by other routes.
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
}

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4 address in their low bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// addrRefusal says why web_fetch must not connect to a, or "" when a is public.
func addrRefusal(a netip.Addr) string {
	a = a.Unmap() // ::ffff:10.0.0.1 is 10.0.0.1
	if nat64.Contains(a) {
		b := a.As16()
		if r := addrRefusal(netip.AddrFrom4([4]byte(b[12:]))); r != "" {
			return r + " (through NAT64)"
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
		if a == netip.AddrFrom4([4]byte{169, 254, 169, 254}) {
			return "the cloud metadata address"
		}
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	if a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "the broadcast address"
	}
	for _, n := range nonPublic {
		if n.prefix.Contains(a) {
			return n.reason
		}
	}
	return ""
}

// refusedAddrError is a connection web_fetch refused to open: the address is not public.
type refusedAddrError struct {
	host   string
	addr   netip.Addr
	reason string
}

func (e *refusedAddrError) Error() string {
	if e.host == "" || e.host == e.addr.String() {
		return fmt.Sprintf("%s is %s", e.addr, e.reason)
	}
	return fmt.Sprintf("%s resolves to %s, %s", e.host, e.addr, e.reason)
}

// lookupError is a host name that did not resolve.
type lookupError struct {
	host string
	err  error
}

func (e *lookupError) Error() string { return fmt.Sprintf("could not resolve %s: %v", e.host, e.err) }
func (e *lookupError) Unwrap() error { return e.err }

// guard decides which addresses web_fetch may connect to.
type guard struct {
	allowPrivate bool
	// publicForTest is treated as public: tests serve from 127.0.0.1 and still exercise the
	// refusal of every other address. Never set outside tests.
	publicForTest netip.Addr
}

func (g guard) refusal(a netip.Addr) string {
	if g.allowPrivate || (g.publicForTest.IsValid() && a == g.publicForTest) {
		return ""
	}
	return addrRefusal(a)
}

// safeDialer resolves a host itself and checks every address it gets before it dials one, so
// the check holds for the address actually connected to: a name that resolves to a private
// address, a rebinding DNS server and a redirect to such a name are all caught here.
type safeDialer struct {
	guard    guard
	resolver Resolver
	dial     DialFunc
}

func (d safeDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := net.LookupPort(network, portText)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = d.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, &lookupError{host: host, err: err}
		}
		if len(addrs) == 0 {
			return nil, &lookupError{host: host, err: errors.New("no addresses")}
		}
	}
	// One refused address refuses the name: a name that mixes public and private addresses
	// is how rebinding attacks are set up, and trying only the public ones would make the
	// outcome depend on the order of the answer.
	for _, a := range addrs {
		if reason := d.guard.refusal(a); reason != "" {
			return nil, &refusedAddrError{host: host, addr: a.Unmap(), reason: reason}
		}
	}
	var errs []error
	for _, a := range addrs {
		conn, err := d.dial(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// controlCheck is the net.Dialer.Control of the default dial: the last check, on the address
// the socket is about to connect to, whatever resolved it.
func (g guard) controlCheck(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("web_fetch: unexpected dial address %q", address)
	}
	if reason := g.refusal(ap.Addr()); reason != "" {
		return &refusedAddrError{addr: ap.Addr().Unmap(), reason: reason}
	}
	return nil
}
