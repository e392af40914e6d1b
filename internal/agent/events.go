package agent

import (
	"encoding/json"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// defaultToolInputJSON is the input of a call whose input is missing or unreadable.
const defaultToolInputJSON = "{}"

// newEvent encodes body as an event of type typ. The bodies are package wire's.
func newEvent(id, typ string, body any) (NewEvent, error) {
	raw, err := wire.EncodeBody(typ, body)
	if err != nil {
		return NewEvent{}, err
	}
	return NewEvent{ID: id, Type: typ, Body: raw}, nil
}

// resultEvent answers a call: agent.mcp_tool_result for an MCP call, agent.tool_result for
// a built-in.
func resultEvent(id string, call ToolCall, content []wire.ContentBlock, isError bool) (NewEvent, error) {
	if call.MCPServer != "" {
		return newEvent(id, wire.EventAgentMCPToolResult, wire.MCPToolResultBody{
			MCPToolUseID: call.Event.ID,
			Content:      content,
			IsError:      isError,
		})
	}
	return newEvent(id, wire.EventAgentToolResult, wire.ToolResultBody{
		ToolUseID: call.Event.ID,
		Content:   content,
		IsError:   isError,
	})
}

// spanEndEvent closes a model request. speed is the request's speed when it was not the
// standard one ("fast"): model_usage.speed then says so, as it is priced differently; it
// stays null otherwise, as on hosted sessions (API.md §17).
func spanEndEvent(id, startID string, isError bool, u model.Usage, speed ...string) (NewEvent, error) {
	body := wire.SpanModelRequestEndBody{
		ModelRequestStartID: startID,
		IsError:             isError,
		ModelUsage: wire.ModelUsage{
			InputTokens:              u.InputTokens,
			OutputTokens:             u.OutputTokens,
			CacheCreationInputTokens: u.CacheCreationInputTokens,
			CacheReadInputTokens:     u.CacheReadInputTokens,
		},
	}
	if len(speed) > 0 && speed[0] != "" {
		body.ModelUsage.Speed = &speed[0]
	}
	return newEvent(id, wire.EventSpanModelRequestEnd, body)
}

// emptyBody is the body of events without fields; a copy, so no event shares wire.EmptyBody.
func emptyBody() json.RawMessage { return append(json.RawMessage(nil), wire.EmptyBody...) }
