package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRefusal(t *testing.T) {
	t.Parallel()
	tests := []struct{ addr, want string }{
		{"127.0.0.1", "a loopback address"},
		{"127.0.0.2", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"10.0.0.1", "a private address"},
		{"10.255.255.255", "a private address"},
		{"172.16.5.4", "a private address"},
		{"172.31.255.255", "a private address"},
		{"192.168.0.10", "a private address"},
		{"::ffff:10.1.1.1", "a private address"},
		{"fd12:3456::1", "a private address"},
		{"fc00::1", "a private address"},
		{"169.254.169.254", "the cloud metadata address"},
		{"::ffff:169.254.169.254", "the cloud metadata address"},
		{"169.254.1.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"100.64.0.1", "a carrier-grade NAT address"},
		{"100.100.100.100", "a carrier-grade NAT address"},
		{"0.0.0.0", "the unspecified address"},
		{"::", "the unspecified address"},
		{"0.1.2.3", "a \"this network\" address"},
		{"224.0.0.1", "a multicast address"},
		{"239.1.2.3", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"255.255.255.255", "the broadcast address"},
		{"198.18.0.1", "a benchmarking address"},
		{"240.0.0.1", "a reserved address"},
		{"192.0.0.8", "an IETF protocol address"},
		{"::a00:1", "an IPv4-compatible address"},
		{"fec0::1", "a site-local address"},
		// NAT64, well-known (RFC 6052) and local-use (RFC 8215): the embedded IPv4 address.
		{"64:ff9b::a00:1", "a private address (through NAT64)"},
		{"64:ff9b::a9fe:a9fe", "the cloud metadata address (through NAT64)"},
		{"64:ff9b:1::a00:1", "a private address (through NAT64)"},
		{"64:ff9b:1:abcd::7f00:1", "a loopback address (through NAT64)"},
		{"64:ff9b:1::a9fe:a9fe", "the cloud metadata address (through NAT64)"},
		// 6to4: the IPv4 address in bits 16 to 47.
		{"2002:a00:1::1", "a private address (through 6to4)"},
		{"2002:7f00:1::", "a loopback address (through 6to4)"},
		{"2002:a9fe:a9fe:1:2:3:4:5", "the cloud metadata address (through 6to4)"},
		{"2002:c0a8:101::", "a private address (through 6to4)"},
		{"2002::1", "the unspecified address (through 6to4)"},
		// Teredo: refused whatever it embeds.
		{"2001::1", "a Teredo address"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "a Teredo address"},
		{"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "a Teredo address"},
		// Public.
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"11.0.0.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.32.0.1", ""},
		{"::ffff:8.8.8.8", ""},
		{"2606:2800:220:1:248:1893:25c8:1946", ""},
		{"2001:4860:4860::8888", ""}, // 2001:4860::/32, not Teredo's 2001::/32
		{"2001:1::1", ""},
		{"64:ff9b::808:808", ""},
		{"64:ff9b:1::808:808", ""},
		{"64:ff9b:2::a00:1", ""}, // outside both NAT64 prefixes
		{"2002:808:808::1", ""},
		{"2003::1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Refusal(netip.MustParseAddr(tt.addr)))
		})
	}
	require.Equal(t, "not an IP address", Refusal(netip.Addr{}))
}

func TestCheckLiteral(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		host    string
		wantErr string
	}{
		{name: "a private address", host: "10.1.2.3", wantErr: "10.1.2.3 is a private address"},
		{name: "bracketed IPv6", host: "[::1]", wantErr: "::1 is a loopback address"},
		{name: "unbracketed IPv6", host: "fe80::1", wantErr: "fe80::1 is a link-local address"},
		{name: "mapped: named unmapped", host: "[::ffff:a9fe:a9fe]", wantErr: "169.254.169.254 is the cloud metadata address"},
		{name: "6to4", host: "[2002:a00:1::1]", wantErr: "2002:a00:1::1 is a private address (through 6to4)"},
		{name: "a public address", host: "93.184.216.34"},
		{name: "a host name is left to the dial", host: "localhost"},
		{name: "private networks allowed", cfg: Config{AllowPrivateNetworks: true}, host: "10.1.2.3"},
		{name: "an allowed prefix", cfg: Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, host: "10.1.2.3"},
		{name: "outside the allowed prefix", cfg: Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, host: "10.2.0.1", wantErr: "10.2.0.1 is a private address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.CheckLiteral(tt.host)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			require.ErrorIs(t, err, ErrRefused)
		})
	}
}

// fakeResolver answers from a table; other names do not exist.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// dialLog records the addresses it is asked to dial and connects to none.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(_ context.Context, _, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, addr)
	return nil, fmt.Errorf("test dialer: not dialling %s", addr)
}

