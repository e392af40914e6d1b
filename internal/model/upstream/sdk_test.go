package upstream_test

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// The official SDK reads the server as an independent implementation of the wire format:
// what it sends passes the checks, and what the server answers, JSON or a stream, decodes
// and accumulates into the message the Script generated.

const testModel = "claude-sonnet-4-5"

func sdkClient(s *upstream.Server, opts ...option.RequestOption) sdk.Client {
	return sdk.NewClient(append([]option.RequestOption{
		option.WithBaseURL(s.URL()), option.WithAPIKey(upstream.DefaultAPIKey), option.WithMaxRetries(0),
	}, opts...)...)
}

func TestSDKReadsJSONAndStream(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(func(req *upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{
			{Type: "text", Text: "Let me look that up for you, with a few words more than a delta holds."},
			{Type: "tool_use", ID: "toolu_1", Name: "lookup", Input: json.RawMessage(`{"query": "weather in Paris"}`)},
		}}
	}))
	client := sdkClient(srv)
	params := sdk.MessageNewParams{
		Model:     testModel,
		MaxTokens: 256,
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("What is the weather?"))},
		Tools: []sdk.ToolUnionParam{{OfTool: &sdk.ToolParam{
			Name:        "lookup",
			InputSchema: sdk.ToolInputSchemaParam{Properties: map[string]any{"query": map[string]any{"type": "string"}}},
		}}},
	}

	msg, err := client.Messages.New(context.Background(), params)
	require.NoError(t, err)
	checkToolMessage(t, msg)

	stream := client.Messages.NewStreaming(context.Background(), params)
	var acc sdk.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	checkToolMessage(t, &acc)
	require.Equal(t, msg.Usage.InputTokens, acc.Usage.InputTokens)
	require.Equal(t, msg.Usage.OutputTokens, acc.Usage.OutputTokens)
}

func checkToolMessage(t *testing.T, msg *sdk.Message) {
	t.Helper()
	require.Equal(t, sdk.StopReasonToolUse, msg.StopReason)
	require.Len(t, msg.Content, 2)
	require.Equal(t, "Let me look that up for you, with a few words more than a delta holds.", msg.Content[0].Text)
	require.Equal(t, "toolu_1", msg.Content[1].ID)
	require.Equal(t, "lookup", msg.Content[1].Name)
	require.JSONEq(t, `{"query":"weather in Paris"}`, string(msg.Content[1].Input))
	require.Positive(t, msg.Usage.InputTokens)
	require.Positive(t, msg.Usage.OutputTokens)
}
