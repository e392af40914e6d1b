package upstream_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

func replyBlocks(blocks ...upstream.Block) upstream.Script {
	return func(*upstream.Request) upstream.Reply { return upstream.Reply{Content: blocks} }
}

func TestContextWindow(t *testing.T) {
	srv := upstream.Start(t, upstream.WithContextWindow(1000), upstream.WithScript(replyText(tokens(50))))
	post(t, srv, request(user(tokens(1001)))).refused(t, 400, "invalid_request_error", "prompt is too long: 1001 tokens > 1000 maximum")
	// Tools and system count too.
	post(t, srv, with(request(user(tokens(500))), "system", tokens(400), "tools", arr{with(tool("lookup"), "description", tokens(100))})).
		refused(t, 400, "invalid_request_error", "prompt is too long: 1007 tokens > 1000 maximum")

	// A prompt that fits with too little room for the answer is cut at the window.
	resp := post(t, srv, request(user(tokens(990)))).ok(t)
	require.Equal(t, "model_context_window_exceeded", resp.msg["stop_reason"])
	require.Equal(t, int64(10), resp.usage(t)["output_tokens"])
	require.Equal(t, tokens(10), resp.msg["content"].([]any)[0].(map[string]any)["text"])

	// With room, max_tokens is the limit.
	resp = post(t, srv, with(request(user(tokens(900))), "max_tokens", 20)).ok(t)
	require.Equal(t, "max_tokens", resp.msg["stop_reason"])
	require.Equal(t, int64(20), resp.usage(t)["output_tokens"])
}

func TestMaxTokensCut(t *testing.T) {
	input := json.RawMessage(`{"query":"the weather in Paris tomorrow"}`) // 41 bytes: 11 tokens, with "lookup" 13
	srv := upstream.Start(t, upstream.WithScript(replyBlocks(
		upstream.Block{Type: "text", Text: tokens(5)},
		upstream.Block{Type: "tool_use", ID: "toolu_c", Name: "lookup", Input: input},
	)))
	whole := post(t, srv, with(loop(user("Hi")), "max_tokens", 18)).ok(t)
	require.Equal(t, "tool_use", whole.msg["stop_reason"])
	require.Equal(t, int64(18), whole.usage(t)["output_tokens"])

	cut := post(t, srv, with(loop(user("Hi")), "max_tokens", 12)).ok(t)
	require.Equal(t, "max_tokens", cut.msg["stop_reason"])
	require.Equal(t, int64(12), cut.usage(t)["output_tokens"])
	content := cut.msg["content"].([]any)
	require.Len(t, content, 2)
	require.Equal(t, map[string]any{}, content[1].(map[string]any)["input"], "the JSON message has no partial input")

	events := stream(t, srv, with(loop(user("Hi")), "max_tokens", 12))
	var partial strings.Builder
	for _, e := range events {
		if e.data["type"] == "content_block_delta" {
			if d := e.data["delta"].(map[string]any); d["type"] == "input_json_delta" {
				partial.WriteString(d["partial_json"].(string))
			}
		}
	}
	// 12 tokens: 5 of text, 2 of the name, 5 (20 bytes) of the input.
	require.Equal(t, string(input[:20]), partial.String())
	require.False(t, json.Valid([]byte(partial.String())), "the streamed input of a cut call is incomplete")
	require.Equal(t, "max_tokens", events[len(events)-2].data["delta"].(map[string]any)["stop_reason"])

	short := post(t, srv, with(loop(user("Hi")), "max_tokens", 3)).ok(t)
	require.Equal(t, []any{map[string]any{"type": "text", "text": tokens(3)}}, short.msg["content"], "the text is cut, the call never starts")
}

func TestThinkingCutIsSignedAsCut(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(replyBlocks(upstream.Block{Type: "thinking", Thinking: tokens(3000)})))
	resp := post(t, srv, with(request(), "max_tokens", 2000, "thinking", enabled(1024))).ok(t)
	block := resp.msg["content"].([]any)[0].(map[string]any)
	require.Equal(t, tokens(2000), block["thinking"])
	require.Equal(t, srv.Sign(tokens(2000)), block["signature"])
}

func TestRefusal(t *testing.T) {
	details := json.RawMessage(`{"type":"refusal","category":"cyber","explanation":"Not this."}`)
	srv := upstream.Start(t, upstream.WithScript(func(r *upstream.Request) upstream.Reply {
		if r.Messages[0].Content[0].Text == "details" {
			return upstream.Reply{StopReason: "refusal", StopDetails: details}
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "I can't"}}, StopReason: "refusal"}
	}))
	plain := post(t, srv, request(user("plain"))).ok(t)
	require.Equal(t, "refusal", plain.msg["stop_reason"])
	require.Equal(t, map[string]any{"type": "refusal", "category": nil, "explanation": nil}, plain.msg["stop_details"])
	detailed := post(t, srv, request(user("details"))).ok(t)
	require.Equal(t, "cyber", detailed.msg["stop_details"].(map[string]any)["category"])
	require.Equal(t, []any{}, detailed.msg["content"])

	end := post(t, upstream.Start(t), request()).ok(t)
	require.Nil(t, end.msg["stop_details"], "stop_details is null when there is nothing to detail")
	require.Contains(t, string(end.raw), `"stop_details":null`)
}

