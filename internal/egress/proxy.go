// Package egress is the allowlisting egress proxy of sandboxes (`managed-agents
// egress-proxy`): HTTP CONNECT tunnels and plain-HTTP forwarding, each only to a host the
// sandbox's policy allows, on an allowed port.
//
// The proxy keeps no state: every request carries the sandbox's policy in its
// Proxy-Authorization credentials, signed with the deployment's key (Credentials, Verify).
// A refused request gets a 403 whose status line and body say which host was refused and
// why, so that a tool in the sandbox (curl, pip, git) shows the reason; every refusal is
// logged.
//
// Host names are matched as environments list them (package hostpattern). An IP literal is
// allowed only when listed as such. Whatever a name resolves to, loopback, link-local
// (cloud metadata services live there), multicast and unspecified addresses are never
// dialled: the proxy must not become a way into its own host.
//
// The package imports only the standard library and hostpattern.
package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/managed-agents/managed-agents/internal/hostpattern"
)

// DefaultPorts are the destination ports allowed when the configuration names none: HTTP
// and HTTPS. An allowed_hosts entry names a host, not a service; other ports (SSH on 22,
// a database) would turn the proxy into a general tunnel to that host.
var DefaultPorts = []int{80, 443}

// Defaults of Config.
const (
	DefaultMaxHeaderBytes        = 16 << 10
	DefaultMaxConns              = 1024
	DefaultMaxConnsPerClient     = 64
	DefaultReadHeaderTimeout     = 10 * time.Second
	DefaultDialTimeout           = 10 * time.Second
	DefaultResponseHeaderTimeout = 60 * time.Second
	DefaultIdleTimeout           = 5 * time.Minute
)

// Config configures a Proxy.
type Config struct {
	// Key signs sandbox credentials (at least MinKeyBytes).
	Key []byte
	// Ports are the allowed destination ports (default DefaultPorts).
	Ports []int
	// MaxHeaderBytes bounds a request's header (default DefaultMaxHeaderBytes); a larger
	// one gets 431.
	MaxHeaderBytes int
	// MaxConns bounds concurrent client connections, tunnels included (default
	// DefaultMaxConns); further clients wait to be accepted.
	MaxConns int
	// MaxConnsPerClient bounds the connections of one client address, one sandbox (default
	// DefaultMaxConnsPerClient); a client over it gets 429 and its connection is closed.
	MaxConnsPerClient int
	// ReadHeaderTimeout, DialTimeout and ResponseHeaderTimeout (plain HTTP) bound each step;
	// IdleTimeout ends a tunnel or a kept-alive client connection nothing moved on for that long.
	ReadHeaderTimeout, DialTimeout, ResponseHeaderTimeout, IdleTimeout time.Duration
	// Dial connects to upstreams; nil is a dialer that refuses loopback, link-local,
	// multicast and unspecified addresses. Tests point names at their own listeners.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
}

// Proxy is the egress proxy's handler; Serve runs it on a listener.
type Proxy struct {
	cfg     Config
	ports   []int
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	forward *httputil.ReverseProxy
	logger  *slog.Logger
}

// New checks cfg and returns a proxy.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Key) < MinKeyBytes {
		return nil, fmt.Errorf("egress proxy: the key has %d bytes, at least %d are needed", len(cfg.Key), MinKeyBytes)
	}
	ports := DefaultPorts
	if len(cfg.Ports) > 0 {
		ports = slices.Compact(slices.Sorted(slices.Values(cfg.Ports)))
	}
	for _, port := range ports {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("egress proxy: port %d is not a TCP port", port)
		}
	}
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)
	cfg.MaxConns = cmp.Or(cfg.MaxConns, DefaultMaxConns)
	cfg.MaxConnsPerClient = cmp.Or(cfg.MaxConnsPerClient, DefaultMaxConnsPerClient)
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	cfg.DialTimeout = cmp.Or(cfg.DialTimeout, DefaultDialTimeout)
	cfg.ResponseHeaderTimeout = cmp.Or(cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	p := &Proxy{cfg: cfg, ports: ports, dial: cfg.Dial, logger: cmp.Or(cfg.Logger, slog.Default())}
	if p.dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout, Control: refuseInternal}
		p.dial = d.DialContext
	}
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The Host header is the URL's, the one the policy was checked against.
			pr.Out.Host = ""
		},
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           p.dialTimeout,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
			// Plain HTTP only: HTTPS goes through CONNECT, end to end encrypted.
			ForceAttemptHTTP2: false,
		},
		ErrorHandler: p.upstreamError,
		ErrorLog:     slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// blockedAddr is a resolved address the proxy never dials.
