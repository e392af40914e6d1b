// Package mcptest runs a real MCP server (the MCP Go SDK's) on 127.0.0.1 for tests: over
// streamable HTTP or only the older HTTP+SSE transport, optionally behind a bearer token,
// with a few tools (echo, add, slow, fail, big) whose calls it counts.
//
// It is not a _test package so that end-to-end tests in other packages can use it. It
// imports only the standard library and the MCP Go SDK.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is a running MCP server.
type Server struct {
	// URL is the MCP endpoint (the same path for both transports).
	URL string

	http      *httptest.Server
	mcp       *mcp.Server
	opts      options
	closeOnce sync.Once
	closing   chan struct{} // closed by Close: slow calls still running end

	mu        sync.Mutex
	calls     map[string]int
	started   map[string]chan struct{}
	cancelled map[string]int
	tokens    []string
}

type options struct {
	sseOnly   bool
	check     func(token string) bool
	forbidden bool
	pageSize  int
	extra     []extraTool
}

type extraTool struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// Option configures Start.
type Option func(*options)

// WithSSEOnly serves only the older HTTP+SSE transport: a GET opens the event stream; a
// POST to the endpoint without a session (what a streamable client sends first) is 405.
func WithSSEOnly() Option { return func(o *options) { o.sseOnly = true } }

// WithBearer answers 401 to every request without "Authorization: Bearer <token>" for
// which check(token) is true.
func WithBearer(check func(token string) bool) Option { return func(o *options) { o.check = check } }

// WithForbidden answers 403 to every request (a token the server knows but refuses).
func WithForbidden() Option { return func(o *options) { o.forbidden = true } }

// WithPageSize makes tools/list return at most n tools a page (the client must follow the
// cursor).
func WithPageSize(n int) Option { return func(o *options) { o.pageSize = n } }

// WithTool serves one more tool with a raw handler (to return any content). Its
// InputSchema must be set. Its calls are counted like the others'.
func WithTool(t *mcp.Tool, h mcp.ToolHandler) Option {
	return func(o *options) { o.extra = append(o.extra, extraTool{t, h}) }
}

// Names and descriptions of the tools every Server offers.
const (
	EchoDescription = "Returns its text argument unchanged."
	AddDescription  = "Adds two numbers and returns the sum as text."
	SlowDescription = "Sleeps for ms milliseconds (honours cancellation and the server closing), then returns \"slept <ms>ms\"."
	FailDescription = "Always fails: returns a tool error (isError) with the message \"tool failed: <message>\"."
	BigDescription  = "Returns n bytes of text (the letter x)."
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}
type addIn struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}
type slowIn struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}
type failIn struct {
	Message string `json:"message,omitempty" jsonschema:"the error message"`
}
type bigIn struct {
	N int `json:"n" jsonschema:"how many bytes of text to return"`
}

// Start starts a server on 127.0.0.1, closed when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{closing: make(chan struct{}), calls: map[string]int{}, started: map[string]chan struct{}{}, cancelled: map[string]int{}}
	for _, o := range opts {
		o(&s.opts)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v1"}, &mcp.ServerOptions{
		PageSize: s.opts.pageSize,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: EchoDescription},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			s.record("echo")
			return text(in.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: AddDescription},
		func(ctx context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			s.record("add")
			return text(fmt.Sprint(in.A + in.B)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: SlowDescription},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			s.record("slow")
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return text(fmt.Sprintf("slept %dms", in.MS)), nil, nil
			case <-s.closing:
				return nil, nil, errors.New("the server is closing")
			case <-ctx.Done():
				s.mu.Lock()
				s.cancelled["slow"]++
				s.mu.Unlock()
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: FailDescription},
		func(ctx context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			s.record("fail")
			r := text("tool failed: " + in.Message)
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: BigDescription},
		func(ctx context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			s.record("big")
			return text(strings.Repeat("x", max(in.N, 0))), nil, nil
		})
	for _, e := range s.opts.extra {
		name, h := e.tool.Name, e.handler
		srv.AddTool(e.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.record(name)
			return h(ctx, req)
		})
	}

	var h http.Handler
	if s.opts.sseOnly {
		sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Query().Get("sessionid") == "" {
				w.Header().Set("Allow", "GET")
				http.Error(w, "this server speaks only the HTTP+SSE transport", http.StatusMethodNotAllowed)
				return
			}
			sse.ServeHTTP(w, r)
		})
	} else {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	s.mcp = srv
	s.http = httptest.NewServer(s.auth(h))
	s.URL = s.http.URL + "/mcp"
	t.Cleanup(s.Close)
	return s
}

func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, hasToken := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if hasToken {
			s.mu.Lock()
			s.tokens = append(s.tokens, token)
			s.mu.Unlock()
		}
		if s.opts.forbidden {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if s.opts.check != nil && (!hasToken || !s.opts.check(token)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcptest"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) record(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[tool]++
	ch := s.startedLocked(tool)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (s *Server) startedLocked(tool string) chan struct{} {
	ch, ok := s.started[tool]
	if !ok {
		ch = make(chan struct{})
		s.started[tool] = ch
	}
	return ch
}

// Calls is how many times the tool's handler ran (a call refused for invalid arguments
// does not count).
func (s *Server) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

// Started is closed once the tool's handler has started at least once (e.g. to kill a
// worker while slow runs).
func (s *Server) Started(tool string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startedLocked(tool)
}

// Cancelled is how many calls of slow ended because they were cancelled.
func (s *Server) Cancelled(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[tool]
}

// AddTool offers another tool from now on (servers change their tools while sessions run).
func (s *Server) AddTool(t *mcp.Tool, h mcp.ToolHandler) {
	name := t.Name
	s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.record(name)
		return h(ctx, req)
	})
}

// RemoveTools stops offering the named tools.
func (s *Server) RemoveTools(names ...string) { s.mcp.RemoveTools(names...) }

// Tokens are the bearer tokens the server was sent, one per request, in order.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tokens...)
}

// Close stops the server, ending open streams. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		// Clients are cut off first, so that no answer of a call ended below reaches them.
		s.http.CloseClientConnections()
		// Sessions a client never deleted (it was cut off, or its DELETE was refused)
		// and calls still running end with the server; http.Close waits for them.
		close(s.closing)
		for ss := range s.mcp.Sessions() {
			_ = ss.Close()
		}
		s.http.Close()
	})
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// ClosedURL is an MCP URL on 127.0.0.1 where nothing listens: a server that cannot be reached.
func ClosedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return "http://" + addr + "/mcp"
}
