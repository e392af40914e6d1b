package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Errors a caller maps to session.error types (API.md §5.5).
var (
	// ErrAuth: the server refused the credentials (HTTP 401 or 403) on connect, list or
	// call → mcp_authentication_failed_error.
	ErrAuth = errors.New("mcp: authentication failed")
	// ErrConnect: the server could not be reached or spoken to (refused, unreachable,
	// TLS, timeout on connect, not an MCP server), or the connection broke during a list
	// or a call → mcp_connection_failed_error.
	ErrConnect = errors.New("mcp: connection failed")
	// ErrInvalidArguments: CallTool's arguments are not a JSON object. Nothing was sent.
	ErrInvalidArguments = errors.New("mcp: tool arguments must be a JSON object")
)

// Defaults of Options and CallLimits.
const (
	DefaultConnectTimeout = 15 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	DefaultMaxOutputChars = 100_000
)

// Server is one entry of an agent's mcp_servers: its name (used in errors) and URL.
type Server struct {
	Name string
	URL  string
}

// Options configure Dial.
type Options struct {
	// HTTPClient supplies the transport (e.g. through an egress proxy), CheckRedirect and
	// Jar. Its Timeout is ignored: a response may stream for as long as a call lasts; calls
	// are bounded by CallLimits.Timeout and connecting by ConnectTimeout. nil = a transport
	// with dial and TLS handshake timeouts of 10 s, owned and closed by the Conn.
	HTTPClient *http.Client
	// Token is sent as "Authorization: Bearer <Token>" on every request to the server's
	// host ("" = none). It is never logged nor put in an error.
	Token string
	// ConnectTimeout bounds Dial: reaching the server and the MCP handshake, over both
	// transports. 0 = DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// Tool is one tool the server offers, as the model will see it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is always a JSON object whose "type" is "object".
	InputSchema json.RawMessage
}

// CallLimits bound one CallTool.
type CallLimits struct {
	// Timeout cuts the call; 0 = DefaultCallTimeout.
	Timeout time.Duration
	// MaxOutputChars caps the characters of text in the result (all blocks together);
	// text beyond it is cut with a note. 0 = DefaultMaxOutputChars.
	MaxOutputChars int
}

// Result is what a tool call produced, in the blocks agent.mcp_tool_result allows
// (text, image, document).
type Result struct {
	Content []wire.ContentBlock
	// IsError: the tool reported an error (isError), the server answered the call with a
	// JSON-RPC error (unknown tool, invalid arguments), or the call timed out. The model
	// sees the content and may try again; the connection is still usable.
	IsError bool
	// TimedOut: CallLimits.Timeout cut the call (IsError is set too).
	TimedOut bool
	// Truncated: text was cut at CallLimits.MaxOutputChars.
	Truncated bool
}

// Conn is an initialized session with one MCP server. It is safe for concurrent use.
// After an error wrapping ErrAuth or ErrConnect from ListTools or CallTool the Conn may be
// broken for good: close it and Dial again.
type Conn struct {
	server    Server
	transport string
	session   *sdk.ClientSession
	rec       *recorder
	owned     *http.Transport // closed with the Conn when Options.HTTPClient was nil
	cancel    context.CancelFunc
	redact    func(string) string
	closeOnce sync.Once
	closeErr  error
}

// closeGrace bounds Close.
const closeGrace = 2 * time.Second

const (
	transportStreamable = "streamable-http"
	transportSSE        = "sse"
)

// Dial connects to the server and completes the MCP handshake: streamable HTTP first and,
// if the server answers that POST with a 4xx other than 401/403 (an SSE-only server
// answers 404, 405 or 400), the older HTTP+SSE transport. Errors wrap ErrAuth or
// ErrConnect (and the cause, e.g. context.DeadlineExceeded) and name the server.
func Dial(ctx context.Context, s Server, o Options) (*Conn, error) {
	c := &Conn{server: s, redact: redactor(s.URL, o.Token)}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, c.errorf(ErrConnect, errors.New("the URL must be an absolute http or https URL"), "invalid URL")
	}
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	hc := &http.Client{}
	var base http.RoundTripper
	if o.HTTPClient != nil {
		hc.CheckRedirect, hc.Jar = o.HTTPClient.CheckRedirect, o.HTTPClient.Jar
		base = o.HTTPClient.Transport
		if base == nil {
			base = http.DefaultTransport
		}
	} else {
		c.owned = defaultTransport()
		base = c.owned
	}
	c.rec = &recorder{base: base, token: o.Token, host: u.Host, scheme: u.Scheme}

	connectCtx, cancelConnect := context.WithTimeout(ctx, timeout)
	defer cancelConnect()

	err = c.connect(ctx, connectCtx, transportStreamable, func(hc *http.Client) sdk.Transport {
		return &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: 2, DisableStandaloneSSE: true}
	}, hc)
	if err == nil {
		return c, nil
	}
	if st := c.rec.lastPostStatus(); c.rec.lastAuthStatus() == 0 && st >= 400 && st < 500 && connectCtx.Err() == nil {
		err = c.connect(ctx, connectCtx, transportSSE, func(hc *http.Client) sdk.Transport {
			return &sdk.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}
		}, hc)
		if err == nil {
			return c, nil
		}
	}
	c.closeIdle()
	if st := c.rec.lastAuthStatus(); st != 0 {
		return nil, c.errorf(ErrAuth, err, "connect: the server answered HTTP %d", st)
	}
	return nil, c.errorf(ErrConnect, err, "connect")
}

