package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

func newClient(t *testing.T, srv *httptest.Server, opts ...anthropic.Option) *anthropic.Client {
	t.Helper()
	// The server's own client (its own transport): with http.DefaultClient, another parallel
	// test's httptest.Server.Close (which closes DefaultTransport's idle connections) can
	// break a connection this test is about to reuse ("CloseIdleConnections called").
	base := []anthropic.Option{anthropic.WithBaseURL(srv.URL), anthropic.WithAPIKey(testKey), anthropic.WithHTTPClient(srv.Client())}
	c, err := anthropic.New(append(base, opts...)...)
	require.NoError(t, err)
	return c
}

func simpleRequest() model.Request {
	return model.Request{
		Model:     "claude-test-1",
		Messages:  []model.Message{{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: "Hi"}}}},
		MaxTokens: 256,
	}
}

// scripted holds the messages the replies tests serve, with the response each must become.
var scripted = []struct {
	name string
	msg  message
	want model.Response
}{
	{
		name: "plain text",
		msg: message{
			content: []map[string]any{{"type": "text", "text": "Hello! How can I help you today? Ünïcödé too."}},
			stop:    "end_turn",
			usage:   map[string]any{"input_tokens": 12, "output_tokens": 15, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
		},
		want: model.Response{
			Content:    []model.Block{{Type: model.BlockText, Text: "Hello! How can I help you today? Ünïcödé too."}},
			StopReason: model.StopEndTurn,
			Usage:      model.Usage{InputTokens: 12, OutputTokens: 15},
		},
	},
	{
		name: "thinking with signature then text",
		msg: message{
			content: []map[string]any{
				{"type": "thinking", "thinking": "The user asks for 2+2. That is 4.", "signature": "EqQBCkYIBRgCIkBsig=="},
				{"type": "text", "text": "2 + 2 = 4."},
			},
			stop:  "end_turn",
			usage: map[string]any{"input_tokens": 40, "output_tokens": 30},
		},
		want: model.Response{
			Content: []model.Block{
				{Type: model.BlockThinking, Thinking: "The user asks for 2+2. That is 4.", Signature: "EqQBCkYIBRgCIkBsig=="},
				{Type: model.BlockText, Text: "2 + 2 = 4."},
			},
			StopReason: model.StopEndTurn,
			Usage:      model.Usage{InputTokens: 40, OutputTokens: 30},
		},
	},
	{
		name: "tool use with input in many chunks",
		msg: message{
			content: []map[string]any{
				{"type": "text", "text": "Let me look."},
				{"type": "tool_use", "id": "toolu_01A", "name": "bash", "input": map[string]any{
					"command": `ls -la "dir with spaces" && echo \"ok\"`,
					"nested":  map[string]any{"list": []any{1, 2.5, true, nil, "ü€"}},
				}},
			},
			stop:  "tool_use",
			usage: map[string]any{"input_tokens": 300, "output_tokens": 80},
		},
		want: model.Response{
			Content: []model.Block{
				{Type: model.BlockText, Text: "Let me look."},
				{Type: model.BlockToolUse, ID: "toolu_01A", Name: "bash",
					Input: json.RawMessage(`{"command":"ls -la \"dir with spaces\" \u0026\u0026 echo \\\"ok\\\"","nested":{"list":[1,2.5,true,null,"ü€"]}}`)},
			},
			StopReason: model.StopToolUse,
			Usage:      model.Usage{InputTokens: 300, OutputTokens: 80},
		},
	},
	{
		name: "several blocks, parallel tools, empty input, redacted thinking",
		msg: message{
			content: []map[string]any{
				{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
				{"type": "thinking", "thinking": "Two tools at once.", "signature": "sig"},
				{"type": "text", "text": "Running both."},
				{"type": "tool_use", "id": "toolu_1", "name": "read", "input": map[string]any{"path": "a.txt"}},
				{"type": "tool_use", "id": "toolu_2", "name": "list_all", "input": map[string]any{}},
			},
			stop:  "tool_use",
			usage: map[string]any{"input_tokens": 5, "output_tokens": 6},
		},
		want: model.Response{
			Content: []model.Block{
				{Type: model.BlockRedactedThinking, Data: "EmwKAhgBEgy3va3pzix/LafPsn4a"},
				{Type: model.BlockThinking, Thinking: "Two tools at once.", Signature: "sig"},
				{Type: model.BlockText, Text: "Running both."},
				{Type: model.BlockToolUse, ID: "toolu_1", Name: "read", Input: json.RawMessage(`{"path":"a.txt"}`)},
				{Type: model.BlockToolUse, ID: "toolu_2", Name: "list_all", Input: json.RawMessage(`{}`)},
			},
			StopReason: model.StopToolUse,
			Usage:      model.Usage{InputTokens: 5, OutputTokens: 6},
		},
	},
	{
		name: "usage from message_start and message_delta",
		msg: message{
			content: []map[string]any{{"type": "text", "text": "cached"}},
			stop:    "max_tokens",
			usage: map[string]any{"input_tokens": 480, "output_tokens": 89,
				"cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000},
			startUsage: map[string]any{"input_tokens": 472, "output_tokens": 2,
				"cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000},
			// A later count of input tokens replaces the first; absent counts stay.
			deltaUsage: map[string]any{"output_tokens": 89, "input_tokens": 480},
		},
		want: model.Response{
			Content:    []model.Block{{Type: model.BlockText, Text: "cached"}},
			StopReason: model.StopMaxTokens,
			Usage: model.Usage{InputTokens: 480, OutputTokens: 89,
				CacheCreationInputTokens: 100, CacheReadInputTokens: 2000},
		},
	},
}

func TestReplies(t *testing.T) {
	t.Parallel()
	for _, tt := range scripted {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newAPI(t, replyWith(tt.msg))
			c := newClient(t, srv)

			created, err := c.Create(t.Context(), simpleRequest())
			require.NoError(t, err)
			require.Equal(t, tt.want, created)

			var deltas []model.Delta
			streamed, err := c.Stream(t.Context(), simpleRequest(), func(d model.Delta) { deltas = append(deltas, d) })
			require.NoError(t, err)
			require.Equal(t, tt.want, streamed)
			requireDeltasMatch(t, streamed.Content, deltas)
		})
	}
}

// requireDeltasMatch checks that every block is announced, filled and stopped in order, and
// that the text and thinking deltas rebuild the response.
func requireDeltasMatch(t *testing.T, content []model.Block, deltas []model.Delta) {
	t.Helper()
	rebuilt := make([]model.Block, len(content))
	open := -1
	next := 0
	for _, d := range deltas {
		switch d.Kind {
		case model.DeltaBlockStart:
			require.Equal(t, -1, open, "block %d starts while %d is open", d.Index, open)
			require.Equal(t, next, d.Index)
			require.Equal(t, content[d.Index].Type, d.Type)
			open = d.Index
			next++
		case model.DeltaText:
			require.Equal(t, open, d.Index)
			rebuilt[d.Index].Text += d.Text
		case model.DeltaThinking:
			require.Equal(t, open, d.Index)
			rebuilt[d.Index].Thinking += d.Text
		case model.DeltaBlockStop:
			require.Equal(t, open, d.Index)
			open = -1
		}
	}
	require.Equal(t, len(content), next, "every block is announced")
	require.Equal(t, -1, open, "every block is stopped")
	for i, b := range content {
		require.Equal(t, b.Text, rebuilt[i].Text)
		require.Equal(t, b.Thinking, rebuilt[i].Thinking)
	}
}

func TestStreamDeltasOfOneMessage(t *testing.T) {
	t.Parallel()
	_, srv := newAPI(t, replyWith(scripted[1].msg))
	var deltas []model.Delta
	_, err := newClient(t, srv).Stream(t.Context(), simpleRequest(), func(d model.Delta) { deltas = append(deltas, d) })
	require.NoError(t, err)
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaBlockStart, Index: 0, Type: model.BlockThinking},
		{Kind: model.DeltaThinking, Index: 0, Text: "The use"},
		{Kind: model.DeltaThinking, Index: 0, Text: "r asks "},
		{Kind: model.DeltaThinking, Index: 0, Text: "for 2+2"},
		{Kind: model.DeltaThinking, Index: 0, Text: ". That "},
		{Kind: model.DeltaThinking, Index: 0, Text: "is 4."},
		{Kind: model.DeltaBlockStop, Index: 0},
		{Kind: model.DeltaBlockStart, Index: 1, Type: model.BlockText},
		{Kind: model.DeltaText, Index: 1, Text: "2 + 2"},
		{Kind: model.DeltaText, Index: 1, Text: " = 4."},
		{Kind: model.DeltaBlockStop, Index: 1},
	}, deltas)
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	req := model.Request{
		Model:  "claude-test-1",
		System: "You are terse.",
		Messages: []model.Message{
			{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: "List files"}}},
			{Role: "assistant", Content: []model.Block{
				{Type: model.BlockThinking, Thinking: "use bash", Signature: "sig=="},
				{Type: model.BlockText, Text: "Sure."},
				{Type: model.BlockToolUse, ID: "toolu_1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
				{Type: model.BlockToolUse, ID: "toolu_2", Name: "noop"},
			}},
			{Role: "user", Content: []model.Block{
				{Type: model.BlockToolResult, ToolUseID: "toolu_1", Content: []model.Block{{Type: model.BlockText, Text: "a.txt"}}},
				{Type: model.BlockToolResult, ToolUseID: "toolu_2", IsError: true},
			}},
		},
		Tools: []model.Tool{
			{Name: "bash", Description: "Run a command", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)},
			{Name: "noop"},
		},
	}
	const wantBody = `{
		"model": "claude-test-1",
		"max_tokens": 2048,
		"system": "You are terse.",
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "List files"}]},
			{"role": "assistant", "content": [
				{"type": "thinking", "thinking": "use bash", "signature": "sig=="},
				{"type": "text", "text": "Sure."},
				{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
				{"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.txt"}]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true}
			]}
		],
		"tools": [
			{"name": "bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
			{"name": "noop", "input_schema": {"type": "object"}}
		]%s
	}`
	api, srv := newAPI(t, replyWith(scripted[0].msg))
	c := newClient(t, srv, anthropic.WithMaxTokens(2048), anthropic.WithHeader("anthropic-beta", "test-beta-1"))

	_, err := c.Create(t.Context(), req)
	require.NoError(t, err)
	_, err = c.Stream(t.Context(), req, nil)
	require.NoError(t, err)

	seen := api.requests()
	require.Len(t, seen, 2)
	require.JSONEq(t, fmt.Sprintf(wantBody, ""), string(seen[0].body), "Create sends no stream field")
	require.JSONEq(t, fmt.Sprintf(wantBody, `, "stream": true`), string(seen[1].body))
	for _, s := range seen {
		require.Equal(t, "2023-06-01", s.header.Get("anthropic-version"))
		require.Equal(t, "test-beta-1", s.header.Get("anthropic-beta"))
		require.Equal(t, "application/json", s.header.Get("Content-Type"))
	}
	require.Equal(t, "application/json", seen[0].header.Get("Accept"))
	require.Equal(t, "text/event-stream", seen[1].header.Get("Accept"))
}

