package agent

import (
	"encoding/json"
	"slices"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The built-ins' descriptions and input schemas are builtInSpecs (builtin_specs.go).

// toolset is the agent's resolved tools as the loop uses them.
type toolset struct {
	effective toolconfig.Effective
	custom    map[string]*wire.CustomTool
	// mcp maps the offered names of enabled MCP tools to their server and tool.
	mcp map[string]mcpRef
	// offered is what the model is told, built once per step.
	offered []model.Tool
}

// maxOfferedTools bounds one request's tools: the configuration allows 256 tools across all
// toolsets, and servers may list more than their configs name. Built-ins and custom tools come
// first, then MCP tools in listing order until the bound.
const maxOfferedTools = 256

// newToolset builds the tools of one model request: the enabled built-ins, the custom tools,
// then the enabled tools of each MCP server in listing order (listing holds what the servers
// listed for the turn; a server that was unreachable is absent).
func newToolset(resolved []wire.Tool, listing []MCPServerTools) toolset {
	ts := toolset{effective: toolconfig.NewEffective(resolved), custom: map[string]*wire.CustomTool{}, mcp: map[string]mcpRef{}}
	for _, name := range ts.effective.EnabledBuiltIns() {
		cfg, _ := ts.effective.BuiltInConfig(name)
		ts.offered = append(ts.offered, model.Tool{Name: name, Description: describeBuiltIn(name, cfg), InputSchema: builtInSpecs[name].schema})
	}
	for _, t := range resolved {
		if c := t.Custom; c != nil {
			ts.custom[c.Name] = c
			ts.offered = append(ts.offered, model.Tool{Name: c.Name, Description: c.Description, InputSchema: c.InputSchema})
		}
	}
	for _, s := range listing {
		for _, tool := range s.Tools {
			if len(ts.offered) >= maxOfferedTools {
				return ts
			}
			if !ts.effective.MCP(s.Server, tool.Name).Enabled {
				continue
			}
			name := MCPToolName(s.Server, tool.Name)
			if _, taken := ts.custom[name]; taken {
				continue
			}
			if _, taken := ts.mcp[name]; taken {
				continue // a server listing one name twice
			}
			ts.mcp[name] = mcpRef{server: s.Server, tool: tool.Name}
			ts.offered = append(ts.offered, model.Tool{Name: name, Description: tool.Description, InputSchema: objectSchema(tool.InputSchema)})
		}
	}
	return ts
}

// objectSchema is schema when it is a JSON object, else the empty object schema: the model
// API refuses a tool without one, and a server's listing is not ours to trust.
func objectSchema(schema json.RawMessage) json.RawMessage {
	var probe map[string]json.RawMessage
	if json.Unmarshal(schema, &probe) != nil || probe == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return schema
}

// NeedsSandbox reports whether an agent with these resolved tools may run a built-in that
// needs a sandbox; without one, a session never needs a SandboxSource.
func NeedsSandbox(resolved []wire.Tool) bool {
	return slices.ContainsFunc(toolconfig.NewEffective(resolved).EnabledBuiltIns(), tools.NeedsSandbox)
}

// callEvent builds the event for one tool_use block of a model response: an agent.tool_use
// for an enabled built-in (allow or ask by its policy; auto asks, undecided), an
// agent.custom_tool_use for a custom tool, an agent.mcp_tool_use for an offered MCP tool (by
// its tool's policy), and an agent.tool_use evaluated deny without an evaluation for anything
// else (a disabled built-in, a name the model made up). Enabled built-ins win over custom
// tools; the configuration forbids the overlap anyway.
func (ts toolset) callEvent(id string, b model.Block) (NewEvent, error) {
	input := b.Input
	if len(input) == 0 || !json.Valid(input) {
		// A model client that could not parse the streamed input leaves the call without
		// one; the tool then reports the missing fields, which the model can act on.
		input = json.RawMessage(defaultToolInputJSON)
	}
	setting := ts.effective.BuiltIn(b.Name)
	if _, custom := ts.custom[b.Name]; custom && !setting.Enabled {
		return newEvent(id, wire.EventAgentCustomToolUse, wire.CustomToolUseBody{Name: b.Name, Input: input})
	}
	if ref, ok := ts.mcp[b.Name]; ok && !setting.Enabled {
		body := wire.ToolUseBody{Name: ref.tool, MCPServerName: ref.server, Input: input}
		body.EvaluatedPermission, body.Evaluation = evaluate(ts.effective.MCP(ref.server, ref.tool).Policy)
		return newEvent(id, wire.EventAgentMCPToolUse, body)
	}
	body := wire.ToolUseBody{Name: b.Name, Input: input, EvaluatedPermission: wire.PermissionResultDeny}
	if setting.Enabled {
		body.EvaluatedPermission, body.Evaluation = evaluate(setting.Policy)
	}
	return newEvent(id, wire.EventAgentToolUse, body)
}

// evaluate applies an enabled tool's permission policy: always_allow runs the call; always_ask
// waits for the user; auto has no judge here, so every call is undecided (indeterminate) and
// asks, which is what the hosted auto policy does with a call it cannot judge (API.md §3.3).
func evaluate(policy wire.PermissionPolicy) (string, *wire.Evaluation) {
	switch policy {
	case wire.PermissionAlwaysAllow:
		return wire.PermissionResultAllow, &wire.Evaluation{Type: string(wire.PermissionAlwaysAllow)}
	case wire.PermissionAuto:
		return wire.PermissionResultAsk, &wire.Evaluation{Type: string(wire.PermissionAuto),
			EvaluatedPermission: &wire.AutoVerdict{Type: wire.PermissionResultAsk, ReasonCode: wire.AutoReasonIndeterminate}}
	}
	return wire.PermissionResultAsk, &wire.Evaluation{Type: string(wire.PermissionAlwaysAsk)}
}