func TestScriptedErrors(t *testing.T) {
	tests := []struct {
		reply upstream.Reply
		typ   string
		msg   string
	}{
		{upstream.Reply{Status: 429, RetryAfter: 7}, "rate_limit_error", "Too Many Requests"},
		{upstream.Reply{Status: 500}, "api_error", "Internal Server Error"},
		{upstream.Reply{Status: 529}, "overloaded_error", "Overloaded"},
		{upstream.Reply{Status: 503, ErrorMessage: "down for a moment"}, "api_error", "down for a moment"},
	}
	for _, tt := range tests {
		srv := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply { return tt.reply }))
		resp := post(t, srv, request())
		resp.refused(t, tt.reply.Status, tt.typ, tt.msg)
		if tt.reply.RetryAfter > 0 {
			require.Equal(t, "7", resp.header.Get("retry-after"))
		}
		require.Equal(t, tt.reply.Status, srv.Exchanges()[0].Status)
	}
}

// event is one server-sent event.
type event struct {
	name string
	data map[string]any
}

// stream posts body with "stream": true and reads the events.
func stream(t *testing.T, srv *upstream.Server, body obj) []event {
	t.Helper()
	resp := post(t, srv, with(body, "stream", true)).ok(t)
	require.True(t, strings.HasPrefix(resp.header.Get("Content-Type"), "text/event-stream"))
	var events []event
	sc := bufio.NewScanner(bytes.NewReader(resp.raw))
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data))
			require.Equal(t, name, data["type"], "the event's name is its data's type")
			events = append(events, event{name: name, data: data})
		}
	}
	return events
}

func TestStreamEvents(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(replyBlocks(
		upstream.Block{Type: "thinking", Thinking: "Think first, at some length."},
		upstream.Block{Type: "redacted_thinking", Data: "x"},
		upstream.Block{Type: "text", Text: "Hello there"},
		upstream.Block{Type: "tool_use", ID: "toolu_s", Name: "lookup", Input: json.RawMessage(`{"q":"a long enough query"}`)},
	)))
	events := stream(t, srv, with(loop(user("Hi")), "max_tokens", 2000, "thinking", enabled(1024)))
	var names []string
	for _, e := range events {
		name := e.name
		if name == "content_block_delta" {
			name = e.data["delta"].(map[string]any)["type"].(string)
		}
		if len(names) == 0 || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	require.Equal(t, []string{
		"message_start", "ping",
		"content_block_start", "thinking_delta", "signature_delta", "content_block_stop",
		"content_block_start", "content_block_stop",
		"content_block_start", "text_delta", "content_block_stop",
		"content_block_start", "input_json_delta", "content_block_stop",
		"message_delta", "message_stop",
	}, names)

	start := events[0].data["message"].(map[string]any)
	require.Equal(t, []any{}, start["content"])
	require.Nil(t, start["stop_reason"])
	// The tool ("lookup", "a tool", {"type":"object"}: 2+2+5) and "Hi" (1).
	require.Equal(t, float64(10), start["usage"].(map[string]any)["input_tokens"])
	thinkingStart := events[2].data["content_block"].(map[string]any)
	require.Equal(t, map[string]any{"type": "thinking", "thinking": "", "signature": ""}, thinkingStart)
	delta := events[len(events)-2].data
	require.Equal(t, "tool_use", delta["delta"].(map[string]any)["stop_reason"])
	require.Contains(t, delta["delta"], "stop_details")
	require.Positive(t, delta["usage"].(map[string]any)["output_tokens"])
	for _, e := range events {
		if e.name == "content_block_start" {
			if b := e.data["content_block"].(map[string]any); b["type"] == "tool_use" {
				require.Equal(t, map[string]any{}, b["input"])
				require.Equal(t, "toolu_s", b["id"])
			}
		}
	}
}

func TestStreamError(t *testing.T) {
	srv := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "Half an answ"}}, StreamError: "overloaded_error"}
	}))
	events := stream(t, srv, request())
	last := events[len(events)-1]
	require.Equal(t, "error", last.name)
	require.Equal(t, map[string]any{"type": "overloaded_error", "message": "Overloaded"}, last.data["error"])
	for _, e := range events {
		require.NotEqual(t, "message_stop", e.name)
	}
	ex := srv.Exchanges()[0]
	require.Equal(t, "Overloaded", ex.ErrorMessage)
	require.Empty(t, ex.StopReason)
	// A JSON answer is whole.
	require.Equal(t, "end_turn", post(t, srv, request()).ok(t).msg["stop_reason"])
}
