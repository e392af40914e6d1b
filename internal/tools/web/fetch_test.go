package web

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/managed-agents/managed-agents/internal/wire"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// fakeResolver answers from a table; other names do not exist.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// dialLog is the tests' dial function: it records every address it is asked for and connects
// only to 127.0.0.1, so no test sends a packet anywhere else.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr() != loopback {
		return nil, fmt.Errorf("test dialer: refusing to dial %s", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *dialLog) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// requireOnlyLoopback fails if anything but 127.0.0.1 was dialled.
func (d *dialLog) requireOnlyLoopback(t *testing.T) {
	t.Helper()
	for _, a := range d.dialled() {
		ap, err := netip.ParseAddrPort(a)
		require.NoError(t, err)
		require.Equal(t, loopback, ap.Addr(), "dialled %s", a)
	}
}

// names every test host resolves: the *.example.test names to the test server on
// 127.0.0.1, the evil ones to addresses that must never be dialled.
func testResolver() fakeResolver {
	lo := []netip.Addr{loopback}
	return fakeResolver{
		"docs.example.test":       lo,
		"sub.docs.example.test":   lo,
		"notdocs.example.test":    lo,
		"ads.example.test":        lo,
		"x.ads.example.test":      lo,
		"other.test":              lo,
		"evil.test":               {netip.MustParseAddr("10.0.0.1")},
		"metadata.test":           {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":              {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.1")},
		"mapped.test":             {netip.MustParseAddr("::ffff:10.1.1.1")},
		"v6local.test":            {netip.MustParseAddr("::1")},
		"rebind-to-private.test":  {netip.MustParseAddr("172.16.5.4")},
		"cgnat.test":              {netip.MustParseAddr("100.100.100.100")},
		"public-elsewhere.test":   {netip.MustParseAddr("93.184.216.34")},
		"unique-local.test":       {netip.MustParseAddr("fd12:3456::1")},
		"link-local-v6.test":      {netip.MustParseAddr("fe80::1")},
		"multicast.test":          {netip.MustParseAddr("239.1.2.3")},
		"unspecified.test":        {netip.MustParseAddr("0.0.0.0")},
		"nat64-private.test":      {netip.MustParseAddr("64:ff9b::a00:1")},
		"ipv4-compatible.test":    {netip.MustParseAddr("::a00:1")},
		"broadcast.test":          {netip.MustParseAddr("255.255.255.255")},
		"benchmarking.test":       {netip.MustParseAddr("198.18.0.1")},
		"private-192.test":        {netip.MustParseAddr("192.168.0.10")},
		"site-local-v6.test":      {netip.MustParseAddr("fec0::1")},
		"multicast-v6.test":       {netip.MustParseAddr("ff02::1")},
		"mapped-metadata.test":    {netip.MustParseAddr("::ffff:169.254.169.254")},
		"loopback-127-2.test":     {netip.MustParseAddr("127.0.0.2")},
		"this-network.test":       {netip.MustParseAddr("0.1.2.3")},
		"reserved-240.test":       {netip.MustParseAddr("240.0.0.1")},
		"ietf-protocol.test":      {netip.MustParseAddr("192.0.0.8")},
		"private-v6-mapped.test":  {netip.MustParseAddr("::ffff:192.168.0.1")},
		"carrier-grade-nat.test":  {netip.MustParseAddr("100.64.0.1")},
		"link-local-v4.test":      {netip.MustParseAddr("169.254.1.1")},
		"ten-dot.test":            {netip.MustParseAddr("10.255.255.255")},
		"private-172-31.test":     {netip.MustParseAddr("172.31.255.255")},
		"unspecified-v6.test":     {netip.MustParseAddr("::")},
		"multicast-224.test":      {netip.MustParseAddr("224.0.0.1")},
		"loopback-v6-mapped.test": {netip.MustParseAddr("::ffff:127.0.0.2")}, // 127.0.0.1 is the test server
		"nat64-local-use.test":    {netip.MustParseAddr("64:ff9b:1::a9fe:a9fe")},
		"six-to-four.test":        {netip.MustParseAddr("2002:a00:1::1")},
		"teredo.test":             {netip.MustParseAddr("2001:0:4136:e378:8000:63bf:3fff:fdd2")},
	}
}

