package mcpsession_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
	"github.com/managed-agents/managed-agents/internal/mcpsession"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// memClaims keeps claims in memory (the worker's are rows in PostgreSQL, tested end to end).
type memClaims struct {
	mu      sync.Mutex
	ids     map[string]bool
	results map[string]json.RawMessage
}

func (m *memClaims) ClaimMCPCall(_ context.Context, _, id string) (bool, json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil {
		m.ids, m.results = map[string]bool{}, map[string]json.RawMessage{}
	}
	if m.ids[id] {
		return false, m.results[id], nil
	}
	m.ids[id] = true
	return true, nil, nil
}

func (m *memClaims) RecordMCPResult(_ context.Context, _, id string, result json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, done := m.results[id]; !done {
		m.results[id] = result
	}
	return nil
}

// forget drops what was recorded of a call, as when its first attempt died before the answer.
func (m *memClaims) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.results, id)
}

// tokens hands out a token per server URL and counts refreshes.
type tokens struct {
	mu        sync.Mutex
	byURL     map[string]mcpsession.Token
	fresh     string
	refreshes int
	err       error
}

func (tk *tokens) Token(_ context.Context, _, url string) (mcpsession.Token, error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.err != nil {
		return mcpsession.Token{}, tk.err
	}
	t, ok := tk.byURL[url]
	if !ok {
		return mcpsession.Token{}, mcpsession.ErrNoToken
	}
	return t, nil
}

func (tk *tokens) Refresh(_ context.Context, _, credentialID, _ string) (mcpsession.Token, error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.refreshes++
	return mcpsession.Token{Value: tk.fresh, CredentialID: credentialID, Refreshable: true}, nil
}

func TestListReportsEachServer(t *testing.T) {
	t.Parallel()
	good := mcptest.Start(t)
	locked := mcptest.Start(t, mcptest.WithBearer(func(tok string) bool { return tok == "right" }))
	refreshed := mcptest.Start(t, mcptest.WithBearer(func(tok string) bool { return tok == "fresh" }))
	tk := &tokens{fresh: "fresh", byURL: map[string]mcpsession.Token{
		locked.URL:    {Value: "wrong", CredentialID: "vcrd_1"},
		refreshed.URL: {Value: "expired", CredentialID: "vcrd_2", Refreshable: true},
	}}
	c := mcpsession.New(mcpsession.Config{}, tk, &memClaims{}, nil)
	servers := []wire.MCPServer{
		{Type: "url", Name: "good", URL: good.URL},
		{Type: "url", Name: "down", URL: mcptest.ClosedURL(t)},
		{Type: "url", Name: "locked", URL: locked.URL},
		{Type: "url", Name: "refreshed", URL: refreshed.URL},
	}
	listing, failures := c.List(t.Context(), "sesn_1", servers, "")
	require.Len(t, listing, 2)
	require.Equal(t, "good", listing[0].Server)
	require.Equal(t, "refreshed", listing[1].Server, "a refused token is refreshed once and the server listed")
	require.Equal(t, 1, tk.refreshes, "only the refreshable credential is refreshed")
	var names []string
	for _, tl := range listing[0].Tools {
		names = append(names, tl.Name)
	}
	require.Subset(t, names, []string{"echo", "add", "slow", "fail", "big"})
	require.Len(t, failures, 2)
	require.Equal(t, "down", failures[0].Server)
	require.False(t, failures[0].Auth)
	require.Equal(t, "locked", failures[1].Server)
	require.True(t, failures[1].Auth)
	require.NotContains(t, failures[1].Message, "wrong", "tokens never appear in messages")
	require.Contains(t, refreshed.Tokens(), "fresh")

	// A blocked environment contacts nobody.
	before := len(good.Tokens())
	listing, failures = c.List(t.Context(), "sesn_1", servers[:1], "networking is limited")
	require.Empty(t, listing)
	require.Len(t, failures, 1)
	require.Contains(t, failures[0].Message, "networking is limited")
	require.Len(t, good.Tokens(), before)

	// A credential that cannot be used is an authentication failure; a failure to read it
	// (the database) is not the credential's.
	tk.err = fmt.Errorf("%w: the key is gone", mcpsession.ErrCredentialUnusable)
	_, failures = c.List(t.Context(), "sesn_1", servers[:1], "")
	require.Len(t, failures, 1)
	require.True(t, failures[0].Auth)
	require.Contains(t, failures[0].Message, "was not contacted")
	tk.err = errors.New("connection refused")
	_, failures = c.List(t.Context(), "sesn_1", servers[:1], "")
	require.Len(t, failures, 1)
	require.False(t, failures[0].Auth)
}

