package wire

import (
	"encoding/json"
	"fmt"
)

// The log is the only state, so the bodies below are the data model: every package that
// writes or reads an event body uses these types (API.md §5.2, §5.3, §5.5, §8.2 and §17 give
// the fields), encodes with EncodeBody and decodes with DecodeBody. Reading is lenient
// (unknown fields are ignored), because a field added later must not make old code fail on
// new events. ContentBlock decodes strictly on its own, which is fine for bodies this server
// wrote.
//
// The tags are the compatibility contract with logs already written: which keys are always
// present (null included) and which are omitted. Bodies of client events list their fields in
// key order because they used to be written from a map, and the POST echo returns the body as
// written.
//
// Events without fields (session.status_running, _rescheduled, _terminated, session.deleted,
// agent.thinking, span.model_request_start, user.interrupt without a thread) are written as
// EmptyBody.

// Stop reasons of session.status_idle and session.thread_status_idle (API.md §8.2).
const (
	StopEndTurn          = "end_turn"
	StopRequiresAction   = "requires_action"
	StopRetriesExhausted = "retries_exhausted"
	StopRefusal          = "refusal"
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
	SessionErrorCompactionLimit     = "compaction_limit_reached_error"
	SessionErrorMCPConnectionFailed = "mcp_connection_failed_error"
	SessionErrorMCPAuthFailed       = "mcp_authentication_failed_error"
)

// Tool permission evaluation (API.md §5.3): evaluated_permission of agent.tool_use and the
// result of user.tool_confirmation (allow or deny only).
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
func NewTextBlocks(text string) []TextBlock {
	return []TextBlock{{Type: ContentTypeText, Text: text}}
}

// NewTextContent is content of one text block, as a content list.
func NewTextContent(text string) []ContentBlock {
	return []ContentBlock{{Type: ContentTypeText, Text: &text}}
}

// MessageBody is user.message (written and read) and agent.message as read: content blocks.
type MessageBody struct {
	Content []ContentBlock `json:"content"`
}

// AgentMessageBody is agent.message as the server writes it: text blocks only.
type AgentMessageBody struct {
	Content []TextBlock `json:"content"`
}

// UserInterruptBody is user.interrupt; without a thread id it interrupts every thread and the
// body is {}.
type UserInterruptBody struct {
	SessionThreadID *string `json:"session_thread_id,omitempty"`
}

// Evaluation is the permission policy that decided a call (a PermissionPolicy value); an
// auto evaluation also carries its verdict (API.md §3.3).
type Evaluation struct {
	Type                string       `json:"type"`
	EvaluatedPermission *AutoVerdict `json:"evaluated_permission,omitempty"`
}

// AutoVerdict is what the auto policy decided: allow, or ask / deny with a reason code
// (indeterminate or high_risk).
type AutoVerdict struct {
	Type       string `json:"type"`
	ReasonCode string `json:"reason_code,omitempty"`
}

// Reason codes of an auto verdict.
const AutoReasonIndeterminate = "indeterminate"

// ToolUseBody is agent.tool_use and agent.mcp_tool_use (MCPServerName is written on MCP
// ones only), and reads agent.custom_tool_use too. Evaluation is absent when the call was
// refused before any policy applied. SessionThreadID is null in single-agent sessions.
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

// ToolResultBody is agent.tool_result as the server writes it: text from the sandboxed
// built-ins, documents and search results from the web tools.
type ToolResultBody struct {
	ToolUseID string         `json:"tool_use_id"`
	Content   []ContentBlock `json:"content"`
	IsError   bool           `json:"is_error"`
}

// MCPToolResultBody is agent.mcp_tool_result.
type MCPToolResultBody struct {
	MCPToolUseID string         `json:"mcp_tool_use_id"`
	Content      []ContentBlock `json:"content"`
	IsError      bool           `json:"is_error"`
}

// UserCustomToolResultBody is user.custom_tool_result as the server stores it: content and
// is_error only when the client sent them (an empty content list stays an empty list), and
// session_thread_id always (null in single-agent sessions).
type UserCustomToolResultBody struct {
	Content         []ContentBlock `json:"content,omitzero"`
	CustomToolUseID string         `json:"custom_tool_use_id"`
	IsError         *bool          `json:"is_error,omitempty"`
	SessionThreadID *string        `json:"session_thread_id"`
}

