package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func returning(name string, r *sdk.CallToolResult) mcptest.Option {
	return mcptest.WithTool(&sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return r, nil })
}

func ptr(s string) *string { return &s }

func source(t *testing.T, m map[string]string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// Each kind of MCP content, sent by a real server, becomes a block agent.mcp_tool_result allows.
func TestContentConversion(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	pdf := []byte("%PDF-1.4 not really")
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct {
		name   string
		result *sdk.CallToolResult
		want   []wire.ContentBlock
		limit  int
	}{
		{name: "text blocks", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("a")}, {Type: "text", Text: ptr("b")}}},
		{name: "png image", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: png}}},
			want: []wire.ContentBlock{{Type: "image", Source: source(t, map[string]string{"type": "base64", "media_type": "image/png", "data": b64(png)})}}},
		{name: "an image type the wire refuses", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/bmp", Data: png}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("[image (image/bmp, 18 bytes) not shown: unsupported type or too large]")}}},
		{name: "audio", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("[audio (audio/wav, 4 bytes) not shown: audio is not supported]")}}},
		{name: "resource link", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///r.txt", Name: "r", MIMEType: "text/plain", Description: "a file"}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("[resource link: file:///r.txt (r), text/plain: a file]")}}},
		{name: "embedded text resource", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a", MIMEType: "text/plain", Text: "inside"}}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("inside")}}},
		{name: "embedded PDF", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.pdf", MIMEType: "application/pdf", Blob: pdf}}}},
			want: []wire.ContentBlock{{Type: "document", Source: source(t, map[string]string{"type": "base64", "media_type": "application/pdf", "data": b64(pdf)})}}},
		{name: "embedded image", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.png", MIMEType: "image/png", Blob: png}}}},
			want: []wire.ContentBlock{{Type: "image", Source: source(t, map[string]string{"type": "base64", "media_type": "image/png", "data": b64(png)})}}},
		{name: "embedded other binary", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.zip", MIMEType: "application/zip", Blob: []byte("PK")}}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("[binary resource file:///a.zip (application/zip, 2 bytes) not shown]")}}},
		{name: "structured content alone", result: &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"n": 1}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr(`{"n":1}`)}}},
		{name: "structured content beside content is not repeated", result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "n=1"}}, StructuredContent: map[string]any{"n": 1}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("n=1")}}},
		{name: "nothing", result: &sdk.CallToolResult{Content: []sdk.Content{}}, want: []wire.ContentBlock{}},
		{name: "the cap counts characters over all blocks, not bytes", limit: 5,
			result: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "héé"}, &sdk.ImageContent{MIMEType: "image/png", Data: png}, &sdk.TextContent{Text: "ßßß"}, &sdk.TextContent{Text: "gone"}}},
			want: []wire.ContentBlock{{Type: "text", Text: ptr("héé")},
				{Type: "image", Source: source(t, map[string]string{"type": "base64", "media_type": "image/png", "data": b64(png)})},
				{Type: "text", Text: ptr("ßß")}, {Type: "text", Text: ptr("[output truncated: 5 of 10 characters of text shown]")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mcptest.Start(t, returning("t", tc.result))
			c := dial(t, srv.URL, mcp.Options{})
			res, err := c.CallTool(t.Context(), "t", nil, mcp.CallLimits{MaxOutputChars: tc.limit})
			require.NoError(t, err)
			require.False(t, res.IsError)
			require.Equal(t, tc.want, res.Content)
			require.NoError(t, wire.ValidateContent("content", res.Content, wire.ToolResultBlocks))
			require.Equal(t, 1, srv.Calls("t"))
		})
	}
}
