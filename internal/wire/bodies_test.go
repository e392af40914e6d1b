package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// roundTrip decodes body as T the way every reader does and encodes it back the way every
// writer does.
func roundTrip[T any](typ, body string) (json.RawMessage, error) {
	v, err := DecodeBody[T](Event{ID: "sevt_rt", Type: typ, Body: json.RawMessage(body)})
	if err != nil {
		return nil, err
	}
	return EncodeBody(typ, v)
}

// TestBodiesRoundTrip: each body, as API.md §5.2, §5.3, §8.2, §8.8 and §17 give it and in the
// key order the server writes it, survives decode and encode byte for byte. Byte equality
// (not JSONEq) also pins which keys are always present, which are omitted, and the order of
// the POST echo.
func TestBodiesRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  string
		rt   func(typ, body string) (json.RawMessage, error)
		body string
	}{
		{"user.message", EventUserMessage, roundTrip[MessageBody],
			`{"content":[{"type":"text","text":"What is 6*7?"},{"type":"redacted"}]}`},
		{"user.message with a document", EventUserMessage, roundTrip[MessageBody],
			`{"content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"},"title":"Notes"}]}`},
		{"user.interrupt", EventUserInterrupt, roundTrip[UserInterruptBody], `{}`},
		{"user.interrupt of a thread", EventUserInterrupt, roundTrip[UserInterruptBody], `{"session_thread_id":"sthr_1"}`},
		{"user.tool_confirmation deny", EventUserToolConfirmation, roundTrip[ToolConfirmationBody],
			`{"deny_message":"no","result":"deny","session_thread_id":null,"tool_use_id":"sevt_a"}`},
		{"user.tool_confirmation allow", EventUserToolConfirmation, roundTrip[ToolConfirmationBody],
			`{"result":"allow","session_thread_id":null,"tool_use_id":"sevt_a"}`},
		{"user.custom_tool_result", EventUserCustomToolResult, roundTrip[UserCustomToolResultBody],
			`{"content":[{"type":"text","text":"42"}],"custom_tool_use_id":"sevt_b","session_thread_id":null}`},
		{"user.custom_tool_result empty content and is_error", EventUserCustomToolResult, roundTrip[UserCustomToolResultBody],
			`{"content":[],"custom_tool_use_id":"sevt_b","is_error":false,"session_thread_id":null}`},
		{"user.custom_tool_result id only", EventUserCustomToolResult, roundTrip[UserCustomToolResultBody],
			`{"custom_tool_use_id":"sevt_b","session_thread_id":null}`},
		{"user.tool_result", EventUserToolResult, roundTrip[UserToolResultBody],
			`{"content":[{"type":"text","text":"ok"}],"is_error":true,"session_thread_id":null,"tool_use_id":"sevt_c"}`},
		{"agent.message", EventAgentMessage, roundTrip[AgentMessageBody],
			`{"content":[{"type":"text","text":"Hello"},{"type":"text","text":""}]}`},
		{"agent.message as read", EventAgentMessage, roundTrip[MessageBody],
			`{"content":[{"type":"text","text":"Hello"},{"type":"redacted"}]}`},
		{"agent.tool_use allow", EventAgentToolUse, roundTrip[ToolUseBody],
			`{"name":"bash","input":{"command":"ls"},"evaluated_permission":"allow","evaluation":{"type":"always_allow"},"session_thread_id":null}`},
		{"agent.tool_use deny without evaluation", EventAgentToolUse, roundTrip[ToolUseBody],
			`{"name":"frobnicate","input":{},"evaluated_permission":"deny","session_thread_id":null}`},
		{"agent.mcp_tool_use", EventAgentMCPToolUse, roundTrip[ToolUseBody],
			`{"name":"get_issue","input":{"n":1},"mcp_server_name":"gh","evaluated_permission":"ask","evaluation":{"type":"always_ask"},"session_thread_id":null}`},
		{"agent.custom_tool_use", EventAgentCustomToolUse, roundTrip[CustomToolUseBody],
			`{"name":"get_weather","input":{"city":"Paris"},"session_thread_id":null}`},
		{"agent.tool_result", EventAgentToolResult, roundTrip[ToolResultBody],
			`{"tool_use_id":"sevt_1","content":[{"type":"text","text":"Permission to use bash has been rejected. Rejection message: no"}],"is_error":true}`},
		{"agent.mcp_tool_result", EventAgentMCPToolResult, roundTrip[MCPToolResultBody],
			`{"mcp_tool_use_id":"sevt_2","content":[{"type":"search_result","source":"https://example.com","title":"Ex","content":[{"type":"text","text":"x"}]}],"is_error":false}`},
		{"span.model_request_end", EventSpanModelRequestEnd, roundTrip[SpanModelRequestEndBody],
			`{"model_request_start_id":"sevt_s","is_error":false,"model_usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":2,"cache_read_input_tokens":1,"speed":null}}`},
		{"session.status_idle end_turn", EventSessionStatusIdle, roundTrip[StatusIdleBody],
			`{"stop_reason":{"type":"end_turn"},"stop_details":null}`},
		{"session.status_idle requires_action", EventSessionStatusIdle, roundTrip[StatusIdleBody],
			`{"stop_reason":{"type":"requires_action","event_ids":["sevt_a","sevt_b"]},"stop_details":null}`},
		{"session.error", EventSessionError, roundTrip[SessionErrorBody],
			`{"error":{"type":"model_overloaded_error","message":"Overloaded","retry_status":{"type":"retrying"}}}`},
		{"session.thread_status_running", EventSessionThreadStatusRunning, roundTrip[ThreadStatusBody],
			`{"session_thread_id":"sthr_1","agent_name":"Coder"}`},
		{"session.thread_status_idle", EventSessionThreadStatusIdle, roundTrip[ThreadStatusBody],
			`{"session_thread_id":"sthr_1","agent_name":"Coder","stop_reason":{"type":"retries_exhausted"},"stop_details":null}`},
		{"session.usage", EventSessionUsage, roundTrip[SessionUsageBody],
			`{"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":0},"active_seconds":1.5,"list_cost":{"amount":"0","currency":"USD"},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0}},"budget":null}`},
		{"session.updated title cleared", EventSessionUpdated, roundTrip[SessionUpdatedBody], `{"title":null}`},
		{"session.updated metadata and title", EventSessionUpdated, roundTrip[SessionUpdatedBody],
			`{"metadata":{"env":"prod"},"title":"Renamed"}`},
		{"session.updated metadata emptied", EventSessionUpdated, roundTrip[SessionUpdatedBody], `{"metadata":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.rt(tt.typ, tt.body)
			require.NoError(t, err)
			require.Equal(t, tt.body, string(got))
		})
	}
}

// TestBodyConstructors pins the bytes the writers produce for the bodies with always-null
// fields.
func TestBodyConstructors(t *testing.T) {
	t.Parallel()
	u := ZeroUsage()
	u.InputTokens = 3
	tests := []struct {
		name string
		body any
		want string
	}{
		{"status idle", NewStatusIdleBody(StopReason{Type: StopEndTurn}), `{"stop_reason":{"type":"end_turn"},"stop_details":null}`},
		{"thread running", NewThreadStatusBody("sthr_1", "Coder"), `{"session_thread_id":"sthr_1","agent_name":"Coder"}`},
		{"thread idle", NewThreadIdleBody("sthr_1", "Coder", StopReason{Type: StopRequiresAction, EventIDs: []string{"sevt_a"}}),
			`{"session_thread_id":"sthr_1","agent_name":"Coder","stop_reason":{"type":"requires_action","event_ids":["sevt_a"]},"stop_details":null}`},
		{"usage", NewSessionUsageBody(u),
			`{"usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"active_seconds":0,"list_cost":{"amount":"0","currency":"USD"},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0}},"budget":null}`},
		{"error", NewSessionErrorBody(SessionErrorToolUseLimitReached, "cap", RetryStatusExhausted),
			`{"error":{"type":"tool_use_limit_reached_error","message":"cap","retry_status":{"type":"exhausted"}}}`},
		{"text", ToolResultBody{ToolUseID: "sevt_1", Content: NewTextContent("hi")}, `{"tool_use_id":"sevt_1","content":[{"type":"text","text":"hi"}],"is_error":false}`},
		{"interrupt", UserInterruptBody{}, `{}`},
		{"confirmation", ToolConfirmationBody{ToolUseID: "sevt_a", Result: PermissionResultAllow}, `{"result":"allow","session_thread_id":null,"tool_use_id":"sevt_a"}`},
		{"updated nothing", SessionUpdatedBody{}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := EncodeBody("x", tt.body)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}
}

func TestDecodeBodyErrorsNameTheEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		decode func(Event) error
		ev     Event
		want   string
	}{
		{"wrong field type", func(ev Event) error { _, err := DecodeBody[SpanModelRequestEndBody](ev); return err },
			Event{ID: "sevt_1", Type: EventSpanModelRequestEnd, Body: json.RawMessage(`{"is_error":"yes"}`)},
			"decode span.model_request_end sevt_1: "},
		{"strict content block", func(ev Event) error { _, err := DecodeBody[MessageBody](ev); return err },
			Event{ID: "sevt_2", Type: EventUserMessage, Body: json.RawMessage(`{"content":[{"type":"text","text":"x","colour":1}]}`)},
			`decode user.message sevt_2: unknown field "colour"`},
		{"malformed", func(ev Event) error { _, err := DecodeBody[ToolUseBody](ev); return err },
			Event{ID: "sevt_3", Type: EventAgentToolUse, Body: json.RawMessage(`{"name":`)},
			"decode agent.tool_use sevt_3: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, tt.decode(tt.ev), tt.want)
		})
	}
}

