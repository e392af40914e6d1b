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

// TestSDKThinkingToolLoop runs a tool loop with thinking the way an SDK user does: the
// assistant message goes back as the SDK turns it into a param, signatures and all, once
// from Messages.New and once from an accumulated stream.
func TestSDKThinkingToolLoop(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(func(r *upstream.Request) upstream.Reply {
		if len(r.Messages) == 1 {
			return thinkingTurn(r)
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "thinking", Thinking: "It is sunny."}, {Type: "text", Text: "Sunny."}}}
	}))
	client := sdkClient(srv)
	params := func(messages ...sdk.MessageParam) sdk.MessageNewParams {
		return sdk.MessageNewParams{
			Model:     budgetModel,
			MaxTokens: 4000,
			Thinking:  sdk.ThinkingConfigParamOfEnabled(2000),
			Messages:  messages,
			Tools: []sdk.ToolUnionParam{{OfTool: &sdk.ToolParam{
				Name: "lookup", InputSchema: sdk.ToolInputSchemaParam{Properties: map[string]any{}},
			}}},
		}
	}
	question := sdk.NewUserMessage(sdk.NewTextBlock("Weather?"))
	result := sdk.NewUserMessage(sdk.NewToolResultBlock("toolu_w", "sunny", false))

	first, err := client.Messages.New(context.Background(), params(question))
	require.NoError(t, err)
	require.Equal(t, sdk.StopReasonToolUse, first.StopReason)
	require.Equal(t, "thinking", first.Content[0].Type)
	require.Equal(t, "redacted_thinking", first.Content[1].Type)
	second, err := client.Messages.New(context.Background(), params(question, first.ToParam(), result))
	require.NoError(t, err)
	require.Equal(t, "Sunny.", second.Content[1].Text)

	stream := client.Messages.NewStreaming(context.Background(), params(question))
	var acc sdk.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, first.Content[0].Signature, acc.Content[0].Signature)
	require.Equal(t, first.Content[0].Thinking, acc.Content[0].Thinking)
	_, err = client.Messages.New(context.Background(), params(question, acc.ToParam(), result))
	require.NoError(t, err)

	// The same loop without the thinking is what the API refuses.
	stripped := first.ToParam()
	stripped.OfAssistant.Content = stripped.OfAssistant.Content[2:]
	_, err = client.Messages.New(context.Background(), params(question, stripped, result))
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Contains(t, apiErr.Error(), "Expected `thinking` or `redacted_thinking`, but found `tool_use`")
}

func TestSDKReadsRefusalsAndCacheUsage(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(func(r *upstream.Request) upstream.Reply {
		if len(r.Messages) > 1 {
			return upstream.Reply{StopReason: "refusal", StopDetails: json.RawMessage(`{"type":"refusal","category":"bio","explanation":"No."}`)}
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "ok"}}}
	}))
	client := sdkClient(srv)
	params := sdk.MessageNewParams{
		Model:     testModel,
		MaxTokens: 100,
		System:    []sdk.TextBlockParam{{Text: tokens(2000), CacheControl: sdk.NewCacheControlEphemeralParam()}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Hi"))},
	}
	first, err := client.Messages.New(context.Background(), params)
	require.NoError(t, err)
	require.Equal(t, int64(2000), first.Usage.CacheCreationInputTokens)
	require.Equal(t, int64(2000), first.Usage.CacheCreation.Ephemeral5mInputTokens)

	params.Messages = append(params.Messages, first.ToParam(), sdk.NewUserMessage(sdk.NewTextBlock("And?")))
	stream := client.Messages.NewStreaming(context.Background(), params)
	var acc sdk.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, sdk.StopReasonRefusal, acc.StopReason)
	require.Equal(t, sdk.RefusalStopDetailsCategoryBio, acc.StopDetails.Category)
	require.Equal(t, int64(2000), acc.Usage.CacheReadInputTokens)
	require.Equal(t, int64(3), acc.Usage.InputTokens, `"Hi", "ok", "And?": a token each`)
}

func TestSDKSeesStreamErrors(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "Half"}}, StreamError: "api_error", ErrorMessage: "Internal server error"}
	}))
	client := sdkClient(srv)
	stream := client.Messages.NewStreaming(context.Background(), sdk.MessageNewParams{
		Model: testModel, MaxTokens: 100, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("Hi"))},
	})
	for stream.Next() {
	}
	require.ErrorContains(t, stream.Err(), "Internal server error")
}

func TestSDKOmittedThinkingRoundTrip(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(thinkingTurn))
	client := sdkClient(srv)
	params := func(messages ...sdk.MessageParam) sdk.MessageNewParams {
		return sdk.MessageNewParams{
			Model: adaptiveModel, MaxTokens: 4000, Messages: messages,
			Thinking: sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}},
			Tools:    []sdk.ToolUnionParam{{OfTool: &sdk.ToolParam{Name: "lookup", InputSchema: sdk.ToolInputSchemaParam{Properties: map[string]any{}}}}},
		}
	}
	question := sdk.NewUserMessage(sdk.NewTextBlock("Weather?"))
	stream := client.Messages.NewStreaming(context.Background(), params(question))
	var acc sdk.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "thinking", acc.Content[0].Type)
	require.Empty(t, acc.Content[0].Thinking)
	require.NotEmpty(t, acc.Content[0].Signature)
	_, err := client.Messages.New(context.Background(), params(question, acc.ToParam(),
		sdk.NewUserMessage(sdk.NewToolResultBlock("toolu_w", "sunny", false))))
	require.NoError(t, err)
}
