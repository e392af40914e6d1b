package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
)

// TestResponsesAreBounded: a server that answers with more than the client reads fails the
// call instead of filling the worker's memory, on both transports.
func TestResponsesAreBounded(t *testing.T) {
	t.Parallel()
	flood := strings.Repeat("x", 40<<20)
	for _, sseOnly := range []bool{false, true} {
		opts := []mcptest.Option{mcptest.WithTool(&sdk.Tool{Name: "flood", Description: "answers 40 MiB", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: flood}}}, nil
			})}
		if sseOnly {
			opts = append(opts, mcptest.WithSSEOnly())
		}
		srv := mcptest.Start(t, opts...)
		conn, err := mcp.Dial(t.Context(), mcp.Server{Name: "s", URL: srv.URL}, mcp.Options{})
		require.NoError(t, err)
		_, err = conn.CallTool(t.Context(), "flood", json.RawMessage(`{}`), mcp.CallLimits{})
		require.Error(t, err, "sse only %v", sseOnly)
		require.NoError(t, conn.Close())
	}
}

func TestListingsAreBounded(t *testing.T) {
	t.Parallel()
	var opts []mcptest.Option
	for i := range mcp.MaxTools + 50 {
		opts = append(opts, mcptest.WithTool(&sdk.Tool{Name: "t" + strings.Repeat("0", 4-len(itoa(i))) + itoa(i), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			}))
	}
	srv := mcptest.Start(t, opts...)
	conn, err := mcp.Dial(t.Context(), mcp.Server{Name: "s", URL: srv.URL}, mcp.Options{})
	require.NoError(t, err)
	defer conn.Close()
	tools, err := conn.ListTools(t.Context())
	require.NoError(t, err)
	require.Len(t, tools, mcp.MaxTools)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
