package wire

import (
	"bytes"
	"encoding/json"
	"time"
)

// Event is a persisted event: the envelope (id, type, processed_at) plus the type-specific
// fields kept as one JSON object in Body. Keeping the body opaque lets the log store every
// event type, including ones added later, without a schema change.
type Event struct {
	ID          string
	Type        string
	ProcessedAt *time.Time
	// Body holds the type-specific fields as a JSON object, without id, type or processed_at.
	Body json.RawMessage
	// Seq is the event's position in its session's log; it is not part of the wire form.
	Seq       int64
	CreatedAt time.Time
	// Private is the part of the event only the worker reads, never part of the wire form
	// (MarshalJSON leaves it out): what the model must be sent back that clients are not
	// shown, such as a thinking block and its signature (agent.thinking has no content on the
	// wire) or a compaction's summary. A JSON object, or nil.
	Private json.RawMessage
}

// MarshalJSON writes {"type","id",<body fields>,"processed_at"} without decoding the body.
func (e Event) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(e.Body) + 96)
	b.WriteString(`{"type":`)
	writeJSONString(&b, e.Type)
	b.WriteString(`,"id":`)
	writeJSONString(&b, e.ID)
	body := bytes.TrimSpace(e.Body)
	if len(body) > 2 { // more than "{}"
		b.WriteByte(',')
		b.Write(bytes.TrimSpace(body[1 : len(body)-1]))
	}
	b.WriteString(`,"processed_at":`)
	if e.ProcessedAt == nil {
		b.WriteString("null")
	} else {
		writeJSONString(&b, FormatTime(*e.ProcessedAt))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // marshaling a string cannot fail
	b.Write(enc)
}

// Event types (API.md §5). No other package spells an event type.
const (
	EventUserMessage          = "user.message"
	EventUserInterrupt        = "user.interrupt"
	EventUserToolConfirmation = "user.tool_confirmation"
	EventUserCustomToolResult = "user.custom_tool_result"
	EventUserToolResult       = "user.tool_result"
	EventUserDefineOutcome    = "user.define_outcome"
	EventSystemMessage        = "system.message"

	EventAgentMessage                = "agent.message"
	EventAgentThinking               = "agent.thinking"
	EventAgentToolUse                = "agent.tool_use"
	EventAgentToolResult             = "agent.tool_result"
	EventAgentMCPToolUse             = "agent.mcp_tool_use"
	EventAgentMCPToolResult          = "agent.mcp_tool_result"
	EventAgentCustomToolUse          = "agent.custom_tool_use"
	EventAgentThreadMessageSent      = "agent.thread_message_sent"
	EventAgentThreadMessageReceived  = "agent.thread_message_received"
	EventAgentThreadContextCompacted = "agent.thread_context_compacted"

	EventSessionStatusRunning           = "session.status_running"
	EventSessionStatusIdle              = "session.status_idle"
	EventSessionStatusRescheduled       = "session.status_rescheduled"
	EventSessionStatusTerminated        = "session.status_terminated"
	EventSessionError                   = "session.error"
	EventSessionUpdated                 = "session.updated"
	EventSessionUsage                   = "session.usage"
	EventSessionDeleted                 = "session.deleted"
	EventSessionThreadCreated           = "session.thread_created"
	EventSessionThreadStatusRunning     = "session.thread_status_running"
	EventSessionThreadStatusIdle        = "session.thread_status_idle"
	EventSessionThreadStatusRescheduled = "session.thread_status_rescheduled"
	EventSessionThreadStatusTerminated  = "session.thread_status_terminated"

	EventSpanModelRequestStart        = "span.model_request_start"
	EventSpanModelRequestEnd          = "span.model_request_end"
	EventSpanOutcomeEvaluationStart   = "span.outcome_evaluation_start"
	EventSpanOutcomeEvaluationOngoing = "span.outcome_evaluation_ongoing"
	EventSpanOutcomeEvaluationEnd     = "span.outcome_evaluation_end"

	EventWorkflowRunCreated       = "workflow_run.created"
	EventWorkflowRunStatusRunning = "workflow_run.status_running"
	EventWorkflowRunStatusIdle    = "workflow_run.status_idle"
	EventWorkflowRunStatusEnded   = "workflow_run.status_ended"
	EventWorkflowRunError         = "workflow_run.error"
	EventWorkflowRunPhaseStarted  = "workflow_run.phase_started"
	EventWorkflowRunPhaseEnded    = "workflow_run.phase_ended"
)

// EventTypes is the complete filter enum of GET …/events `types[]` (API.md §5.3), in the
// SDK's order. session.deleted is in the event unions but not in this enum.
var EventTypes = []string{
	EventUserMessage, EventUserInterrupt, EventUserToolConfirmation, EventUserCustomToolResult,
	EventAgentCustomToolUse, EventAgentMessage, EventAgentThinking, EventAgentMCPToolUse,
	EventAgentMCPToolResult, EventAgentToolUse, EventAgentToolResult, EventAgentThreadMessageReceived,
	EventAgentThreadMessageSent, EventAgentThreadContextCompacted, EventSessionError,
	EventSessionStatusRescheduled, EventSessionStatusRunning, EventSessionStatusIdle,
	EventSessionStatusTerminated, EventSessionThreadCreated, EventSpanOutcomeEvaluationStart,
	EventSpanOutcomeEvaluationEnd, EventSpanModelRequestStart, EventSpanModelRequestEnd,
	EventSpanOutcomeEvaluationOngoing, EventUserDefineOutcome, EventSessionThreadStatusRunning,
	EventSessionThreadStatusIdle, EventSessionThreadStatusTerminated, EventUserToolResult,
	EventSessionThreadStatusRescheduled, EventSessionUpdated, EventSystemMessage, EventSessionUsage,
	EventWorkflowRunCreated, EventWorkflowRunStatusRunning, EventWorkflowRunStatusIdle,
	EventWorkflowRunStatusEnded, EventWorkflowRunError, EventWorkflowRunPhaseStarted,
	EventWorkflowRunPhaseEnded,
}