type blockedAddr struct {
	addr       netip.Addr
	sandboxNet bool // on a sandbox network of the proxy's
}

func (b *blockedAddr) Error() string {
	if b.sandboxNet {
		return fmt.Sprintf("it resolves to %s, an address on a sandbox network, which sandboxes may never reach through the proxy", b.addr)
	}
	return fmt.Sprintf("it resolves to %s, a %s address the sandbox may never reach", b.addr, addrKind(b.addr))
}

func addrKind(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	}
	return "multicast"
}

// refuseInternal runs on every resolved address just before it is dialled.
func refuseInternal(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	a := ap.Addr().Unmap()
	if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() {
		return &blockedAddr{addr: a}
	}
	if slices.ContainsFunc(sandboxSubnets(), func(p netip.Prefix) bool { return p.Contains(a) }) {
		return &blockedAddr{addr: a, sandboxNet: true}
	}
	return nil
}

// sandboxSubnets are the subnets of the proxy's interfaces other than its way out (the one
// holding the default route): the sandboxes' own networks. Without this check a sandbox
// could name another sandbox (its address, or its container name, which the engine's DNS
// resolves for the proxy) in its allowed_hosts and reach it through the proxy, defeating
// the network per session. It is read at every dial, as networks are attached while the
// proxy runs; on a system without /proc/net/route every interface counts as a way out.
func sandboxSubnets() []netip.Prefix {
	route, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	out := defaultRouteIfaces(string(route))
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var subnets []netip.Prefix
	for _, ifc := range ifaces {
		if out[ifc.Name] || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if p, err := netip.ParsePrefix(n.String()); err == nil {
					subnets = append(subnets, p.Masked())
				}
			}
		}
	}
	return subnets
}

// defaultRouteIfaces reads /proc/net/route's text: the interfaces with a default route
// (destination and mask 00000000).
func defaultRouteIfaces(route string) map[string]bool {
	out := map[string]bool{}
	for i, line := range strings.Split(route, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 {
			continue
		}
		if f[1] == "00000000" && f[7] == "00000000" {
			out[f[0]] = true
		}
	}
	return out
}

func (p *Proxy) dialTimeout(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	return p.dial(ctx, network, addr)
}

// target is what a request asks to reach.
type target struct {
	policy Policy
	host   string
	port   int
}

func (t target) String() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

type targetKey struct{}

// ServeHTTP implements http.Handler: /healthz, CONNECT tunnels and absolute-URL requests.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect && !r.URL.IsAbs() {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		p.fail(w, http.StatusBadRequest, "Not a proxy request",
			"this is the sandbox egress proxy: send requests with an absolute http:// URL, or CONNECT host:port for https\n", nil)
		return
	}
	policy, ok := p.authenticate(w, r)
	if !ok {
		return
	}
	t, ok := p.target(w, r, policy)
	if !ok {
		return
	}
	if why := p.check(t); why != "" {
		p.refuse(w, r, t, why)
		return
	}
	p.logger.DebugContext(r.Context(), "egress allowed", "sandbox", policy.Sandbox, "host", t.host, "port", t.port, "method", r.Method)
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, t)
		return
	}
	p.forward.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// authenticate returns the policy the request's credentials carry, or answers 407.
