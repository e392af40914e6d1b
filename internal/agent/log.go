package agent

import (
	"encoding/json"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// call is a tool call read from the log: an agent.tool_use, agent.mcp_tool_use or
// agent.custom_tool_use event. Its event id is also the tool_use block id the model sees.
type call struct {
	event wire.Event
	name  string
	// server is the MCP server of an agent.mcp_tool_use.
	server     string
	input      json.RawMessage
	permission string
	// modelID is the id the model gave the call (its tool_use block's), kept in the event's
	// private part; "" for calls logged without one.
	modelID string
}

// id is the call's id in the log and on the wire: its event id.
func (c call) id() string { return c.event.ID }

// sentID is the call's id in the conversation sent to the model: the model's own id, so the
// conversation goes back exactly as the model produced it, or the event id for a call logged
// without one.
func (c call) sentID() string {
	if c.modelID != "" {
		return c.modelID
	}
	return c.event.ID
}

// callPrivate is a tool call event's private part.
type callPrivate struct {
	ModelID string `json:"tool_use_id,omitempty"`
}

func (c call) custom() bool { return c.event.Type == wire.EventAgentCustomToolUse }

func (c call) mcp() bool { return c.event.Type == wire.EventAgentMCPToolUse }

// modelName is the tool's name as the model was offered it.
func (c call) modelName() string {
	if c.mcp() {
		return MCPToolName(c.server, c.name)
	}
	return c.name
}

func readCall(ev wire.Event) (call, error) {
	b, err := wire.DecodeBody[wire.ToolUseBody](ev)
	if err != nil {
		return call{}, err
	}
	input := b.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(defaultToolInputJSON)
	}
	c := call{event: ev, name: b.Name, server: b.MCPServerName, input: input, permission: b.EvaluatedPermission}
	if len(ev.Private) > 0 {
		var p callPrivate
		if err := json.Unmarshal(ev.Private, &p); err != nil {
			return call{}, fmt.Errorf("decode private part of %s %s: %w", ev.Type, ev.ID, err)
		}
		c.modelID = p.ModelID
	}
	return c, nil
}

// answers indexes what the log says about tool calls, wherever it appears: results (from the
// agent or the client) and confirmations. The first answer to a call wins; the sessions
// service rejects second answers, so a later one can only be a stray.
type answers struct {
	results       map[string]wire.ResultBody
	confirmations map[string]wire.ToolConfirmationBody
}

func indexAnswers(history []wire.Event) (answers, error) {
	a := answers{results: map[string]wire.ResultBody{}, confirmations: map[string]wire.ToolConfirmationBody{}}
	for _, ev := range history {
		if !delivered(ev) {
			continue
		}
		switch ev.Type {
		case wire.EventAgentToolResult, wire.EventAgentMCPToolResult, wire.EventUserToolResult, wire.EventUserCustomToolResult:
			r, err := wire.DecodeBody[wire.ResultBody](ev)
			if err != nil {
				return a, err
			}
			if _, seen := a.results[r.Target()]; !seen {
				a.results[r.Target()] = r
			}
		case wire.EventUserToolConfirmation:
			c, err := wire.DecodeBody[wire.ToolConfirmationBody](ev)
			if err != nil {
				return a, err
			}
			if _, seen := a.confirmations[c.ToolUseID]; !seen {
				a.confirmations[c.ToolUseID] = c
			}
		}
	}
	return a, nil
}

// delivered reports whether an event counts: queued client events (processed_at null) have
// not reached the agent yet.
func delivered(ev wire.Event) bool { return ev.ProcessedAt != nil }

func isToolUse(typ string) bool {
	return typ == wire.EventAgentToolUse || typ == wire.EventAgentMCPToolUse || typ == wire.EventAgentCustomToolUse
}

func isToolAnswer(typ string) bool {
	switch typ {
	case wire.EventAgentToolResult, wire.EventAgentMCPToolResult, wire.EventUserToolResult,
		wire.EventUserCustomToolResult, wire.EventUserToolConfirmation:
		return true
	}
	return false
}

// Texts of synthetic tool results. The deny text is the hosted service's (API.md §17).
func denyText(tool string, message *string) string {
	if message == nil || *message == "" {
		return fmt.Sprintf("Permission to use %s has been rejected.", tool)
	}
	return fmt.Sprintf("Permission to use %s has been rejected. Rejection message: %s", tool, *message)
}

func unavailableText(tool string) string {
	return fmt.Sprintf("The tool %q is not enabled for this agent, so the call was not executed.", tool)
}

// abandonedText answers a call whose turn ended (an interrupt) before it had a result: it may
// never have started, or have been cut short while running.
const abandonedText = "The turn was interrupted before this tool call returned a result."
