// Package mcpsession connects one session's MCP servers for the worker: it lists their tools
// when a turn first needs them and calls them, each call at most once per call id.
//
// It knows nothing of the database: credentials come through Tokens and the at-most-once
// record through Claims, both defined here and implemented by the application's wiring.
package mcpsession

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcpurl"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Token is a credential's secret for one MCP server.
type Token struct {
	Value string
	// CredentialID names the credential, for a refresh after the server refused the token.
	CredentialID string
	// Refreshable: the credential can get a new token (an mcp_oauth credential with refresh).
	Refreshable bool
}

// ErrNoToken is what Tokens returns when no vault of the session has a credential for the
// server; the server is then called without one.
var ErrNoToken = errors.New("no credential for this MCP server")

// ErrCredentialUnusable marks (wrapped) a Tokens error that is the credential's fault: it
// cannot be decrypted or refreshed. The server is then reported as an authentication failure;
// other errors (the database) as a server that could not be reached.
var ErrCredentialUnusable = errors.New("the credential cannot be used")

// Tokens finds the credential of a session's vaults for an MCP server.
type Tokens interface {
	// Token returns the token for serverURL from the session's vaults (refreshed first if it
	// has expired), or ErrNoToken.
	Token(ctx context.Context, sessionID, serverURL string) (Token, error)
	// Refresh gets a new token for the credential after the server refused the token
	// refused (the stored one, if someone else refreshed since).
	Refresh(ctx context.Context, sessionID, credentialID, refused string) (Token, error)
}

// Claims records that a call is about to be sent, and its answer once it came.
type Claims interface {
	// ClaimMCPCall returns first=false when the call was claimed before, with the answer the
	// earlier attempt recorded (nil when it recorded none).
	ClaimMCPCall(ctx context.Context, sessionID, toolUseID string) (first bool, result json.RawMessage, err error)
	// RecordMCPResult keeps a claimed call's answer.
	RecordMCPResult(ctx context.Context, sessionID, toolUseID string, result json.RawMessage) error
}

// Config bounds connections and calls.
type Config struct {
	// HTTPClient carries every request (nil: the mcp package's default).
	HTTPClient *http.Client
	// ConnectTimeout bounds connecting and listing one server (0: mcp.DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call (0: mcp.DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxOutputChars caps the text of one result (0: mcp.DefaultMaxOutputChars).
	MaxOutputChars int
}

// Connector lists and calls the MCP servers of sessions. It is safe for concurrent use.
type Connector struct {
	cfg    Config
	tokens Tokens
	claims Claims
	log    *slog.Logger
}

// New returns a Connector; tokens may be nil (no credentials: every server is called
// without one).
func New(cfg Config, tokens Tokens, claims Claims, logger *slog.Logger) *Connector {
	if logger == nil {
		logger = slog.Default()
	}
	return &Connector{cfg: cfg, tokens: tokens, claims: claims, log: logger}
}

// Failure is a server that could not be listed.
type Failure struct {
	Server string
	// Auth: the server refused the credentials (401/403), or a token could not be had.
	Auth    bool
	Message string
}

// List connects to every server at once and lists its tools. Servers that fail are absent
// from the listing and reported as failures; blocked, when not empty, fails every server with
// that reason without connecting (an environment whose networking does not allow MCP
// servers). The listing keeps the order of servers.
func (c *Connector) List(ctx context.Context, sessionID string, servers []wire.MCPServer, blocked string) ([]agent.MCPServerTools, []Failure) {
	if blocked != "" {
		failures := make([]Failure, len(servers))
		for i, s := range servers {
			failures[i] = Failure{Server: s.Name, Message: fmt.Sprintf("MCP server %q was not contacted: %s", s.Name, blocked)}
		}
		return nil, failures
	}
	type outcome struct {
		tools   []agent.MCPTool
		failure *Failure
	}
	outs := make([]outcome, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			tools, err := c.list(ctx, sessionID, s)
			if err != nil {
				f := failureOf(s.Name, err)
				outs[i].failure = &f
				c.log.WarnContext(ctx, "MCP server not listed", "session_id", sessionID, "mcp_server", s.Name, "error", err)
				return
			}
			outs[i].tools = tools
		})
	}
	wg.Wait()
	var listing []agent.MCPServerTools
	var failures []Failure
	for i, o := range outs {
		if o.failure != nil {
			failures = append(failures, *o.failure)
			continue
		}
		listing = append(listing, agent.MCPServerTools{Server: servers[i].Name, Tools: o.tools})
	}
	return listing, failures
}

