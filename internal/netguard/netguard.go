// Package netguard keeps the worker's outbound HTTP off its own network: web_fetch and the MCP
// client connect to URLs a model or an agent's author chose, and a URL that names (or resolves
// to, or redirects to) a loopback, private, link-local or cloud metadata address would let them
// read what only the cluster should reach.
//
// The check is made where it cannot be dodged: in the dialer, on the addresses the guard
// resolved itself, and once more on the socket's address (net.Dialer.Control). Checking a
// URL's host name before the request would miss DNS rebinding and redirects.
//
// It imports the standard library only, so every client of the worker can use it.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to network address addr ("203.0.113.7:443"); the address has
// been checked when it is called. net.Dialer.DialContext is one.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ErrRefused is the errors.Is target of a connection refused because its address is not
// public; the error itself is a *RefusedError.
var ErrRefused = errors.New("address refused: not a public address")

// RefusedError is a connection the guard refused to open.
type RefusedError struct {
	Host   string     // the host name asked for; "" when only the address is known
	Addr   netip.Addr // the address refused, IPv4-mapped addresses unmapped
	Reason string     // what the address is, as Refusal says
}

func (e *RefusedError) Error() string {
	if e.Host == "" || e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is %s", e.Addr, e.Reason)
	}
	return fmt.Sprintf("%s resolves to %s, %s", e.Host, e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Config is a guarded dialer. The zero value refuses every non-public address, resolves with
// net.DefaultResolver and dials with a net.Dialer.
type Config struct {
	// AllowPrivateNetworks turns the guard off: for a deployment whose agents are meant to
	// reach its intranet.
	AllowPrivateNetworks bool
	// Allow lists addresses connected to although they are not public: one internal service a
	// deployment means to expose, or the loopback address a test serves from.
	Allow []netip.Prefix
	// Resolver resolves host names (nil: net.DefaultResolver).
	Resolver Resolver
	// Dial connects to a checked address (nil: a net.Dialer that checks the socket's address
	// once more). Tests inject one that never leaves the machine.
	Dial DialFunc
	// DialTimeout bounds the default dial (0: 30s); a Dial of the caller's own sets its own.
	DialTimeout time.Duration
}

const defaultDialTimeout = 30 * time.Second

// refusal is Refusal under the configuration: "" when c lets the worker connect to a.
func (c Config) refusal(a netip.Addr) string {
	if c.AllowPrivateNetworks {
		return ""
	}
	a = a.Unmap()
	for _, p := range c.Allow {
		if p.Contains(a) {
			return ""
		}
	}
	return Refusal(a)
}

// CheckLiteral refuses a URL host that is a literal IP address ("10.0.0.1", "::1", with or
// without brackets) that c does not allow, before any connection: the dial would refuse it
// too, but the error can then name the URL. A host name is not checked here (nil); its
// addresses are, when it is dialled.
func (c Config) CheckLiteral(host string) error {
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	if reason := c.refusal(a); reason != "" {
		return &RefusedError{Addr: a.Unmap(), Reason: reason}
	}
	return nil
}

// DialContext resolves the host of address itself and checks every address it gets before it
// dials one, so the check holds for the address actually connected to: a name that resolves
// to a private address, a rebinding DNS server and a redirect to such a name are all caught
// here. A lookup failure comes back as "could not resolve HOST: ...".
func (c Config) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
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
		resolver := c.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		addrs, err = resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("could not resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("could not resolve %s: no addresses", host)
		}
	}
	// One refused address refuses the name: a name that mixes public and private addresses
	// is how rebinding attacks are set up, and trying only the public ones would make the
	// outcome depend on the order of the answer.
	for _, a := range addrs {
		if reason := c.refusal(a); reason != "" {
			return nil, &RefusedError{Host: host, Addr: a.Unmap(), Reason: reason}
		}
	}
	dial := c.Dial
	if dial == nil {
		timeout := c.DialTimeout
		if timeout <= 0 {
			timeout = defaultDialTimeout
		}
		d := &net.Dialer{Timeout: timeout, Control: c.control}
		dial = d.DialContext
	}
	var errs []error
	for _, a := range addrs {
		conn, err := dial(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
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

// control is the net.Dialer.Control of the default dial: the last check, on the address the
// socket is about to connect to, whatever resolved it.
func (c Config) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: unexpected dial address %q", address)
	}
	if reason := c.refusal(ap.Addr()); reason != "" {
		return &RefusedError{Addr: ap.Addr().Unmap(), Reason: reason}
	}
	return nil
}

// Transport is an HTTP transport that dials through c. It ignores the environment's proxy
// settings: a proxy would connect on the worker's behalf, past the check. Callers bound a
// request with its context and may tune the timeouts of the copy they get.
func (c Config) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           c.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
}