func (p *Proxy) authenticate(w http.ResponseWriter, r *http.Request) (Policy, bool) {
	challenge := map[string]string{"Proxy-Authenticate": `Basic realm="managed-agents sandbox egress"`}
	auth := r.Header.Get("Proxy-Authorization")
	if auth == "" {
		p.logger.WarnContext(r.Context(), "egress refused: no proxy credentials", "remote", r.RemoteAddr, "method", r.Method, "target", r.Host)
		p.fail(w, http.StatusProxyAuthRequired, "Proxy authentication required",
			"the sandbox egress proxy needs the credentials of the sandbox's HTTP_PROXY/HTTPS_PROXY variables\n", challenge)
		return Policy{}, false
	}
	// Proxy-Authorization has the shape of Authorization; the request parses it the same way.
	user, password, ok := (&http.Request{Header: http.Header{"Authorization": {auth}}}).BasicAuth()
	policy, err := Verify(p.cfg.Key, user, password)
	if !ok || err != nil {
		p.logger.WarnContext(r.Context(), "egress refused: invalid proxy credentials", "remote", r.RemoteAddr, "method", r.Method, "target", r.Host)
		p.fail(w, http.StatusProxyAuthRequired, "Invalid proxy credentials",
			"the sandbox egress proxy refused these credentials (they are not the sandbox's own)\n", challenge)
		return Policy{}, false
	}
	if policy.Client.IsValid() && !policy.Client.Contains(remoteAddr(r)) {
		p.logger.WarnContext(r.Context(), "egress refused: proxy credentials used from outside their sandbox's network",
			"remote", r.RemoteAddr, "sandbox", policy.Sandbox, "method", r.Method, "target", r.Host)
		p.fail(w, http.StatusProxyAuthRequired, "Invalid proxy credentials",
			"the sandbox egress proxy refused these credentials (they are not the sandbox's own)\n", challenge)
		return Policy{}, false
	}
	return policy, true
}

// remoteAddr is the client's address (the zero Addr, contained in no prefix, if unparsable).
func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// target parses where the request goes, or answers 400.
func (p *Proxy) target(w http.ResponseWriter, r *http.Request, policy Policy) (target, bool) {
	var host, port string
	if r.Method == http.MethodConnect {
		var err error
		if host, port, err = net.SplitHostPort(r.Host); err != nil || port == "" {
			p.fail(w, http.StatusBadRequest, "Bad CONNECT target", fmt.Sprintf("CONNECT needs host:port, not %q\n", r.Host), nil)
			return target{}, false
		}
	} else {
		if r.URL.Scheme != "http" {
			p.fail(w, http.StatusBadRequest, "Use CONNECT for https",
				fmt.Sprintf("the egress proxy forwards http:// URLs only; %s:// goes through CONNECT (set HTTPS_PROXY)\n", r.URL.Scheme), nil)
			return target{}, false
		}
		host, port = r.URL.Hostname(), cmp.Or(r.URL.Port(), "80")
	}
	host = hostpattern.Normalize(host)
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || !hostpattern.ValidHost(host) {
		p.fail(w, http.StatusBadRequest, "Bad target", fmt.Sprintf("%q is not a host name and port the egress proxy can reach\n", net.JoinHostPort(host, port)), nil)
		return target{}, false
	}
	return target{policy: policy, host: host, port: n}, true
}

// check says why t is refused, or "".
func (p *Proxy) check(t target) string {
	if !slices.Contains(p.ports, t.port) {
		return fmt.Sprintf("port %d is not allowed (allowed ports: %s)", t.port, joinInts(p.ports))
	}
	if hostpattern.MatchAny(t.policy.Hosts, t.host) {
		return ""
	}
	if _, err := netip.ParseAddr(t.host); err == nil {
		return fmt.Sprintf("%s is an IP address, and IP addresses are allowed only when listed (allowed hosts: %s)", t.host, allowedList(t.policy.Hosts))
	}
	return fmt.Sprintf("%s is not an allowed host (allowed hosts: %s)", t.host, allowedList(t.policy.Hosts))
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// maxListed bounds the allowed hosts a refusal names.
const maxListed = 10

func allowedList(hosts []string) string {
	switch {
	case len(hosts) == 0:
		return "none"
	case len(hosts) > maxListed:
		return strings.Join(hosts[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(hosts)-maxListed)
	}
	return strings.Join(hosts, ", ")
}

// refuse answers 403 naming the host and why, in the status line (curl -v, Python's
// "Tunnel connection failed: 403 …") and the body (what curl prints for plain HTTP), and
// logs it.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, t target, why string) {
	p.logger.WarnContext(r.Context(), "egress refused", "sandbox", t.policy.Sandbox, "host", t.host, "port", t.port,
		"method", r.Method, "reason", why, "remote", r.RemoteAddr)
	p.fail(w, http.StatusForbidden, fmt.Sprintf("Egress to %s refused by the sandbox allowlist", t.host),
		fmt.Sprintf("egress to %s refused by the sandbox allowlist: %s\n", t, why),
		map[string]string{"X-Egress-Refused": why})
}

// fail writes a final response with its own reason phrase (net/http writes only the
// standard one) and closes the connection: a refused client starts over anyway.
func (p *Proxy) fail(w http.ResponseWriter, status int, reason, body string, header map[string]string) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		http.Error(w, strings.TrimSuffix(body, "\n"), status)
		return
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(p.cfg.ReadHeaderTimeout))
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\n", status, reason)
	for _, k := range slices.Sorted(maps.Keys(header)) {
		fmt.Fprintf(brw, "%s: %s\r\n", k, header[k])
	}
	fmt.Fprintf(brw, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_ = brw.Flush()
}