func (c *Connector) list(ctx context.Context, sessionID string, s wire.MCPServer) ([]agent.MCPTool, error) {
	conn, err := c.dial(ctx, sessionID, s)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	lctx, cancel := context.WithTimeout(ctx, c.connectTimeout())
	defer cancel()
	listed, err := conn.ListTools(lctx)
	if err != nil {
		return nil, err
	}
	tools := make([]agent.MCPTool, 0, min(len(listed), maxToolsPerServer))
	budget := maxListingBytes
	for _, t := range listed {
		if !usableName(t.Name) {
			c.log.WarnContext(ctx, "MCP tool left out: its name is not 1–128 printable characters", "session_id", sessionID, "mcp_server", s.Name)
			continue
		}
		tool := agent.MCPTool{Name: t.Name, Description: capDescription(t.Description), InputSchema: capSchema(t.InputSchema)}
		budget -= len(tool.Name) + len(tool.Description) + len(tool.InputSchema)
		if budget < 0 || len(tools) == maxToolsPerServer {
			c.log.WarnContext(ctx, "MCP listing cut: the server offers more than a model request can carry", "session_id", sessionID, "mcp_server", s.Name,
				"offered", len(listed), "kept", len(tools))
			break
		}
		tools = append(tools, tool)
	}
	return tools, nil
}

// Bounds on what one server may put into every model request of a turn (and into the stored
// listing): a server is third-party input. An agent offers at most 256 tools in all (the
// configuration's limit), so more from one server could not be offered anyway.
const (
	maxToolsPerServer   = 256
	maxListingBytes     = 1 << 20
	maxDescriptionChars = 10_000
	maxSchemaBytes      = 64 << 10
	maxToolNameChars    = 128
)

// usableName: a name the configuration could name (1–128 characters) and the log can store
// unchanged: valid UTF-8 without control characters (a NUL could not be stored in jsonb, and
// a rewritten name would call a different tool).
func usableName(name string) bool {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxToolNameChars {
		return false
	}
	return !strings.ContainsFunc(name, unicode.IsControl)
}

// capDescription keeps at most maxDescriptionChars of valid UTF-8 without NULs.
func capDescription(d string) string {
	d = strings.ReplaceAll(strings.ToValidUTF8(d, "\uFFFD"), "\x00", "")
	if utf8.RuneCountInString(d) <= maxDescriptionChars {
		return d
	}
	return string([]rune(d)[:maxDescriptionChars]) + " […]"
}

