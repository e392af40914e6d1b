package agent_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// A 1×1 PNG.
var dotPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

// read of an image, asked for by the fake model (which acts on the latest user.message, not
// on the system prompt that now opens with the harness preamble), ends in an
// agent.tool_result whose content holds the image block with the file's bytes.
func TestReadOfAnImageIsAnImageToolResult(t *testing.T) {
	t.Parallel()
	core := agent.NewCore(fake.New())
	ag := agentWith(t, allowTools)
	sb := newLocalSandbox(t)
	require.NoError(t, sb.sb.WriteFile(t.Context(), "shot.png", dotPNG))
	l := agent.NewMemoryLog()
	l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool read {\"file_path\":\"shot.png\"}"}]}`), true)
	_, err := core.ModelTurn(t.Context(), input(ag, l, l, nil))
	require.NoError(t, err)
	use := ofType(l.Events(), wire.EventAgentToolUse)
	require.Len(t, use, 1, "the fake model still calls the tool its user message names")
	require.NoError(t, core.ExecuteTool(t.Context(), input(ag, l, l, sb), use[0]))

	results := ofType(l.Events(), wire.EventAgentToolResult)
	require.Len(t, results, 1)
	var body struct {
		Content []wire.ContentBlock `json:"content"`
		IsError bool                `json:"is_error"`
	}
	require.NoError(t, json.Unmarshal(results[0].Body, &body))
	require.False(t, body.IsError)
	require.NoError(t, wire.ValidateContent("content", body.Content, wire.ToolResultBlocks))
	require.Len(t, body.Content, 2)
	require.Equal(t, wire.ContentTypeImage, body.Content[0].Type)
	var src wire.BlockSource
	require.NoError(t, json.Unmarshal(body.Content[0].Source, &src))
	require.Equal(t, "image/png", *src.MediaType)
	require.Equal(t, base64.StdEncoding.EncodeToString(dotPNG), *src.Data)
	require.Equal(t, wire.ContentTypeText, body.Content[1].Type)
	require.Contains(t, *body.Content[1].Text, "shot.png: PNG image, 1×1 pixels")

	// The next request sends the model the image itself, in the tool_result block.
	scripted := &scriptedModel{responses: []model.Response{{Content: []model.Block{text("a red dot")}, StopReason: model.StopEndTurn}}}
	_, err = agent.NewCore(scripted).ModelTurn(t.Context(), input(ag, l, l, sb))
	require.NoError(t, err)
	require.Len(t, scripted.requests, 1)
	msgs := scripted.requests[0].Messages
	last := msgs[len(msgs)-1]
	require.Equal(t, "user", last.Role)
	i := slices.IndexFunc(last.Content, func(b model.Block) bool { return b.Type == model.BlockToolResult })
	require.GreaterOrEqual(t, i, 0, "%+v", last.Content)
	sent := last.Content[i].Content
	require.NotEmpty(t, sent)
	require.Equal(t, model.BlockImage, sent[0].Type)
	require.JSONEq(t, string(body.Content[0].Source), string(sent[0].Source))
}