// connect makes one attempt over one transport. The session lives on a context of its own
// (the SSE transport ties its stream to the context it is connected with), cancelled by
// Close, or by the end of connectCtx while the handshake is not done; every HTTP request of
// the session ends with it.
func (c *Conn) connect(ctx, connectCtx context.Context, name string, transport func(*http.Client) sdk.Transport, hc *http.Client) error {
	lifeCtx, cancelLife := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(connectCtx, cancelLife)
	bound := *hc
	bound.Transport = boundTransport{base: c.rec, life: lifeCtx}
	t := transport(&bound)
	client := sdk.NewClient(&sdk.Implementation{Name: "managed-agents", Version: "v1"}, &sdk.ClientOptions{
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Capabilities: &sdk.ClientCapabilities{},
	})
	session, err := client.Connect(connectCtx, lifetimeTransport{Transport: t, ctx: lifeCtx}, nil)
	if err == nil && !stop() {
		// The connect timeout fired as the handshake ended: the session's context is gone.
		_ = session.Close()
		session, err = nil, context.Cause(connectCtx)
	}
	if err != nil {
		stop()
		cancelLife()
		if ce := context.Cause(connectCtx); ce != nil && !errors.Is(err, ce) {
			err = fmt.Errorf("%w (%w)", err, ce)
		}
		return err
	}
	c.session, c.cancel, c.transport = session, cancelLife, name
	return nil
}

// lifetimeTransport connects its transport with the session's own context, not the
// handshake's.
type lifetimeTransport struct {
	sdk.Transport
	ctx context.Context
}

func (t lifetimeTransport) Connect(context.Context) (sdk.Connection, error) {
	return t.Transport.Connect(t.ctx)
}

// Transport names the transport in use: "streamable-http" or "sse".
func (c *Conn) Transport() string { return c.transport }

// ListTools lists every tool the server offers, over every page. Tools without a name and
// repeated names (after the first) are left out; a missing description is "", a missing
// or invalid input schema becomes {"type":"object"}.
//
// At most MaxTools tools are read; the rest of a longer listing is ignored.
func (c *Conn) ListTools(ctx context.Context) ([]Tool, error) {
	before := c.rec.authFailures.Load()
	var out []Tool
	seen := map[string]bool{}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			if we := serverError(err); we != nil && we.Code == jsonrpc.CodeMethodNotFound && len(out) == 0 {
				return nil, nil // a server without tools
			}
			return nil, c.callError(ctx, before, err, "list tools")
		}
		if t == nil || t.Name == "" || seen[t.Name] {
			continue
		}
		if len(out) == MaxTools {
			break // a server that lists without end must not fill the worker's memory
		}
		seen[t.Name] = true
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: objectSchema(t.InputSchema)})
	}
	return out, nil
}

// MaxTools bounds the tools read from one server's listing: far more than a model can use
// (an agent offers at most a few hundred), little enough to keep in memory.
const MaxTools = 1000

