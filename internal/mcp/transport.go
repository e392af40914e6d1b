package mcp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// recorder is the HTTP transport under every MCP request of one Conn. It adds the bearer
// token (only to the MCP server's own host, so a redirect elsewhere never carries it) and
// records what the SDK's errors do not say reliably: whether the server refused the
// credentials (401/403) and the status of the last POST (an SSE-only server answers the
// streamable POST with 404/405).
type recorder struct {
	base  http.RoundTripper
	token string
	host  string
	// scheme: the token goes only where the server's URL said, so a redirect from https to
	// http on the same host does not carry it in the clear.
	scheme string

	authFailures atomic.Int64 // responses with 401 or 403
	mu           sync.Mutex
	authStatus   int // the last 401/403 seen
	postStatus   int // the status of the last POST
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.token != "" && strings.EqualFold(req.URL.Host, r.host) && strings.EqualFold(req.URL.Scheme, r.scheme) {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	if req.Method == http.MethodPost {
		r.postStatus = resp.StatusCode
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		r.authStatus = resp.StatusCode
		r.authFailures.Add(1)
	}
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) lastAuthStatus() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.authStatus
}

func (r *recorder) lastPostStatus() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.postStatus
}

// defaultTransport bounds each phase of reaching the server but not the length of a
// response: a call's answer may stream for as long as the call's timeout allows.
func defaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
}

// boundTransport ends every request of one session (its body included) when the session's
// context ends: when Close is called, or when connecting runs out of time. Without it, a
// request the SDK sends on a context of its own (the best-effort notifications/cancelled,
// the DELETE of Close) could hold Dial or Close for seconds on a server that never answers.
type boundTransport struct {
	base http.RoundTripper
	life context.Context
}

func (t boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.life.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.life, cancel)
	end := func() { stop(); cancel() }
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		end()
		return nil, err
	}
	resp.Body = &endingBody{ReadCloser: &cappedBody{ReadCloser: resp.Body, left: maxResponseBytes}, end: end}
	return resp, nil
}

// maxResponseBytes bounds one response body (the SDK reads a JSON answer whole, and the SSE
// transport's stream carries every answer of a session, which here is one listing or one
// call): a server that answers without end fails the request instead of the worker's memory.
// A result that big would be cut to MaxOutputChars anyway.
const maxResponseBytes = 32 << 20

// errResponseTooLarge ends a response longer than maxResponseBytes.
var errResponseTooLarge = errors.New("the MCP server's response is larger than 32 MiB")

type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// endingBody releases its request's context when the body is closed.
type endingBody struct {
	io.ReadCloser
	end func()
}

func (b *endingBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}
