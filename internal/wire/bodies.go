package wire

import (
	"encoding/json"
	"fmt"
)

// The log is the only state, so the bodies below are the data model: every package that
// writes or reads an event body uses these types (API.md §5.3, §5.5, §8.1 and §17 give the
// fields). Writing marshals them; reading is lenient (unknown fields are ignored), because a
// field added later must not make old code fail on new events. ContentBlock decodes strictly
// on its own, which is fine for bodies this server wrote.

// More event types of the lifecycle and spans (API.md §5).
const (
	EventSessionThreadStatusRunning     = "session.thread_status_running"
	EventSessionThreadStatusIdle        = "session.thread_status_idle"
	EventSessionThreadStatusRescheduled = "session.thread_status_rescheduled"
	EventSessionThreadStatusTerminated  = "session.thread_status_terminated"
	EventSpanModelRequestStart          = "span.model_request_start"
	EventSpanModelRequestEnd            = "span.model_request_end"
)

// Stop reasons of session.status_idle (API.md §8.1).
const (
	StopEndTurn          = "end_turn"
	StopRequiresAction   = "requires_action"
	StopRetriesExhausted = "retries_exhausted"
)

// Retry statuses of session.error (API.md §5.5).
const (
	RetryStatusRetrying  = "retrying"
	RetryStatusExhausted = "exhausted"
	RetryStatusTerminal  = "terminal"
)

// Error types of session.error (API.md §5.5).
const (
	SessionErrorUnknown             = "unknown_error"
	SessionErrorModelOverloaded     = "model_overloaded_error"
	SessionErrorModelRateLimited    = "model_rate_limited_error"
	SessionErrorModelRequestFailed  = "model_request_failed_error"
	SessionErrorToolUseLimitReached = "tool_use_limit_reached_error"
)

// Tool permission evaluation (API.md §5.3): evaluated_permission of agent.tool_use and the
// result of user.tool_confirmation.
const (
	PermissionResultAllow = "allow"
	PermissionResultAsk   = "ask"
	PermissionResultDeny  = "deny"
)

// TextBlock is a text content block as the server writes it.
type TextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// NewTextBlocks is content of one text block.
func NewTextBlocks(text string) []TextBlock { return []TextBlock{{Type: "text", Text: text}} }

// MessageBody is user.message, agent.message and agent.thinking as read: content blocks.
type MessageBody struct {
	Content []ContentBlock `json:"content"`
}

// AgentMessageBody is agent.message (and agent.thinking) as the server writes it.
type AgentMessageBody struct {
	Content []TextBlock `json:"content"`
}

// Evaluation is the permission policy that decided a call.
type Evaluation struct {
	Type string `json:"type"`
}

// ToolUseBody is agent.tool_use and agent.mcp_tool_use (MCPServerName is written on MCP
// ones only), and reads agent.custom_tool_use too. Evaluation is absent when the call was
// refused before any policy applied.
type ToolUseBody struct {
	Name                string          `json:"name"`
	Input               json.RawMessage `json:"input"`
	MCPServerName       string          `json:"mcp_server_name,omitempty"`
	EvaluatedPermission string          `json:"evaluated_permission"`
	Evaluation          *Evaluation     `json:"evaluation,omitempty"`
	SessionThreadID     *string         `json:"session_thread_id"`
}

// CustomToolUseBody is agent.custom_tool_use as the server writes it: no permission fields.
type CustomToolUseBody struct {
	Name            string          `json:"name"`
	Input           json.RawMessage `json:"input"`
	SessionThreadID *string         `json:"session_thread_id"`
}

// ToolResultBody is agent.tool_result as the server writes it.
type ToolResultBody struct {
	ToolUseID string      `json:"tool_use_id"`
	Content   []TextBlock `json:"content"`
	IsError   bool        `json:"is_error"`
}

// ResultBody reads every event that answers a tool call with content: agent.tool_result,
// agent.mcp_tool_result, user.tool_result and user.custom_tool_result.
type ResultBody struct {
	ToolUseID       string         `json:"tool_use_id,omitempty"`
	MCPToolUseID    string         `json:"mcp_tool_use_id,omitempty"`
	CustomToolUseID string         `json:"custom_tool_use_id,omitempty"`
	Content         []ContentBlock `json:"content"`
	IsError         bool           `json:"is_error"`
}