// upstreamError answers a plain-HTTP request whose upstream could not be reached.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(target)
	p.dialFailed(w, r, t, err)
}

func (p *Proxy) dialFailed(w http.ResponseWriter, r *http.Request, t target, err error) {
	var blocked *blockedAddr
	var netErr net.Error
	switch {
	case errors.As(err, &blocked):
		p.refuse(w, r, t, blocked.Error())
	case errors.As(err, &netErr) && netErr.Timeout():
		p.logger.WarnContext(r.Context(), "egress upstream timed out", "sandbox", t.policy.Sandbox, "target", t.String(), "error", err)
		p.fail(w, http.StatusGatewayTimeout, "Upstream timed out", fmt.Sprintf("the egress proxy timed out reaching %s\n", t), nil)
	default:
		p.logger.WarnContext(r.Context(), "egress upstream unreachable", "sandbox", t.policy.Sandbox, "target", t.String(), "error", err)
		p.fail(w, http.StatusBadGateway, "Upstream unreachable", fmt.Sprintf("the egress proxy could not reach %s: %v\n", t, err), nil)
	}
}

// tunnel dials t and relays bytes both ways until either side ends or nothing moves for
// the idle timeout.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, t target) {
	upstream, err := p.dialTimeout(r.Context(), "tcp", t.String())
	if err != nil {
		p.dialFailed(w, r, t, err)
		return
	}
	defer upstream.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "the egress proxy cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	defer client.Close()
	_ = client.SetDeadline(time.Time{}) // the server's header deadlines no longer apply
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	// brw.Reader may already hold bytes the client sent right after its CONNECT.
	go func() { p.relay(upstream, brw.Reader, client, &last); closeWrite(upstream); done <- struct{}{} }()
	go func() { p.relay(client, upstream, upstream, &last); closeWrite(client); done <- struct{}{} }()
	<-done
	<-done
}

// relay copies src (read through r) to dst, extending the read deadline while either
// direction moved within the idle timeout.
func (p *Proxy) relay(dst io.Writer, r io.Reader, src net.Conn, last *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		_ = src.SetReadDeadline(time.Unix(0, last.Load()).Add(p.cfg.IdleTimeout))
		n, err := r.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		var netErr net.Error
		switch {
		case err == nil:
		case errors.As(err, &netErr) && netErr.Timeout() && time.Since(time.Unix(0, last.Load())) < p.cfg.IdleTimeout:
			// The other direction moved: not idle yet.
		default:
			return
		}
	}
}

// closeWrite half-closes c where it can (the peer sees EOF but may still answer), else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// Serve runs the proxy on ln until ctx ends, then closes every connection, tunnels included.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	lim := newLimitListener(ln, p.cfg.MaxConns, p.cfg.MaxConnsPerClient)
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: p.cfg.ReadHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    p.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		_ = srv.Close()
		lim.closeAll()
	}()
	err := srv.Serve(lim)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return fmt.Errorf("egress proxy: %w", err)
}