// capSchema replaces a schema too large to offer with the empty object schema: the model can
// still call the tool, and the server validates what it gets.
func capSchema(s json.RawMessage) json.RawMessage {
	if len(s) > maxSchemaBytes {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s
}

// dial connects to s with the session's credential for it; a server that refuses the token
// is dialled once more with a refreshed one when the credential can refresh.
func (c *Connector) dial(ctx context.Context, sessionID string, s wire.MCPServer) (*mcp.Conn, error) {
	tok, err := c.token(ctx, sessionID, s.URL)
	if err != nil {
		return nil, err
	}
	conn, err := mcp.Dial(ctx, mcp.Server{Name: s.Name, URL: s.URL}, c.options(tok.Value))
	if err == nil || !errors.Is(err, mcp.ErrAuth) || !tok.Refreshable {
		return conn, err
	}
	fresh, rerr := c.tokens.Refresh(ctx, sessionID, tok.CredentialID, tok.Value)
	if rerr != nil {
		return nil, errors.Join(err, &tokenError{err: fmt.Errorf("refresh the credential %s: %w", tok.CredentialID, rerr), auth: true})
	}
	return mcp.Dial(ctx, mcp.Server{Name: s.Name, URL: s.URL}, c.options(fresh.Value))
}

func (c *Connector) token(ctx context.Context, sessionID, serverURL string) (Token, error) {
	if c.tokens == nil {
		return Token{}, nil
	}
	tok, err := c.tokens.Token(ctx, sessionID, serverURL)
	switch {
	case errors.Is(err, ErrNoToken):
		return Token{}, nil
	case err != nil:
		return Token{}, &tokenError{err: fmt.Errorf("the credential for %s: %w", mcpurl.Origin(serverURL), err), auth: errors.Is(err, ErrCredentialUnusable)}
	}
	return tok, nil
}

// tokenError is a credential that could not be read or refreshed; auth when that is the
// credential's fault (an authentication failure as far as the session is concerned).
type tokenError struct {
	err  error
	auth bool
}

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

func (c *Connector) options(token string) mcp.Options {
	return mcp.Options{HTTPClient: c.cfg.HTTPClient, Token: token, ConnectTimeout: c.connectTimeout()}
}

func (c *Connector) connectTimeout() time.Duration {
	if c.cfg.ConnectTimeout > 0 {
		return c.cfg.ConnectTimeout
	}
	return mcp.DefaultConnectTimeout
}

func failureOf(server string, err error) Failure {
	var te *tokenError
	if errors.As(err, &te) && !errors.Is(err, mcp.ErrAuth) {
		return Failure{Server: server, Auth: te.auth, Message: fmt.Sprintf("MCP server %q was not contacted: the session's credential for it could not be used: %v", server, err)}
	}
	auth := errors.Is(err, mcp.ErrAuth)
	what := "could not be reached"
	if auth {
		what = "refused the session's credentials"
	}
	return Failure{Server: server, Auth: auth, Message: fmt.Sprintf("MCP server %q %s: %v", server, what, err)}
}

// Caller returns the agent.MCPCaller of one session with these servers.
func (c *Connector) Caller(sessionID string, servers []wire.MCPServer) agent.MCPCaller {
	return &caller{c: c, sessionID: sessionID, servers: servers}
}

type caller struct {
	c         *Connector
	sessionID string
	servers   []wire.MCPServer
}

// Texts of results the server did not produce.
const unknownOutcomeText = "The outcome of this MCP tool call is unknown: the worker running it stopped before its result was recorded. " +
	"It was not sent again, because calling an MCP tool twice could repeat its effects; check before calling it again."

// CallMCP implements agent.MCPCaller: it claims the call, then connects, calls, keeps the
// answer with the claim and closes. A claim that exists already means an earlier attempt may
// have sent the call, so it is not sent again: the answer that attempt kept is returned, or,
// without one, a result saying the outcome is unknown. Connection and authentication
// failures are error results the model can read; only a cancelled ctx is an error.
func (cl *caller) CallMCP(ctx context.Context, callID, server, tool string, input json.RawMessage) (agent.ToolResult, error) {
	var srv *wire.MCPServer
	for i := range cl.servers {
		if cl.servers[i].Name == server {
			srv = &cl.servers[i]
		}
	}
	if srv == nil {
		return errorResult(fmt.Sprintf("The MCP server %q is not declared by this session's agent.", server)), nil
	}
	first, recorded, err := cl.c.claims.ClaimMCPCall(ctx, cl.sessionID, callID)
	if err != nil {
		return agent.ToolResult{}, fmt.Errorf("claim MCP call %s: %w", callID, err)
	}
	if !first {
		if res, ok := decodeRecorded(recorded); ok {
			return res, nil
		}
		cl.c.log.WarnContext(ctx, "MCP call claimed by an earlier attempt; not sent again", "session_id", cl.sessionID, "tool_use_id", callID, "mcp_server", server, "tool", tool)
		return errorResult(unknownOutcomeText), nil
	}
	res, err := cl.call(ctx, *srv, tool, input)
	if err != nil {
		return agent.ToolResult{}, err
	}
	cl.record(ctx, callID, res)
	return res, nil
}

// call connects, calls and closes. A cancelled ctx is an error unless the server's answer
// came first: then the answer is returned (and recorded), though the step will not append it.
func (cl *caller) call(ctx context.Context, srv wire.MCPServer, tool string, input json.RawMessage) (agent.ToolResult, error) {
	conn, err := cl.c.dial(ctx, cl.sessionID, srv)
	if err != nil {
		if ctx.Err() != nil {
			return agent.ToolResult{}, ctx.Err()
		}
		return errorResult(failureOf(srv.Name, err).Message), nil
	}
	defer conn.Close()
	res, err := conn.CallTool(ctx, tool, input, mcp.CallLimits{Timeout: cl.c.cfg.CallTimeout, MaxOutputChars: cl.c.cfg.MaxOutputChars})
	switch {
	case err == nil:
		return agent.ToolResult{Content: res.Content, IsError: res.IsError}, nil
	case ctx.Err() != nil:
		return agent.ToolResult{}, ctx.Err()
	case errors.Is(err, mcp.ErrInvalidArguments):
		return errorResult(fmt.Sprintf("The input of %s is not valid: %v", tool, err)), nil
	}
	return errorResult(fmt.Sprintf("The MCP tool %s of server %q failed: %v", tool, srv.Name, err)), nil
}

// recordTimeout bounds keeping an answer; it runs even when the step's ctx has ended, since
// an answer a stopping worker got is exactly what its retry needs.
const recordTimeout = 10 * time.Second

// recorded is a call's answer as the claim keeps it.
type recorded struct {
	Content []wire.ContentBlock `json:"content"`
	IsError bool                `json:"is_error"`
}

func (cl *caller) record(ctx context.Context, callID string, res agent.ToolResult) {
	content := res.Content
	if content == nil {
		content = wire.NewTextContent(res.Text)
	}
	raw, err := json.Marshal(recorded{Content: content, IsError: res.IsError})
	if err == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		err = cl.c.claims.RecordMCPResult(rctx, cl.sessionID, callID, raw)
	}
	if err != nil {
		// The answer still goes to the log through the step; only a crash before that loses it.
		cl.c.log.WarnContext(ctx, "MCP call's answer not kept with its claim", "session_id", cl.sessionID, "tool_use_id", callID, "error", err)
	}
}

func decodeRecorded(raw json.RawMessage) (agent.ToolResult, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return agent.ToolResult{}, false
	}
	var r recorded
	if json.Unmarshal(raw, &r) != nil || r.Content == nil {
		return agent.ToolResult{}, false
	}
	return agent.ToolResult{Content: r.Content, IsError: r.IsError}, true
}

func errorResult(text string) agent.ToolResult {
	return agent.ToolResult{Text: text, IsError: true}
}