func TestRequestMaxTokens(t *testing.T) {
	t.Parallel()
	api, srv := newAPI(t, replyWith(scripted[0].msg))
	req := simpleRequest()
	req.MaxTokens = 0
	_, err := newClient(t, srv).Create(t.Context(), req)
	require.NoError(t, err)
	req.MaxTokens = 77
	_, err = newClient(t, srv, anthropic.WithMaxTokens(5)).Create(t.Context(), req)
	require.NoError(t, err)

	seen := api.requests()
	require.Equal(t, anthropic.DefaultMaxTokens, seen[0].req.MaxTokens, "the default fills an unset MaxTokens")
	require.Equal(t, 77, seen[1].req.MaxTokens, "the request's own value wins")
}

func TestUnsupportedBlockIsNotSent(t *testing.T) {
	t.Parallel()
	api, srv := newAPI(t, replyWith(scripted[0].msg))
	req := simpleRequest()
	req.Messages[0].Content = append(req.Messages[0].Content, model.Block{Type: "audio"})
	_, err := newClient(t, srv).Create(t.Context(), req)
	require.ErrorContains(t, err, `messages[0].content[1]: unsupported block type "audio"`)
	require.False(t, model.IsRetryable(err))
	require.Empty(t, api.requests())
}

func TestAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		apiKey     string // the server wants this x-api-key, or a bearer token when empty
		opts       []anthropic.Option
		wantOK     bool
		wantHeader map[string]string
	}{
		{name: "api key", apiKey: testKey, opts: []anthropic.Option{anthropic.WithAPIKey(testKey)}, wantOK: true,
			wantHeader: map[string]string{"x-api-key": testKey, "Authorization": ""}},
		{name: "bearer", opts: []anthropic.Option{anthropic.WithBearerToken(testToken)}, wantOK: true,
			wantHeader: map[string]string{"Authorization": "Bearer " + testToken, "x-api-key": ""}},
		{name: "wrong api key", apiKey: testKey, opts: []anthropic.Option{anthropic.WithAPIKey("nope")}},
		{name: "bearer where a key is wanted", apiKey: testKey, opts: []anthropic.Option{anthropic.WithBearerToken(testToken)}},
		{name: "key where a bearer is wanted", opts: []anthropic.Option{anthropic.WithAPIKey(testKey)}},
		{name: "no credentials", apiKey: testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &messagesAPI{path: "/v1/messages", apiKey: tt.apiKey, bearer: testToken, reply: replyWith(scripted[0].msg)}
			srv := httptest.NewServer(api)
			t.Cleanup(srv.Close)
			c, err := anthropic.New(append([]anthropic.Option{anthropic.WithBaseURL(srv.URL)}, tt.opts...)...)
			require.NoError(t, err)

			_, err = c.Stream(t.Context(), simpleRequest(), nil)
			if !tt.wantOK {
				var me *model.Error
				require.ErrorAs(t, err, &me)
				require.Equal(t, model.ErrInvalid, me.Kind)
				require.Equal(t, http.StatusUnauthorized, me.Status)
				require.Contains(t, me.Message, "authentication_error: invalid")
				return
			}
			require.NoError(t, err)
			seen := api.requests()
			require.Len(t, seen, 1)
			for k, v := range tt.wantHeader {
				require.Equal(t, v, seen[0].header.Get(k), k)
			}
		})
	}
}