func TestListCapsWhatAServerOffers(t *testing.T) {
	t.Parallel()
	huge := map[string]any{"type": "object", "description": strings.Repeat("x", 70<<10)}
	srv := mcptest.Start(t,
		mcptest.WithTool(&sdk.Tool{Name: "chatty", Description: strings.Repeat("word ", 5000), InputSchema: huge},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			}))
	c := mcpsession.New(mcpsession.Config{}, nil, &memClaims{}, nil)
	listing, failures := c.List(t.Context(), "sesn_1", []wire.MCPServer{{Type: "url", Name: "s", URL: srv.URL}}, "")
	require.Empty(t, failures)
	for _, tl := range listing[0].Tools {
		if tl.Name == "chatty" {
			require.LessOrEqual(t, len([]rune(tl.Description)), 10_004)
			require.JSONEq(t, `{"type":"object"}`, string(tl.InputSchema))
			return
		}
	}
	t.Fatal("chatty was not listed")
}

func TestCallIsSentAtMostOnce(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	claims := &memClaims{}
	c := mcpsession.New(mcpsession.Config{}, nil, claims, nil)
	caller := c.Caller("sesn_1", []wire.MCPServer{{Type: "url", Name: "s", URL: srv.URL}, {Type: "url", Name: "down", URL: mcptest.ClosedURL(t)}})

	res, err := caller.CallMCP(t.Context(), "sevt_1", "s", "echo", json.RawMessage(`{"text":"hi"}`))
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, "hi", *res.Content[0].Text)

	res, err = caller.CallMCP(t.Context(), "sevt_1", "s", "echo", json.RawMessage(`{"text":"hi"}`))
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, "hi", *res.Content[0].Text, "a retry gets the answer its first attempt kept")
	claims.forget("sevt_1")
	res, err = caller.CallMCP(t.Context(), "sevt_1", "s", "echo", json.RawMessage(`{"text":"hi"}`))
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "outcome of this MCP tool call is unknown")
	require.Equal(t, 1, srv.Calls("echo"), "a claimed call is never sent again")

	res, err = caller.CallMCP(t.Context(), "sevt_2", "down", "echo", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Text, `MCP server "down" could not be reached`)

	res, err = caller.CallMCP(t.Context(), "sevt_3", "nowhere", "echo", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.True(t, res.IsError)

	res, err = caller.CallMCP(t.Context(), "sevt_4", "s", "echo", json.RawMessage(`[1]`))
	require.NoError(t, err)
	require.True(t, res.IsError, "arguments that are not an object are the model's mistake")

	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-srv.Started("slow")
		cancel()
	}()
	_, err = caller.CallMCP(ctx, "sevt_5", "s", "slow", json.RawMessage(`{"ms":10000}`))
	require.ErrorIs(t, err, context.Canceled, "an interrupt is not a result")
}

// BenchmarkCall measures one MCP tool call as the worker makes it (claim, connect,
// initialize, call, close) against a local server, beside a call on a connection kept open:
// the difference is what caching connections per session would save.
func BenchmarkCall(b *testing.B) {
	srv := mcptest.Start(b)
	c := mcpsession.New(mcpsession.Config{}, nil, &memClaims{}, nil)
	b.Run("connect-per-call", func(b *testing.B) {
		caller := c.Caller("sesn_1", []wire.MCPServer{{Type: "url", Name: "s", URL: srv.URL}})
		for i := 0; b.Loop(); i++ {
			res, err := caller.CallMCP(b.Context(), "sevt_"+strconv.Itoa(i), "s", "echo", json.RawMessage(`{"text":"hi"}`))
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("kept-connection", func(b *testing.B) {
		conn, err := mcp.Dial(b.Context(), mcp.Server{Name: "s", URL: srv.URL}, mcp.Options{})
		require.NoError(b, err)
		defer conn.Close()
		for b.Loop() {
			if _, err := conn.CallTool(b.Context(), "echo", json.RawMessage(`{"text":"hi"}`), mcp.CallLimits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			if _, f := c.List(b.Context(), "sesn_1", []wire.MCPServer{{Type: "url", Name: "s", URL: srv.URL}}, ""); len(f) > 0 {
				b.Fatal(f)
			}
		}
	})
}
