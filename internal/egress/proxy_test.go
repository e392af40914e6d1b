package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/egress"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// logs collects the proxy's log lines.
type logs struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type fixture struct {
	addr string // the proxy's host:port
	logs *logs
	// seen is the last request an upstream received.
	mu   sync.Mutex
	seen *http.Request
	tls  *httptest.Server
}

func (f *fixture) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

// newFixture starts a plain and a TLS upstream on 127.0.0.1 and a proxy whose dialer sends
// every name in names to them (port 443 to the TLS one), so that host matching is tested on
// real connections without any name resolving anywhere.
func newFixture(t testing.TB, cfg egress.Config, names ...string) *fixture {
	t.Helper()
	f := &fixture{logs: &logs{}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = r
		f.mu.Unlock()
		fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
	})
	plain := httptest.NewServer(handler)
	t.Cleanup(plain.Close)
	f.tls = httptest.NewTLSServer(handler)
	t.Cleanup(f.tls.Close)
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	if cfg.Dial == nil {
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if !known[host] {
				return nil, fmt.Errorf("test dialer: %s is not a test upstream", host)
			}
			to := plain.Listener.Addr().String()
			if port == "443" {
				to = f.tls.Listener.Addr().String()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, to)
		}
	}
	cfg.Key = testKey
	cfg.Logger = slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := egress.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-served)
	})
	f.addr = ln.Addr().String()
	return f
}

// client is an HTTP client that uses the proxy with the credentials of policy.
func (f *fixture) client(t testing.TB, user, password string) *http.Client {
	t.Helper()
	tr := f.tls.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword(user, password), Host: f.addr})
	// httptest's certificate names example.com; every test name is dialled to it.
	tr.TLSClientConfig.ServerName = "example.com"
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (f *fixture) policyClient(t testing.TB, hosts ...string) *http.Client {
	user, password := egress.Credentials(testKey, egress.Policy{Sandbox: "ma-test", Hosts: hosts})
	return f.client(t, user, password)
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestPlainHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test", "other.test", "a.b.wild.test", "wild.test", "10.1.2.3")
	c := f.policyClient(t, "allowed.test", "*.wild.test", "10.1.2.3")

	resp, body := get(t, c, "http://allowed.test/path")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "hello from allowed.test/path", body)
	require.Empty(t, f.last().Header.Get("Proxy-Authorization"), "the credentials stay with the proxy")

	resp, body = get(t, c, "http://a.b.wild.test/x")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a wildcard matches several labels deep")
	require.Equal(t, "hello from a.b.wild.test/x", body)

	resp, _ = get(t, c, "http://10.1.2.3/")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a listed IP literal")

	for _, tc := range []struct{ url, why string }{
		{"http://other.test/", "egress to other.test:80 refused by the sandbox allowlist: other.test is not an allowed host (allowed hosts: allowed.test, *.wild.test, 10.1.2.3)\n"},
		{"http://wild.test/", "egress to wild.test:80 refused by the sandbox allowlist: wild.test is not an allowed host (allowed hosts: allowed.test, *.wild.test, 10.1.2.3)\n"},
		{"http://allowed.test:8080/", "egress to allowed.test:8080 refused by the sandbox allowlist: port 8080 is not allowed (allowed ports: 80, 443)\n"},
		{"http://10.9.9.9/", "egress to 10.9.9.9:80 refused by the sandbox allowlist: 10.9.9.9 is an IP address, and IP addresses are allowed only when listed (allowed hosts: allowed.test, *.wild.test, 10.1.2.3)\n"},
	} {
		resp, body := get(t, c, tc.url)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, tc.url)
		require.Equal(t, tc.why, body, tc.url)
		host := strings.TrimSuffix(strings.TrimPrefix(tc.url, "http://"), "/")
		host, _, _ = strings.Cut(host, ":")
		require.Equal(t, "403 Egress to "+host+" refused by the sandbox allowlist", resp.Status)
		require.NotEmpty(t, resp.Header.Get("X-Egress-Refused"))
	}
	require.Contains(t, f.logs.String(), `msg="egress refused" sandbox=ma-test host=other.test port=80`, "every refusal is logged")
	require.Contains(t, f.logs.String(), `host=wild.test`)
}

func TestConnect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test", "other.test", "x.wild.test")
	c := f.policyClient(t, "allowed.test", "*.wild.test")

	resp, body := get(t, c, "https://allowed.test/secure")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "hello from allowed.test/secure", body, "TLS end to end through the tunnel")
	resp, _ = get(t, c, "https://x.wild.test/")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err := c.Get("https://other.test/")
	require.ErrorContains(t, err, "Egress to other.test refused by the sandbox allowlist", "Go's client shows the reason phrase")

	user, password := egress.Credentials(testKey, egress.Policy{Sandbox: "ma-test", Hosts: []string{"allowed.test"}})
	resp = connect(t, f.addr, "other.test:443", basic(user, password))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "403 Egress to other.test refused by the sandbox allowlist", resp.Status)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "egress to other.test:443 refused by the sandbox allowlist: other.test is not an allowed host (allowed hosts: allowed.test)\n", string(b))

	resp = connect(t, f.addr, "allowed.test:22", basic(user, password))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "only the allowed ports")
	resp = connect(t, f.addr, "allowed.test", basic(user, password))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "CONNECT needs a port")
}