// newTestFetcher is a Fetcher over the test resolver and dialer that treats 127.0.0.1, where
// the test server listens, as public: everything else is refused as in production.
func newTestFetcher(t *testing.T, cfg FetchConfig) (*Fetcher, *dialLog) {
	t.Helper()
	log := &dialLog{}
	cfg.Resolver = testResolver()
	cfg.Dial = log.dial
	f := newFetcher(cfg, []netip.Prefix{netip.PrefixFrom(loopback, 32)})
	t.Cleanup(f.Close)
	t.Cleanup(func() { log.requireOnlyLoopback(t) })
	return f, log
}

// testSite serves the pages of the fetch tests.
func testSite(t *testing.T) (srv *httptest.Server, port string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>  The
		Test Page </title><style>.secret-style { color: red }</style>
		<script>var secretScript = 1;</script></head>
		<body><svg><title>svg title</title></svg>
		<h1>Main Heading</h1><p>First paragraph with <a href="/other">a relative link</a>.</p>
		<h2>Second</h2><ul><li>one</li><li>two</li></ul>
		<img src="data:image/png;base64,AAAAAAAAAAAAAAAA" alt="inline">
		<script>document.write("secretScript2")</script><noscript>secretNoscript</noscript>
		</body></html>`)
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
		_, _ = w.Write([]byte("<html><head><title>Caf\xe9</title></head><body><p>cr\xe8me br\xfbl\xe9e</p></body></html>"))
	})
	mux.HandleFunc("/notitle", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<p>no title here</p>`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "plain <b>text</b> stays as it is")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"a": [1, 2, 3]}`)
	})
	mux.HandleFunc("/sniffed", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = nil // no header: sniffed
		fmt.Fprint(w, "<html><head><title>Sniffed</title></head><body><p>sniffed html</p></body></html>")
	})
	mux.HandleFunc("/pdf", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		fmt.Fprint(w, "%PDF-1.7 ...")
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("a", 5000))
	})
	mux.HandleFunc("/long", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("word ", 200)) // 1000 characters
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	// /redirect?to=URL redirects once; /hops/N redirects N times, then serves /text.
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/hops/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		_, _ = fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			http.Redirect(w, r, "/text", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hops/%d", n-1), http.StatusMovedPermanently)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	return srv, port
}

func input(u string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"url": u})
	return b
}

// document reads the one document block of a successful fetch and checks that it is a
// valid tool_result block that survives the log's JSON round trip.
func document(t *testing.T, r Result) (title, text, context string) {
	t.Helper()
	require.False(t, r.IsError, "unexpected error: %s", r.Text())
	require.Len(t, r.Content, 1)
	b, err := json.Marshal(r.Content)
	require.NoError(t, err)
	var back []wire.ContentBlock
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, wire.ValidateContent("content", back, wire.ToolResultBlocks))
	d := back[0]
	require.Equal(t, wire.ContentTypeDocument, d.Type)
	require.JSONEq(t, `"text/plain"`, string(mustField(t, d.Source, "media_type")))
	text, ok := d.TextSource()
	require.True(t, ok)
	require.NotNil(t, d.Title)
	require.NotNil(t, d.Context)
	return *d.Title, text, *d.Context
}

func mustField(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m[key]
}

func TestFetchHTMLBecomesMarkdown(t *testing.T) {
	t.Parallel()
	_, port := testSite(t)
	f, _ := newTestFetcher(t, FetchConfig{})
	base := "http://docs.example.test:" + port
	title, text, ctx := document(t, f.Fetch(t.Context(), input(base+"/page"), Options{}))
	require.Equal(t, "The Test Page", title, "the <title>, whitespace collapsed, not the svg's")
	require.Equal(t, base+"/page", ctx)
	for _, want := range []string{"# Main Heading", "## Second", "First paragraph with [a relative link](" + base + "/other).", "- one", "- two"} {
		require.Contains(t, text, want)
	}
	for _, gone := range []string{"secret", "color: red", "data:image", "svg title", "The Test Page"} {
		require.NotContains(t, text, gone)
	}
}

func TestFetchOutcomes(t *testing.T) {
	t.Parallel()
	_, port := testSite(t)
	base := "http://docs.example.test:" + port
	tests := []struct {
		name      string
		url       string
		opts      Options
		cfg       FetchConfig
		wantTitle string
		wantCtx   string
		wantText  []string // substrings of the document's text
		wantErr   string   // substring of the error text; "" for success
	}{
		{name: "latin-1 declared in the header", url: base + "/latin1", wantTitle: "Café", wantText: []string{"crème brûlée"}},
		{name: "no title: the URL", url: base + "/notitle", wantTitle: base + "/notitle", wantText: []string{"no title here"}},
		{name: "plain text passes through", url: base + "/text", wantTitle: base + "/text", wantText: []string{"plain <b>text</b> stays as it is"}},
		{name: "JSON passes through", url: base + "/json", wantText: []string{`{"a": [1, 2, 3]}`}},
		{name: "no Content-Type: sniffed", url: base + "/sniffed", wantTitle: "Sniffed", wantText: []string{"sniffed html"}},
		{name: "PDF is not supported", url: base + "/pdf", wantErr: "web_fetch error (unsupported_content_type): " + base + "/pdf is application/pdf, which this server does not fetch"},
		{name: "images are not supported", url: base + "/png", wantErr: "is image/png, which this server does not fetch"},
		{name: "404", url: base + "/missing", wantErr: "web_fetch error (url_not_accessible): " + base + "/missing returned HTTP 404 Not Found"},
		{name: "500", url: base + "/broken", wantErr: "returned HTTP 500 Internal Server Error"},
		{name: "redirects within the limit", url: base + "/hops/4", wantCtx: base + "/text", wantText: []string{"plain"}},
		{name: "too many redirects", url: base + "/hops/5", wantErr: "web_fetch error (url_not_accessible): " + base + "/hops/5: stopped after 5 redirects"},
		{name: "a lower redirect limit", url: base + "/hops/1", cfg: FetchConfig{MaxRedirects: 1}, wantErr: "stopped after 1 redirects"},
		{name: "no redirects at all", url: base + "/hops/0", cfg: FetchConfig{MaxRedirects: -1}, wantErr: "stopped after 0 redirects"},
		{name: "a redirect to another allowed host", url: base + "/redirect?to=" + url.QueryEscape("http://sub.docs.example.test:"+port+"/text"),
			opts: Options{AllowedDomains: []string{"docs.example.test"}}, wantCtx: "http://sub.docs.example.test:" + port + "/text"},
		{name: "a redirect to a blocked domain", url: base + "/redirect?to=" + url.QueryEscape("http://x.ads.example.test:"+port+"/text"),
			opts:    Options{BlockedDomains: []string{"ads.example.test"}},
			wantErr: "web_fetch error (url_not_allowed): redirected to http://x.ads.example.test:" + port + "/text: x.ads.example.test is in blocked_domains (ads.example.test)"},
		{name: "a redirect to an address under blocked_domains", url: base + "/redirect?to=" + url.QueryEscape("http://127.0.0.1:"+port+"/text"),
			opts:    Options{BlockedDomains: []string{"ads.example.test"}},
			wantErr: "web_fetch error (url_not_allowed): redirected to http://127.0.0.1:" + port + "/text: 127.0.0.1 is an IP address, which blocked_domains cannot be checked against"},
		{name: "an IPv6 address under blocked_domains", url: "http://[2001:db8::1]:" + port + "/text",
			opts: Options{BlockedDomains: []string{"ads.example.test"}}, wantErr: "(url_not_allowed): http://[2001:db8::1]:" + port + "/text: 2001:db8::1 is an IP address"},
		{name: "a redirect out of allowed_domains", url: base + "/redirect?to=" + url.QueryEscape("http://other.test:"+port+"/text"),
			opts: Options{AllowedDomains: []string{"docs.example.test"}}, wantErr: "(url_not_allowed): redirected to http://other.test:" + port + "/text: other.test is not in allowed_domains"},
		{name: "a redirect to another scheme", url: base + "/redirect?to=" + url.QueryEscape("ftp://docs.example.test/x"),
			wantErr: "(url_not_allowed): redirected to ftp://docs.example.test/x: only http and https URLs are fetched, not ftp"},
		{name: "allowed: the domain itself", url: base + "/text", opts: Options{AllowedDomains: []string{"docs.example.test"}}},
		{name: "allowed: a subdomain", url: "http://sub.docs.example.test:" + port + "/text", opts: Options{AllowedDomains: []string{"DOCS.example.test."}}},
		{name: "allowed: a suffix that is no subdomain is refused", url: "http://notdocs.example.test:" + port + "/text", opts: Options{AllowedDomains: []string{"docs.example.test"}},
			wantErr: "web_fetch error (url_not_allowed): http://notdocs.example.test:" + port + "/text: notdocs.example.test is not in allowed_domains"},
		{name: "blocked: the domain", url: "http://ads.example.test:" + port + "/text", opts: Options{BlockedDomains: []string{"ads.example.test"}}, wantErr: "(url_not_allowed)"},
		{name: "blocked: a subdomain", url: "http://x.ads.example.test:" + port + "/text", opts: Options{BlockedDomains: []string{"ads.example.test"}}, wantErr: "x.ads.example.test is in blocked_domains"},
		{name: "blocked: another domain is fine", url: base + "/text", opts: Options{BlockedDomains: []string{"ads.example.test"}}},
		{name: "max_content_tokens cuts the text", url: base + "/long", opts: Options{MaxContentTokens: 10},
			wantText: []string{"word word word word word word word word \n\n[content truncated: showing the first 40 of 999 characters, about 10 tokens (max_content_tokens 10)]"}},
		{name: "the body cap", url: base + "/big", cfg: FetchConfig{MaxBodyBytes: 1000},
			wantText: []string{strings.Repeat("a", 1000) + "\n\n[the response was larger than 1000 bytes; only the first 1000 were read]"}},
		{name: "a timeout", url: base + "/slow", cfg: FetchConfig{Timeout: 100 * time.Millisecond}, wantErr: "web_fetch error (url_not_accessible): " + base + "/slow: timed out after 100ms"},
		{name: "a name that does not resolve", url: "http://nowhere.test/", wantErr: "web_fetch error (url_not_accessible): http://nowhere.test/: could not resolve nowhere.test"},
		{name: "a closed port", url: "http://docs.example.test:1/", wantErr: "web_fetch error (url_not_accessible): http://docs.example.test:1/: dial tcp 127.0.0.1:1"},
		{name: "a scheme other than http", url: "file:///etc/passwd", wantErr: "web_fetch error (url_not_allowed): file:///etc/passwd: only http and https URLs are fetched, not file"},
		{name: "no host", url: "http:///x", wantErr: "the URL has no host"},
		{name: "not a URL", url: "http://[::1", wantErr: "web_fetch error (invalid_input): \"http://[::1\" is not a URL"},
		{name: "a URL too long", url: base + "/" + strings.Repeat("a", maxURLLen), wantErr: "web_fetch error (url_too_long)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, _ := newTestFetcher(t, tt.cfg)
			r := f.Fetch(t.Context(), input(tt.url), tt.opts)
			if tt.wantErr != "" {
				require.True(t, r.IsError, "want an error, got %+v", r)
				require.Len(t, r.Content, 1)
				require.Contains(t, r.Text(), tt.wantErr)
				return
			}
			title, text, ctx := document(t, r)
			if tt.wantTitle != "" {
				require.Equal(t, tt.wantTitle, title)
			}
			if tt.wantCtx != "" {
				require.Equal(t, tt.wantCtx, ctx)
			}
			for _, want := range tt.wantText {
				require.Contains(t, text, want)
			}
		})
	}
}

func TestFetchInput(t *testing.T) {
	t.Parallel()
	f, log := newTestFetcher(t, FetchConfig{})
	for _, tt := range []struct{ input, wantErr string }{
		{``, "web_fetch error (invalid_input): url is required"},
		{`{}`, "url is required"},
		{`{"url": "  "}`, "url is required"},
		{`{"url": 1}`, "invalid_input"},
		{`{"url": "http://docs.example.test/", "extra": true}`, "invalid_input"},
		{`["http://docs.example.test/"]`, "expected a JSON object"},
	} {
		r := f.Fetch(t.Context(), json.RawMessage(tt.input), Options{})
		require.True(t, r.IsError, tt.input)
		require.Contains(t, r.Text(), tt.wantErr, tt.input)
	}
	require.Empty(t, log.dialled())
}

// Addresses that are not public are refused before any connection: literal ones when the
// URL is checked, resolved ones in the dialer, whichever way the URL was reached.
func TestFetchRefusesNonPublicAddresses(t *testing.T) {
	t.Parallel()
	srv, port := testSite(t)
	literal := []struct{ host, reason string }{
		{"127.0.0.1", "127.0.0.1 is a loopback address"},
		{"10.1.2.3", "10.1.2.3 is a private address"},
		{"172.16.0.1", "172.16.0.1 is a private address"},
		{"192.168.1.1", "192.168.1.1 is a private address"},
		{"169.254.169.254", "169.254.169.254 is the cloud metadata address"},
		{"169.254.10.10", "169.254.10.10 is a link-local address"},
		{"100.64.0.1", "100.64.0.1 is a carrier-grade NAT address"},
		{"0.0.0.0", "0.0.0.0 is the unspecified address"},
		{"224.0.0.1", "224.0.0.1 is a multicast address"},
		{"[::1]", "::1 is a loopback address"},
		{"[::ffff:127.0.0.1]", "127.0.0.1 is a loopback address"},
		{"[::ffff:169.254.169.254]", "169.254.169.254 is the cloud metadata address"},
		{"[::ffff:a00:1]", "10.0.0.1 is a private address"},
		{"[fc00::1]", "fc00::1 is a private address"},
		{"[fe80::1]", "fe80::1 is a link-local address"},
		{"[::]", ":: is the unspecified address"},
		{"[64:ff9b::a00:1]", "64:ff9b::a00:1 is a private address (through NAT64)"},
	}
	for _, tt := range literal {
		t.Run("literal "+tt.host, func(t *testing.T) {
			t.Parallel()
			// A production guard: 127.0.0.1 is refused like every other local address.
			log := &dialLog{}
			f := NewFetcher(FetchConfig{Resolver: testResolver(), Dial: log.dial})
			t.Cleanup(f.Close)
			r := f.Fetch(t.Context(), input("http://"+tt.host+":"+port+"/text"), Options{})
			require.True(t, r.IsError)
			require.Contains(t, r.Text(), "web_fetch error (url_not_allowed): http://"+tt.host+":"+port+"/text: "+tt.reason+"; this server does not fetch from private or local networks")
			require.Empty(t, log.dialled(), "refused before any dial")
		})
	}
	resolved := []struct{ host, want string }{
		{"evil.test", "evil.test resolves to 10.0.0.1, a private address"},
		{"metadata.test", "metadata.test resolves to 169.254.169.254, the cloud metadata address"},
		{"mixed.test", "mixed.test resolves to 192.168.1.1, a private address"},
		{"mapped.test", "mapped.test resolves to 10.1.1.1, a private address"},
		{"mapped-metadata.test", "resolves to 169.254.169.254, the cloud metadata address"},
		{"loopback-v6-mapped.test", "resolves to 127.0.0.2, a loopback address"},
		{"private-v6-mapped.test", "resolves to 192.168.0.1, a private address"},
		{"v6local.test", "resolves to ::1, a loopback address"},
		{"loopback-127-2.test", "resolves to 127.0.0.2, a loopback address"},
		{"cgnat.test", "a carrier-grade NAT address"},
		{"carrier-grade-nat.test", "a carrier-grade NAT address"},
		{"unique-local.test", "a private address"},
		{"link-local-v6.test", "a link-local address"},
		{"link-local-v4.test", "a link-local address"},
		{"multicast.test", "a multicast address"},
		{"multicast-224.test", "a multicast address"},
		{"multicast-v6.test", "a multicast address"},
		{"unspecified.test", "the unspecified address"},
		{"unspecified-v6.test", "the unspecified address"},
		{"nat64-private.test", "a private address (through NAT64)"},
		{"ipv4-compatible.test", "an IPv4-compatible address"},
		{"broadcast.test", "the broadcast address"},
		{"benchmarking.test", "a benchmarking address"},
		{"private-192.test", "a private address"},
		{"private-172-31.test", "a private address"},
		{"ten-dot.test", "a private address"},
		{"rebind-to-private.test", "a private address"},
		{"site-local-v6.test", "a site-local address"},
		{"this-network.test", "a \"this network\" address"},
		{"reserved-240.test", "a reserved address"},
		{"ietf-protocol.test", "an IETF protocol address"},
		{"nat64-local-use.test", "the cloud metadata address (through NAT64)"},
		{"six-to-four.test", "a private address (through 6to4)"},
		{"teredo.test", "a Teredo address"},
	}
	for _, tt := range resolved {
		t.Run("resolved "+tt.host, func(t *testing.T) {
			t.Parallel()
			f, log := newTestFetcher(t, FetchConfig{})
			r := f.Fetch(t.Context(), input("http://"+tt.host+"/"), Options{})
			require.True(t, r.IsError)
			require.Contains(t, r.Text(), "web_fetch error (url_not_allowed): http://"+tt.host+"/: ")
			require.Contains(t, r.Text(), tt.want)
			require.Empty(t, log.dialled(), "refused before any dial")
		})
		t.Run("redirected to "+tt.host, func(t *testing.T) {
			t.Parallel()
			f, log := newTestFetcher(t, FetchConfig{})
			start := "http://docs.example.test:" + port + "/redirect?to=" + url.QueryEscape("http://"+tt.host+"/latest/meta-data/")
			r := f.Fetch(t.Context(), input(start), Options{AllowedDomains: []string{"docs.example.test", "test"}})
			require.True(t, r.IsError)
			require.Contains(t, r.Text(), "(url_not_allowed)")
			require.Contains(t, r.Text(), tt.want)
			require.Equal(t, []string{srv.Listener.Addr().String()}, log.dialled(), "only the allowed host was dialled")
		})
	}
	t.Run("redirected to a literal private address", func(t *testing.T) {
		t.Parallel()
		f, log := newTestFetcher(t, FetchConfig{})
		start := "http://docs.example.test:" + port + "/redirect?to=" + url.QueryEscape("http://169.254.169.254/latest/meta-data/")
		r := f.Fetch(t.Context(), input(start), Options{})
		require.True(t, r.IsError)
		require.Contains(t, r.Text(), "web_fetch error (url_not_allowed): redirected to http://169.254.169.254/latest/meta-data/: 169.254.169.254 is the cloud metadata address")
		require.Equal(t, []string{srv.Listener.Addr().String()}, log.dialled())
	})
}

func TestFetchAllowPrivateNetworks(t *testing.T) {
	t.Parallel()
	_, port := testSite(t)
	log := &dialLog{}
	f := NewFetcher(FetchConfig{AllowPrivateNetworks: true, Resolver: testResolver(), Dial: log.dial})
	t.Cleanup(f.Close)
	for _, u := range []string{"http://127.0.0.1:" + port + "/text", "http://docs.example.test:" + port + "/text"} {
		_, text, _ := document(t, f.Fetch(t.Context(), input(u), Options{}))
		require.Contains(t, text, "plain")
	}
	log.requireOnlyLoopback(t)
	// Domain rules still apply.
	r := f.Fetch(t.Context(), input("http://127.0.0.1:"+port+"/text"), Options{AllowedDomains: []string{"docs.example.test"}})
	require.True(t, r.IsError)
	require.Contains(t, r.Text(), "(url_not_allowed): http://127.0.0.1:"+port+"/text: 127.0.0.1 is not in allowed_domains")
}

// NewFetcher's own guard, without the tests' allowance for 127.0.0.1: a name resolving to it
// is refused (without a connection: the resolver's answer is checked first). The guard's own
// checks, the socket's included, are netguard's tests.
func TestNewFetcherRefusesLoopback(t *testing.T) {
	t.Parallel()
	f := NewFetcher(FetchConfig{Resolver: testResolver()})
	t.Cleanup(f.Close)
	r := f.Fetch(t.Context(), input("http://docs.example.test:1/"), Options{})
	require.True(t, r.IsError)
	require.Contains(t, r.Text(), "docs.example.test resolves to 127.0.0.1, a loopback address")
}

// A proxy would connect on the fetcher's behalf, past the address check: the environment's
// proxy is ignored.
func TestFetchIgnoresProxyEnvironment(t *testing.T) {
	_, port := testSite(t)
	t.Setenv("HTTP_PROXY", "http://10.9.9.9:3128")
	t.Setenv("http_proxy", "http://10.9.9.9:3128")
	f, log := newTestFetcher(t, FetchConfig{})
	_, text, _ := document(t, f.Fetch(t.Context(), input("http://docs.example.test:"+port+"/text"), Options{}))
	require.Contains(t, text, "plain")
	require.Len(t, log.dialled(), 1)
}

func TestFetchCanceled(t *testing.T) {
	t.Parallel()
	_, port := testSite(t)
	f, _ := newTestFetcher(t, FetchConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	r := f.Fetch(ctx, input("http://docs.example.test:"+port+"/slow"), Options{})
	require.True(t, r.IsError)
	require.Contains(t, r.Text(), "the fetch was canceled")
}

func TestOptionsFor(t *testing.T) {
	t.Parallel()
	n := int64(500)
	loc := &wire.ToolUserLocation{Type: wire.ToolUserLocationApproximate}
	require.Equal(t, Options{BlockedDomains: []string{"a.com"}, MaxContentTokens: 500, UserLocation: loc},
		OptionsFor(wire.ToolConfig{Name: wire.ToolNameWebFetch, BlockedDomains: []string{"a.com"}, MaxContentTokens: &n, UserLocation: loc}))
	require.Equal(t, Options{}, OptionsFor(wire.ToolConfig{}))
}

func TestOptionsForAppliesTheToolConfig(t *testing.T) {
	t.Parallel()
	_, port := testSite(t)
	f, _ := newTestFetcher(t, FetchConfig{})
	r := f.Fetch(t.Context(), input("http://ads.example.test:"+port+"/text"), OptionsFor(wire.ToolConfig{BlockedDomains: []string{"ads.example.test"}}))
	content, isError := r.Content, r.IsError
	require.True(t, isError)
	require.Contains(t, *content[0].Text, "url_not_allowed")
}

// A host written in Unicode is compared in the form it is dialled in: a blocked domain cannot
// be reached by spelling it differently.
func TestFetchDomainRulesSeeTheDialledName(t *testing.T) {
	t.Parallel()
	f, log := newTestFetcher(t, FetchConfig{})
	for _, tt := range []struct {
		url     string
		opts    Options
		wantErr string
	}{
		{"http://bücher.example/", Options{BlockedDomains: []string{"xn--bcher-kva.example"}}, "bücher.example is in blocked_domains (xn--bcher-kva.example)"},
		{"http://ADS.example.test./x", Options{BlockedDomains: []string{"ads.example.test"}}, "is in blocked_domains"},
		{"http://ads\u3002example.test/x", Options{BlockedDomains: []string{"ads.example.test"}}, "is in blocked_domains"},
		{"http://x.ads%2Eexample.test/x", Options{BlockedDomains: []string{"ads.example.test"}}, "(invalid_input)"},
		{"http://bücher.example/", Options{AllowedDomains: []string{"example"}}, ""},
		{"http://a_b.example/", Options{AllowedDomains: []string{"example"}}, "is not a valid host name"},
	} {
		r := f.Fetch(t.Context(), input(tt.url), tt.opts)
		require.True(t, r.IsError, tt.url)
		if tt.wantErr == "" {
			require.Contains(t, r.Text(), "could not resolve xn--bcher-kva.example", "allowed, then not found: %s", tt.url)
			continue
		}
		if !strings.Contains(tt.wantErr, "(") {
			require.Contains(t, r.Text(), "(url_not_allowed)", tt.url)
		}
		require.Contains(t, r.Text(), tt.wantErr, tt.url)
	}
	require.Empty(t, log.dialled())
}

// One Fetcher serves concurrent calls (the worker runs many sessions).
func TestFetchConcurrent(t *testing.T) {
	t.Parallel()
	_, port := testSite(t)
	f, _ := newTestFetcher(t, FetchConfig{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r := f.Fetch(t.Context(), input("http://docs.example.test:"+port+"/page"), Options{})
			if r.IsError || !strings.Contains(string(r.Content[0].Source), "Main Heading") {
				t.Errorf("concurrent fetch: %+v", r)
			}
		})
	}
	wg.Wait()
}