// UserToolResultBody is user.tool_result (self-hosted environments) with the rules of
// UserCustomToolResultBody.
type UserToolResultBody struct {
	Content         []ContentBlock `json:"content,omitzero"`
	IsError         *bool          `json:"is_error,omitempty"`
	SessionThreadID *string        `json:"session_thread_id"`
	ToolUseID       string         `json:"tool_use_id"`
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

// ToolConfirmationBody is user.tool_confirmation. DenyMessage is written only with a deny;
// SessionThreadID always (null in single-agent sessions, API.md §17).
type ToolConfirmationBody struct {
	DenyMessage     *string `json:"deny_message,omitempty"`
	Result          string  `json:"result"`
	SessionThreadID *string `json:"session_thread_id"`
	ToolUseID       string  `json:"tool_use_id"`
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
	// MCPServerName names the server of an mcp_connection_failed_error or
	// mcp_authentication_failed_error (API.md §5.5); absent on other types.
	MCPServerName *string `json:"mcp_server_name,omitempty"`
}

// SessionErrorBody is session.error.
type SessionErrorBody struct {
	Error SessionError `json:"error"`
}

// NewSessionErrorBody is session.error of type typ with retry status retry.
func NewSessionErrorBody(typ, message, retry string) SessionErrorBody {
	return SessionErrorBody{Error: SessionError{Type: typ, Message: message, RetryStatus: RetryStatus{Type: retry}}}
}

// EndsTurn reports whether the error closes the turn it happened in: the round cap, or
// retries given up on (exhausted, or terminal for the session).
func (b SessionErrorBody) EndsTurn() bool {
	rs := b.Error.RetryStatus.Type
	return b.Error.Type == SessionErrorToolUseLimitReached || b.Error.Type == SessionErrorCompactionLimit ||
		rs == RetryStatusExhausted || rs == RetryStatusTerminal
}

// StopReason is why a turn stopped; EventIDs names the calls a requires_action stop waits on.
type StopReason struct {
	Type     string   `json:"type"`
	EventIDs []string `json:"event_ids,omitempty"`
	// Details is the idle events' stop_details: {type: "refusal", category, explanation} for
	// a refusal, nil (null) otherwise. Not part of the stop_reason object.
	Details json.RawMessage `json:"-"`
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

// StatusIdleBody is session.status_idle. StopDetails is null except for a refusal.
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

// SessionUpdatedBody is session.updated: only the fields that changed. A cleared title is
// written as null; metadata is the full bag; agent the full snapshot.
type SessionUpdatedBody struct {
	Agent    *SessionAgent    `json:"agent,omitempty"`
	Metadata Metadata         `json:"metadata,omitzero"`
	Title    Nullable[string] `json:"title,omitzero"`
}

// Changed reports whether any field is set.
func (b SessionUpdatedBody) Changed() bool {
	return b.Agent != nil || b.Metadata != nil || b.Title.Set
}

// EmptyBody is the body of events without fields (session.status_running, …). It is shared:
// never modify it.
var EmptyBody = json.RawMessage(`{}`)

// null is the JSON null every "always null" field above marshals as.
var null = json.RawMessage(`null`)

// NewStatusIdleBody is session.status_idle for reason.
func NewStatusIdleBody(reason StopReason) StatusIdleBody {
	return StatusIdleBody{StopReason: reason, StopDetails: reason.details()}
}

// details is what stop_details holds for r.
func (r StopReason) details() json.RawMessage {
	if len(r.Details) > 0 {
		return r.Details
	}
	return null
}

// NewThreadStatusBody is a thread status event's body without a stop reason (_running,
// _rescheduled, _terminated).
func NewThreadStatusBody(threadID, agentName string) ThreadStatusBody {
	return ThreadStatusBody{SessionThreadID: threadID, AgentName: agentName}
}

// NewThreadIdleBody is session.thread_status_idle for reason; stop_details is null except
// for a refusal.
func NewThreadIdleBody(threadID, agentName string, reason StopReason) ThreadStatusBody {
	return ThreadStatusBody{SessionThreadID: threadID, AgentName: agentName, StopReason: &reason, StopDetails: reason.details()}
}

// NewSessionUsageBody is session.usage for u.
func NewSessionUsageBody(u Usage) SessionUsageBody {
	return SessionUsageBody{Usage: u, Budget: null}
}

// DecodeBody reads an event's body as T; an empty body reads as T's zero value. The error
// names the event's type and id.
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

// EncodeBody writes an event body of type typ. Bodies are plain structs of strings, numbers,
// slices and raw JSON, so an error means a raw field holds invalid JSON: it is returned,
// never panicked on.
func EncodeBody(typ string, body any) (json.RawMessage, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s body: %w", typ, err)
	}
	return raw, nil
}