// connect sends one raw CONNECT and returns the answer.
func connect(t *testing.T, proxy, target, auth string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", proxy)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	_, err = io.WriteString(conn, req+"\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	return resp
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test", "other.test")
	user, password := egress.Credentials(testKey, egress.Policy{Sandbox: "ma-test", Hosts: []string{"allowed.test"}})
	wider, _ := egress.Credentials(testKey, egress.Policy{Sandbox: "ma-test", Hosts: []string{"allowed.test", "other.test"}})
	_, otherKeys := egress.Credentials([]byte("another key, 32 bytes or longer!!"), egress.Policy{Sandbox: "ma-test", Hosts: []string{"allowed.test"}})

	for name, c := range map[string]*http.Client{
		"a widened host list":   f.client(t, wider, password),
		"a tampered password":   f.client(t, user, password[:len(password)-1]+"A"),
		"another key's":         f.client(t, user, otherKeys),
		"no credentials at all": {Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: f.addr})}},
	} {
		resp, body := get(t, c, "http://allowed.test/")
		require.Equal(t, http.StatusProxyAuthRequired, resp.StatusCode, name)
		require.Equal(t, `Basic realm="managed-agents sandbox egress"`, resp.Header.Get("Proxy-Authenticate"), name)
		require.Contains(t, body, "sandbox egress proxy", name)
	}
	resp := connect(t, f.addr, "allowed.test:443", "Bearer "+password)
	require.Equal(t, http.StatusProxyAuthRequired, resp.StatusCode, "not basic credentials")
	require.Contains(t, f.logs.String(), "egress refused: invalid proxy credentials")
	require.Contains(t, f.logs.String(), "egress refused: no proxy credentials")

	policy, err := egress.Verify(testKey, user, password)
	require.NoError(t, err)
	require.Equal(t, egress.Policy{Sandbox: "ma-test", Hosts: []string{"allowed.test"}}, policy)
}

func TestNotAProxyRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{})
	resp, body := get(t, http.DefaultClient, "http://"+f.addr+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok\n", body)
	resp, body = get(t, http.DefaultClient, "http://"+f.addr+"/other")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "this is the sandbox egress proxy")
}

func TestHTTPSWithoutConnectIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test")
	user, password := egress.Credentials(testKey, egress.Policy{Hosts: []string{"allowed.test"}})
	conn, err := net.Dial("tcp", f.addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nProxy-Authorization: "+basic(user, password)+"\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestOversizedHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{MaxHeaderBytes: 1 << 10}, "allowed.test")
	c := f.policyClient(t, "allowed.test")
	req, err := http.NewRequest(http.MethodGet, "http://allowed.test/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10)) // beyond the limit and net/http's 4 KiB of slack
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.Nil(t, f.last(), "nothing reached the upstream")
}

func TestTheDefaultDialerNeverReachesLoopback(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the upstream on loopback was reached")
	}))
	defer upstream.Close()
	_, port, err := net.SplitHostPort(upstream.Listener.Addr().String())
	require.NoError(t, err)
	var n int
	_, err = fmt.Sscan(port, &n)
	require.NoError(t, err)
	// No Dial: the proxy's own dialer, the one a deployment runs.
	p, err := egress.New(egress.Config{Key: testKey, Ports: []int{n}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Serve(ctx, ln) }()

	user, password := egress.Credentials(testKey, egress.Policy{Hosts: []string{"127.0.0.1", "localhost"}})
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword(user, password), Host: ln.Addr().String()})}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, body := get(t, c, "http://"+net.JoinHostPort(host, port)+"/")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, host)
		require.Contains(t, body, "resolves to 127.0.0.1, a loopback address the sandbox may never reach", host)
	}
	resp := connect(t, ln.Addr().String(), net.JoinHostPort("127.0.0.1", port), basic(user, password))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func TestTunnelsEndWithTheProxy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test")
	p, err := egress.New(egress.Config{Key: testKey, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, strings.TrimPrefix(f.tls.URL, "https://"))
	}})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln) }()

	user, password := egress.Credentials(testKey, egress.Policy{Hosts: []string{"allowed.test"}})
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nProxy-Authorization: "+basic(user, password)+"\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-served)
	_, err = br.ReadByte()
	require.True(t, errors.Is(err, io.EOF) || isReset(err), "the open tunnel was closed: %v", err)
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

func TestTLSThroughTheTunnelVerifiesTheName(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test")
	c := f.policyClient(t, "allowed.test")
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{ServerName: "example.com"} // system roots only
	_, err := c.Get("https://allowed.test/")
	require.ErrorContains(t, err, "certificate", "the proxy does not terminate TLS: the client checks the upstream's certificate")
}