func TestDecodeBodyLenient(t *testing.T) {
	t.Parallel()
	// An empty body reads as the zero value; unknown fields are ignored.
	b, err := DecodeBody[SessionErrorBody](Event{ID: "sevt_1", Type: EventSessionError})
	require.NoError(t, err)
	require.Equal(t, SessionErrorBody{}, b)
	tu, err := DecodeBody[ToolUseBody](Event{ID: "sevt_2", Type: EventAgentToolUse, Body: json.RawMessage(`{"name":"bash","added_later":true}`)})
	require.NoError(t, err)
	require.Equal(t, "bash", tu.Name)
}

func TestEncodeBodyReturnsErrors(t *testing.T) {
	t.Parallel()
	_, err := EncodeBody(EventAgentToolUse, ToolUseBody{Name: "bash", Input: json.RawMessage(`{`)})
	require.ErrorContains(t, err, "encode agent.tool_use body: ")
}

func TestSessionErrorEndsTurn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ, retry string
		want       bool
	}{
		{SessionErrorModelOverloaded, RetryStatusRetrying, false},
		{SessionErrorModelOverloaded, RetryStatusExhausted, true},
		{SessionErrorUnknown, RetryStatusTerminal, true},
		{SessionErrorToolUseLimitReached, RetryStatusRetrying, true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, NewSessionErrorBody(tt.typ, "m", tt.retry).EndsTurn(), "%s %s", tt.typ, tt.retry)
	}
}

func TestEventTypesComplete(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, typ := range EventTypes {
		require.False(t, seen[typ], "duplicate %s", typ)
		seen[typ] = true
	}
	require.Len(t, EventTypes, 41) // API.md §5.3
	require.False(t, seen[EventSessionDeleted])
}

func TestContentSources(t *testing.T) {
	t.Parallel()
	doc := ContentBlock{Type: ContentTypeDocument, Source: json.RawMessage(`{"type":"text","media_type":"text/plain","data":"notes"}`)}
	data, ok := doc.TextSource()
	require.True(t, ok)
	require.Equal(t, "notes", data)
	_, ok = ContentBlock{Type: ContentTypeDocument, Source: json.RawMessage(`{"type":"url","url":"https://x"}`)}.TextSource()
	require.False(t, ok)
	require.Equal(t, "https://x", ContentBlock{Type: ContentTypeSearchResult, Source: json.RawMessage(`"https://x"`)}.SourceURL())
}