func TestDialContext(t *testing.T) {
	t.Parallel()
	resolver := fakeResolver{
		"evil.test":      {netip.MustParseAddr("10.0.0.1")},
		"mixed.test":     {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.1")},
		"mapped.test":    {netip.MustParseAddr("::ffff:169.254.169.254")},
		"sixtofour.test": {netip.MustParseAddr("2002:a9fe:a9fe::1")},
		"public.test":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800::1")},
		"empty.test":     {},
	}
	tests := []struct {
		name       string
		cfg        Config
		addr       string
		wantErr    string
		wantRefuse bool
		wantDialed []string
	}{
		{name: "a name resolving to a private address", addr: "evil.test:80", wantErr: "evil.test resolves to 10.0.0.1, a private address", wantRefuse: true},
		{name: "one private address refuses the name", addr: "mixed.test:443", wantErr: "mixed.test resolves to 192.168.1.1, a private address", wantRefuse: true},
		{name: "mapped metadata", addr: "mapped.test:80", wantErr: "mapped.test resolves to 169.254.169.254, the cloud metadata address", wantRefuse: true},
		{name: "6to4 metadata", addr: "sixtofour.test:80", wantErr: "the cloud metadata address (through 6to4)", wantRefuse: true},
		{name: "a literal address", addr: "127.0.0.1:8080", wantErr: "127.0.0.1 is a loopback address", wantRefuse: true},
		{name: "a name that does not resolve", addr: "nowhere.test:80", wantErr: "could not resolve nowhere.test: lookup nowhere.test: no such host"},
		{name: "a name without addresses", addr: "empty.test:80", wantErr: "could not resolve empty.test: no addresses"},
		{name: "a named port", addr: "public.test:https", wantErr: "not dialling",
			wantDialed: []string{"93.184.216.34:443", "[2606:2800::1]:443"}},
		{name: "private networks allowed", cfg: Config{AllowPrivateNetworks: true}, addr: "mixed.test:80", wantErr: "not dialling",
			wantDialed: []string{"93.184.216.34:80", "192.168.1.1:80"}},
		{name: "an allowed prefix", cfg: Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, addr: "evil.test:80", wantErr: "not dialling",
			wantDialed: []string{"10.0.0.1:80"}},
		{name: "not host:port", addr: "evil.test", wantErr: "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log := &dialLog{}
			tt.cfg.Resolver, tt.cfg.Dial = resolver, log.dial
			conn, err := tt.cfg.DialContext(t.Context(), "tcp", tt.addr)
			require.Nil(t, conn)
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, tt.wantRefuse, errors.Is(err, ErrRefused))
			require.Equal(t, tt.wantDialed, log.addrs)
		})
	}
}

// The default dial checks the address once more on the socket itself (net.Dialer.Control),
// whatever resolved it.
func TestControlChecksTheSocketAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg     Config
		addr    string
		wantErr string
	}{
		{addr: "10.0.0.1:80", wantErr: "10.0.0.1 is a private address"},
		{addr: "[::ffff:a9fe:a9fe]:80", wantErr: "169.254.169.254 is the cloud metadata address"},
		{addr: "127.0.0.1:8080", wantErr: "127.0.0.1 is a loopback address"},
		{addr: "[2001::1]:80", wantErr: "2001::1 is a Teredo address"},
		{addr: "93.184.216.34:443"},
		{addr: "[2606:2800::1]:443"},
		{addr: "not an address", wantErr: "unexpected dial address"},
		{cfg: Config{AllowPrivateNetworks: true}, addr: "10.0.0.1:80"},
	}
	for _, tt := range tests {
		err := tt.cfg.control("tcp", tt.addr, nil)
		if tt.wantErr == "" {
			require.NoError(t, err, tt.addr)
			continue
		}
		require.ErrorContains(t, err, tt.wantErr, tt.addr)
	}
}

// Through the default dialer and the transport: a server on 127.0.0.1 is refused unless
// allowed, and the environment's proxy is never used.
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	t.Cleanup(srv.Close)
	t.Setenv("HTTP_PROXY", "http://10.9.9.9:3128")
	t.Setenv("http_proxy", "http://10.9.9.9:3128")

	get := func(cfg Config) error {
		tr := cfg.Transport()
		defer tr.CloseIdleConnections()
		require.Nil(t, tr.Proxy)
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return nil
	}
	err := get(Config{})
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorContains(t, err, "127.0.0.1 is a loopback address")
	require.NoError(t, get(Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))
	require.NoError(t, get(Config{AllowPrivateNetworks: true}))
}