// Target is the id of the call the result answers.
func (r ResultBody) Target() string {
	switch {
	case r.ToolUseID != "":
		return r.ToolUseID
	case r.MCPToolUseID != "":
		return r.MCPToolUseID
	}
	return r.CustomToolUseID
}

// ToolConfirmationBody is user.tool_confirmation.
type ToolConfirmationBody struct {
	ToolUseID       string  `json:"tool_use_id"`
	Result          string  `json:"result"`
	DenyMessage     *string `json:"deny_message,omitempty"`
	SessionThreadID *string `json:"session_thread_id,omitempty"`
}

// ModelUsage is the usage one model request reports on span.model_request_end.
type ModelUsage struct {
	InputTokens              int64   `json:"input_tokens"`
	OutputTokens             int64   `json:"output_tokens"`
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	Speed                    *string `json:"speed"`
}

// SpanModelRequestEndBody is span.model_request_end (span.model_request_start has no fields).
type SpanModelRequestEndBody struct {
	ModelRequestStartID string     `json:"model_request_start_id"`
	IsError             bool       `json:"is_error"`
	ModelUsage          ModelUsage `json:"model_usage"`
}

// RetryStatus says whether a failed step is retried.
type RetryStatus struct {
	Type string `json:"type"`
}

// SessionError is the error object of session.error.
type SessionError struct {
	Type        string      `json:"type"`
	Message     string      `json:"message"`
	RetryStatus RetryStatus `json:"retry_status"`
}

// SessionErrorBody is session.error.
type SessionErrorBody struct {
	Error SessionError `json:"error"`
}

// StopReason is why a turn stopped; EventIDs names the calls a requires_action stop waits on.
type StopReason struct {
	Type     string   `json:"type"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// Same reports whether r stops for reason on exactly eventIDs, in order.
func (r StopReason) Same(reason string, eventIDs []string) bool {
	if r.Type != reason || len(r.EventIDs) != len(eventIDs) {
		return false
	}
	for i := range eventIDs {
		if r.EventIDs[i] != eventIDs[i] {
			return false
		}
	}
	return true
}

// StatusIdleBody is session.status_idle. StopDetails is always null here.
type StatusIdleBody struct {
	StopReason  StopReason      `json:"stop_reason"`
	StopDetails json.RawMessage `json:"stop_details"`
}

// ThreadStatusBody is session.thread_status_running, _idle, _rescheduled and _terminated;
// StopReason and StopDetails are written on _idle only.
type ThreadStatusBody struct {
	SessionThreadID string          `json:"session_thread_id"`
	AgentName       string          `json:"agent_name"`
	StopReason      *StopReason     `json:"stop_reason,omitempty"`
	StopDetails     json.RawMessage `json:"stop_details,omitempty"`
}

// SessionUsageBody is session.usage: the session's cumulative usage. Budget is always null.
type SessionUsageBody struct {
	Usage  Usage           `json:"usage"`
	Budget json.RawMessage `json:"budget"`
}

// EmptyBody is the body of events without fields (session.status_running, …).
var EmptyBody = json.RawMessage(`{}`)

// null is the JSON null every "always null" field above marshals as.
var null = json.RawMessage(`null`)

// NewStatusIdleBody is session.status_idle for reason.
func NewStatusIdleBody(reason StopReason) StatusIdleBody {
	return StatusIdleBody{StopReason: reason, StopDetails: null}
}

// NewSessionUsageBody is session.usage for u.
func NewSessionUsageBody(u Usage) SessionUsageBody {
	return SessionUsageBody{Usage: u, Budget: null}
}

// DecodeBody reads an event's body as T; an empty body reads as T's zero value. The error
// names the event.
func DecodeBody[T any](ev Event) (T, error) {
	var v T
	if len(ev.Body) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(ev.Body, &v); err != nil {
		return v, fmt.Errorf("decode %s %s: %w", ev.Type, ev.ID, err)
	}
	return v, nil
}

// EncodeBody writes an event body. Bodies are plain structs of strings, numbers, slices and
// raw JSON, so an error means a raw field holds invalid JSON: it is returned, never panicked on.
func EncodeBody(typ string, body any) (json.RawMessage, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s body: %w", typ, err)
	}
	return raw, nil
}