func TestBaseURLWithPath(t *testing.T) {
	t.Parallel()
	api := &messagesAPI{path: "/gateway/anthropic/v1/messages", apiKey: testKey, reply: replyWith(scripted[0].msg)}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c, err := anthropic.New(anthropic.WithBaseURL(srv.URL+"/gateway/anthropic/"), anthropic.WithAPIKey(testKey))
	require.NoError(t, err)
	resp, err := c.Create(t.Context(), simpleRequest())
	require.NoError(t, err)
	require.Equal(t, scripted[0].want, resp)
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  anthropic.Option
		want string
	}{
		{name: "relative URL", opt: anthropic.WithBaseURL("api.anthropic.com"), want: `base URL "api.anthropic.com" must be an absolute http or https URL`},
		{name: "other scheme", opt: anthropic.WithBaseURL("ftp://x"), want: "must be an absolute http or https URL"},
		{name: "zero max tokens", opt: anthropic.WithMaxTokens(0), want: "max tokens must be at least 1, got 0"},
		{name: "negative timeout", opt: anthropic.WithTimeout(-time.Second), want: "timeout must not be negative"},
		{name: "nil HTTP client", opt: anthropic.WithHTTPClient(nil), want: "HTTP client must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := anthropic.New(tt.opt)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCancelledCallerIsNotAModelError(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	_, srv := newAPI(t, func(w http.ResponseWriter, r *http.Request, _ apiRequest) {
		newSSE(w).send("ping", map[string]any{"type": "ping"})
		close(arrived)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := newClient(t, srv).Stream(ctx, simpleRequest(), nil)
	require.ErrorIs(t, err, context.Canceled)
	var me *model.Error
	require.NotErrorAs(t, err, &me)
}

// TestStreamVariants reads streams that are valid but shaped differently from the usual one:
// text in the start event, a tool input given whole at the start, events without an event
// name, a block never stopped before message_stop, and a missing message_delta.
func TestStreamVariants(t *testing.T) {
	t.Parallel()
	_, srv := newAPI(t, func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
		s := newSSE(w)
		s.raw(": a comment line\n\n")
		s.raw(`data: {"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n")
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": "Hel"}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": "lo"}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "citations_delta", "citation": map[string]any{"type": "char_location"}}})
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 1,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_w", "name": "read", "input": map[string]any{"path": "x"}}})
		s.send("brand_new_event", map[string]any{"type": "brand_new_event"})
		s.send("message_stop", map[string]any{"type": "message_stop"})
	})
	var deltas []model.Delta
	resp, err := newClient(t, srv).Stream(t.Context(), simpleRequest(), func(d model.Delta) { deltas = append(deltas, d) })
	require.NoError(t, err)
	require.Equal(t, model.Response{
		Content: []model.Block{
			{Type: model.BlockText, Text: "Hello"},
			{Type: model.BlockToolUse, ID: "toolu_w", Name: "read", Input: json.RawMessage(`{"path":"x"}`)},
		},
		Usage: model.Usage{InputTokens: 3, OutputTokens: 1},
	}, resp)
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaBlockStart, Index: 0, Type: model.BlockText},
		{Kind: model.DeltaText, Index: 0, Text: "Hel"},
		{Kind: model.DeltaText, Index: 0, Text: "lo"},
		{Kind: model.DeltaBlockStop, Index: 0},
		{Kind: model.DeltaBlockStart, Index: 1, Type: model.BlockToolUse},
	}, deltas)
}