// CallTool calls one tool. args null or empty means {}; anything but a JSON object is
// refused with ErrInvalidArguments before anything is sent.
//
// What the tool reports is a Result, never a Go error: a tool error (isError), a JSON-RPC
// error answer, and a call cut by limits.Timeout (Result.TimedOut; the server is told
// to cancel) all come back with IsError and a text saying what happened. Go errors are
// for the caller's context ending (wrapping ctx.Err()) and for the transport: they wrap
// ErrAuth (401/403) or ErrConnect.
func (c *Conn) CallTool(ctx context.Context, name string, args json.RawMessage, limits CallLimits) (Result, error) {
	args, err := objectArgs(args)
	if err != nil {
		return Result{}, c.errorf(ErrInvalidArguments, err, "tool %q", name)
	}
	timeout := limits.Timeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	maxChars := limits.MaxOutputChars
	if maxChars <= 0 {
		maxChars = DefaultMaxOutputChars
	}
	errTimeout := errors.New("mcp tool call timeout")
	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	before := c.rec.authFailures.Load()
	res, err := c.session.CallTool(callCtx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if c.rec.authFailures.Load() == before && ctx.Err() == nil && context.Cause(callCtx) == errTimeout {
			return Result{IsError: true, TimedOut: true, Content: []wire.ContentBlock{
				textBlock(fmt.Sprintf("MCP tool %q on server %q timed out after %s and was cancelled.", name, c.server.Name, timeout)),
			}}, nil
		}
		if we := serverError(err); we != nil && c.rec.authFailures.Load() == before {
			return Result{IsError: true, Content: []wire.ContentBlock{
				textBlock(c.redact(fmt.Sprintf("MCP server %q refused the call of %q: %s (code %d)", c.server.Name, name, we.Message, we.Code))),
			}}, nil
		}
		return Result{}, c.callError(ctx, before, err, fmt.Sprintf("call tool %q", name))
	}
	return convertResult(res, maxChars), nil
}

// serverError is the JSON-RPC error the server answered with, if it did (the SDK also
// reports some transport failures as JSON-RPC errors of its own).
func serverError(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return nil
	}
	switch we.Code {
	case -32005, -32003, -32004: // rejected by transport, client closing, server closing
		return nil
	}
	return we
}

func (c *Conn) callError(ctx context.Context, authBefore int64, err error, what string) error {
	if c.rec.authFailures.Load() != authBefore {
		return c.errorf(ErrAuth, err, "%s: the server answered HTTP %d", what, c.rec.lastAuthStatus())
	}
	if ctx.Err() != nil {
		return c.errorf(context.Cause(ctx), err, "%s", what)
	}
	return c.errorf(ErrConnect, err, "%s", what)
}

// Close ends the session (a streamable session is deleted on the server, best effort).
// It is safe to call more than once.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		// Deleting the session on the server is best effort: a server that does not
		// answer holds Close for closeGrace at most.
		cut := time.AfterFunc(closeGrace, c.cancel)
		c.closeErr = c.session.Close()
		cut.Stop()
		c.cancel()
		c.closeIdle()
	})
	return c.closeErr
}

func (c *Conn) closeIdle() {
	if c.owned != nil {
		c.owned.CloseIdleConnections()
	}
}

// connError is what this package returns: a message naming the server, with the URL's
// query and the token redacted, that unwraps to its kind (ErrAuth, …) and its cause.
type connError struct {
	msg         string
	kind, cause error
}

func (e *connError) Error() string   { return e.msg }
func (e *connError) Unwrap() []error { return []error{e.kind, e.cause} }

func (c *Conn) errorf(kind, cause error, format string, args ...any) error {
	msg := fmt.Sprintf("mcp server %q: %s: %v: %v", c.server.Name, fmt.Sprintf(format, args...), kind, cause)
	return &connError{msg: c.redact(msg), kind: kind, cause: cause}
}

// redactor hides what may be secret in an error message: the token and the URL's query
// (some servers take a key there); the SDK and net/http put the URL in theirs.
func redactor(rawURL, token string) func(string) string {
	var secrets []string
	if token != "" {
		secrets = append(secrets, token)
	}
	if u, err := url.Parse(rawURL); err == nil {
		if u.RawQuery != "" {
			secrets = append(secrets, u.RawQuery)
		}
		if u.User != nil {
			secrets = append(secrets, u.User.String())
		}
	}
	return func(s string) string {
		for _, x := range secrets {
			s = strings.ReplaceAll(s, x, "REDACTED")
		}
		return s
	}
}

// objectArgs is the call's arguments as a JSON object: null or nothing is {}.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
		return json.RawMessage(`{}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &m); err != nil || m == nil {
		return nil, fmt.Errorf("got %.40s", trimmed)
	}
	return json.RawMessage(trimmed), nil
}

// objectSchema is a tool's input schema as a JSON object of type "object"; a missing or
// unusable one is {"type":"object"}, one without a type gets "type":"object".
func objectSchema(schema any) json.RawMessage {
	fallback := json.RawMessage(`{"type":"object"}`)
	raw, err := json.Marshal(schema)
	if err != nil {
		return fallback
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return fallback
	}
	switch typ, ok := m["type"]; {
	case !ok:
		m["type"] = json.RawMessage(`"object"`)
	case string(typ) != `"object"`:
		return fallback
	default:
		return raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return fallback
	}
	return out
}
