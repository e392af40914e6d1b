package agent

import (
	"encoding/json"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Names of the wire contract (API.md §5) that package wire has no constant for.
const (
	eventSpanModelRequestStart = "span.model_request_start"
	eventSpanModelRequestEnd   = "span.model_request_end"
	errorToolUseLimitReached   = "tool_use_limit_reached_error"
	retryStatusExhausted       = "exhausted"
	retryStatusTerminal        = "terminal"
	permissionAllow            = "allow"
	permissionAsk              = "ask"
	permissionDeny             = "deny"
	confirmationAllow          = "allow"
	evaluationAlwaysAllow      = "always_allow"
	evaluationAlwaysAsk        = "always_ask"
	contentTypeText            = "text"
	defaultToolInputJSON       = "{}"
)

// ---- bodies the runtime writes ------------------------------------------------------------

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type messageBody struct {
	Content []textBlock `json:"content"`
}

type evaluation struct {
	Type string `json:"type"`
}

// toolUseBody is agent.tool_use. Evaluation is absent when the call was refused before any
// policy applied (API.md §5.3).
type toolUseBody struct {
	Name                string          `json:"name"`
	Input               json.RawMessage `json:"input"`
	EvaluatedPermission string          `json:"evaluated_permission"`
	Evaluation          *evaluation     `json:"evaluation,omitempty"`
	SessionThreadID     *string         `json:"session_thread_id"`
}

// customToolUseBody is agent.custom_tool_use.
type customToolUseBody struct {
	Name            string          `json:"name"`
	Input           json.RawMessage `json:"input"`
	SessionThreadID *string         `json:"session_thread_id"`
}

type toolResultBody struct {
	ToolUseID string      `json:"tool_use_id"`
	Content   []textBlock `json:"content"`
	IsError   bool        `json:"is_error"`
}

type spanUsage struct {
	InputTokens              int64   `json:"input_tokens"`
	OutputTokens             int64   `json:"output_tokens"`
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	Speed                    *string `json:"speed"`
}

type spanEndBody struct {
	ModelRequestStartID string    `json:"model_request_start_id"`
	IsError             bool      `json:"is_error"`
	ModelUsage          spanUsage `json:"model_usage"`
}

type retryStatus struct {
	Type string `json:"type"`
}

type sessionError struct {
	Type        string      `json:"type"`
	Message     string      `json:"message"`
	RetryStatus retryStatus `json:"retry_status"`
}

type sessionErrorBody struct {
	Error sessionError `json:"error"`
}

func newEvent(id, typ string, body any) (NewEvent, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return NewEvent{}, fmt.Errorf("encode %s body: %w", typ, err)
	}
	return NewEvent{ID: id, Type: typ, Body: raw}, nil
}

func toolResultEvent(id, toolUseID, text string, isError bool) (NewEvent, error) {
	return newEvent(id, wire.EventAgentToolResult, toolResultBody{
		ToolUseID: toolUseID,
		Content:   []textBlock{{Type: contentTypeText, Text: text}},
		IsError:   isError,
	})
}

func spanEndEvent(id, startID string, isError bool, u model.Usage) (NewEvent, error) {
	return newEvent(id, eventSpanModelRequestEnd, spanEndBody{
		ModelRequestStartID: startID,
		IsError:             isError,
		ModelUsage: spanUsage{
			InputTokens:              u.InputTokens,
			OutputTokens:             u.OutputTokens,
			CacheCreationInputTokens: u.CacheCreationInputTokens,
			CacheReadInputTokens:     u.CacheReadInputTokens,
		},
	})
}

// ---- bodies the runtime reads -------------------------------------------------------------
//
// Reading is lenient (unknown fields are ignored): the log is written by this server, and a
// field added later must not make old code fail on new events.

type contentBody struct {
	Content []wire.ContentBlock `json:"content"`
}

// toolUseRead covers agent.tool_use, agent.mcp_tool_use and agent.custom_tool_use.
type toolUseRead struct {
	Name                string          `json:"name"`
	Input               json.RawMessage `json:"input"`
	EvaluatedPermission string          `json:"evaluated_permission"`
	MCPServerName       string          `json:"mcp_server_name"`
}

// resultRead covers every event that answers a tool call with content.
type resultRead struct {
	ToolUseID       string              `json:"tool_use_id"`
	MCPToolUseID    string              `json:"mcp_tool_use_id"`
	CustomToolUseID string              `json:"custom_tool_use_id"`
	Content         []wire.ContentBlock `json:"content"`
	IsError         bool                `json:"is_error"`
}

func (r resultRead) target() string {
	switch {
	case r.ToolUseID != "":
		return r.ToolUseID
	case r.MCPToolUseID != "":
		return r.MCPToolUseID
	}
	return r.CustomToolUseID
}

type confirmationRead struct {
	ToolUseID   string  `json:"tool_use_id"`
	Result      string  `json:"result"`
	DenyMessage *string `json:"deny_message"`
}

type spanEndRead struct {
	ModelRequestStartID string    `json:"model_request_start_id"`
	IsError             bool      `json:"is_error"`
	ModelUsage          spanUsage `json:"model_usage"`
}

type sessionErrorRead struct {
	Error struct {
		Type        string      `json:"type"`
		RetryStatus retryStatus `json:"retry_status"`
	} `json:"error"`
}

// decodeBody reads an event body; an empty body reads as {}.
func decodeBody(ev wire.Event, v any) error {
	if len(ev.Body) == 0 {
		return nil
	}
	// Plain json.Unmarshal: wire.ContentBlock is strict, the envelope is not.
	if err := json.Unmarshal(ev.Body, v); err != nil {
		return fmt.Errorf("decode %s %s: %w", ev.Type, ev.ID, err)
	}
	return nil
}