func TestNewRefusesAShortKey(t *testing.T) {
	t.Parallel()
	_, err := egress.New(egress.Config{Key: []byte("short")})
	require.EqualError(t, err, "egress proxy: the key has 5 bytes, at least 32 are needed")
	_, err = egress.New(egress.Config{Key: testKey, Ports: []int{0}})
	require.EqualError(t, err, "egress proxy: port 0 is not a TCP port")
}

func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{MaxConns: 1})
	healthz := func(conn net.Conn) <-chan int {
		got := make(chan int, 1)
		go func() {
			defer close(got)
			if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: proxy\r\n\r\n"); err != nil {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				return
			}
			resp.Body.Close()
			got <- resp.StatusCode
		}()
		return got
	}
	first, err := net.Dial("tcp", f.addr)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, <-healthz(first), "the first connection is served and kept alive")

	second, err := net.Dial("tcp", f.addr) // the kernel completes the handshake; the proxy does not accept it
	require.NoError(t, err)
	defer second.Close()
	waiting := healthz(second)
	select {
	case code := <-waiting:
		t.Fatalf("a second connection was served (%d) while the only slot was taken", code)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	require.Equal(t, http.StatusOK, <-waiting, "served once the first connection closed")
}

// BenchmarkPlainHTTP is one kept-alive GET through the proxy to an upstream on loopback.
func BenchmarkPlainHTTP(b *testing.B) {
	f := newFixture(b, egress.Config{}, "allowed.test")
	c := f.policyClient(b, "allowed.test", "*.wild.test")
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Get("http://allowed.test/")
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkConnectTLS is a new CONNECT tunnel and TLS handshake per request (no reuse).
func BenchmarkConnectTLS(b *testing.B) {
	f := newFixture(b, egress.Config{}, "allowed.test")
	c := f.policyClient(b, "allowed.test")
	c.Transport.(*http.Transport).DisableKeepAlives = true
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Get("https://allowed.test/")
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// The longest policy CheckPolicy accepts still fits the default header limit.
func TestTheLongestPolicyFitsTheHeaderLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test")
	hosts := []string{"allowed.test"}
	for i := 0; ; i++ {
		next := append(hosts, fmt.Sprintf("host-%04d.example.com", i))
		if egress.CheckPolicy(egress.Policy{Sandbox: "ma-0123456789abcdef0123456789abcdef", Hosts: next}) != nil {
			break
		}
		hosts = next
	}
	require.Greater(t, len(hosts), 300)
	user, password := egress.Credentials(testKey, egress.Policy{Sandbox: "ma-0123456789abcdef0123456789abcdef", Hosts: hosts})
	resp, _ := get(t, f.client(t, user, password), "http://allowed.test/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get(t, f.client(t, user, password), "https://allowed.test/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.ErrorContains(t, egress.CheckPolicy(egress.Policy{Hosts: append(hosts, "one-more.example.com", "and-another.example.com")}), "too long for the egress proxy")
}

// One client (one sandbox) cannot hold more than its share of the connections: the next
// one gets 429, and a connection closed frees its place.
func TestConnectionLimitPerClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{MaxConnsPerClient: 2})
	healthz := func(conn net.Conn) int {
		// A connection over the bound may be closed before the request is written: no code.
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: proxy\r\n\r\n"); err != nil {
			return 0
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	var open []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", f.addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.Equal(t, http.StatusOK, healthz(c))
		open = append(open, c)
	}
	third, err := net.Dial("tcp", f.addr)
	require.NoError(t, err)
	defer third.Close()
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "egress proxy: this sandbox has too many connections open\n", string(body))

	require.NoError(t, open[0].Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		return healthz(c) == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond, "a closed connection frees its place")
}

// Credentials bound to a client network work only from it: a leaked credential is of no
// use to a sandbox on another network.
func TestBoundCredentialsWorkOnlyFromTheirNetwork(t *testing.T) {
	t.Parallel()
	f := newFixture(t, egress.Config{}, "allowed.test")
	policy := egress.Policy{Sandbox: "ma-bound", Hosts: []string{"allowed.test"}, Client: netip.MustParsePrefix("127.0.0.0/8")}
	user, password := egress.Credentials(testKey, policy)
	got, err := egress.Verify(testKey, user, password)
	require.NoError(t, err)
	require.Equal(t, policy, got, "the bound policy round-trips")
	resp, _ := get(t, f.client(t, user, password), "http://allowed.test/")
	require.Equal(t, http.StatusOK, resp.StatusCode, "from inside its network (the fixture's clients are on 127.0.0.1)")

	policy.Client = netip.MustParsePrefix("10.128.7.0/24")
	user, password = egress.Credentials(testKey, policy)
	resp, body := get(t, f.client(t, user, password), "http://allowed.test/")
	require.Equal(t, http.StatusProxyAuthRequired, resp.StatusCode, "from outside it: %s", body)

	// The prefix is under the signature: moving a credential to another network forges it.
	_, err = egress.Verify(testKey, strings.Replace(user, "ma2.", "ma1.", 1), password)
	require.Error(t, err)
}
