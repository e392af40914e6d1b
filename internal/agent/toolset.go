package agent

import (
	"encoding/json"
	"slices"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// builtInSpec is what the model is told about a built-in tool. The input schemas follow the
// input shapes of API.md §3.2.
type builtInSpec struct {
	description string
	schema      string
}

var builtInSpecs = map[string]builtInSpec{
	wire.ToolNameBash: {
		"Run a bash command in the session's persistent shell; the working directory persists between calls. Returns the combined output.",
		`{"type":"object","properties":{"command":{"type":"string","description":"The command to run."},"restart":{"type":"boolean","description":"Restart the shell instead of running a command."},"timeout_ms":{"type":"integer","description":"Kill the command after this many milliseconds."}}}`,
	},
	wire.ToolNameRead: {
		"Read a text file from the workspace, with line numbers.",
		`{"type":"object","properties":{"file_path":{"type":"string"},"view_range":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2,"description":"[start, end] lines, 1-indexed and inclusive; end <= 0 reads to the end."}},"required":["file_path"]}`,
	},
	wire.ToolNameWrite: {
		"Create or overwrite a file in the workspace.",
		`{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}`,
	},
	wire.ToolNameEdit: {
		"Replace text in a file: old_string must match exactly once unless replace_all is true.",
		`{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"]}`,
	},
	wire.ToolNameGlob: {
		"List files matching a glob pattern (doublestar syntax, e.g. **/*.go).",
		`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"Directory to search from."}},"required":["pattern"]}`,
	},
	wire.ToolNameGrep: {
		"Search file contents with a regular expression; prints file:line: text for each match.",
		`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"File or directory to search."}},"required":["pattern"]}`,
	},
	wire.ToolNameWebFetch: {
		"Fetch the content of a URL.",
		`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`,
	},
	wire.ToolNameWebSearch: {
		"Search the web.",
		`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`,
	},
}

// toolset is the agent's resolved tools as the loop uses them.
type toolset struct {
	effective toolconfig.Effective
	custom    map[string]*wire.CustomTool
	// offered is what the model is told, built once per agent.
	offered []model.Tool
}

func newToolset(resolved []wire.Tool) toolset {
	ts := toolset{effective: toolconfig.NewEffective(resolved), custom: map[string]*wire.CustomTool{}}
	for _, name := range ts.effective.EnabledBuiltIns() {
		spec := builtInSpecs[name]
		ts.offered = append(ts.offered, model.Tool{Name: name, Description: spec.description, InputSchema: json.RawMessage(spec.schema)})
	}
	// MCP toolsets are kept in the configuration but not offered until MCP servers are
	// connected.
	for _, t := range resolved {
		if c := t.Custom; c != nil {
			ts.custom[c.Name] = c
			ts.offered = append(ts.offered, model.Tool{Name: c.Name, Description: c.Description, InputSchema: c.InputSchema})
		}
	}
	return ts
}

// NeedsSandbox reports whether an agent with these resolved tools may run a built-in that
// needs a sandbox; without one, a session never needs a SandboxSource.
func NeedsSandbox(resolved []wire.Tool) bool {
	return slices.ContainsFunc(toolconfig.NewEffective(resolved).EnabledBuiltIns(), tools.NeedsSandbox)
}

// callEvent builds the event for one tool_use block of a model response: an agent.tool_use
// for an enabled built-in (allow or ask by its policy; auto asks until a judge exists), an
// agent.custom_tool_use for a custom tool, and an agent.tool_use evaluated deny without an
// evaluation for anything else (a disabled built-in, an MCP tool, a name the model made up).
// Enabled built-ins win over custom tools; the configuration forbids the overlap anyway.
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
	body := wire.ToolUseBody{Name: b.Name, Input: input, EvaluatedPermission: wire.PermissionResultDeny}
	if setting.Enabled {
		switch setting.Policy {
		case wire.PermissionAlwaysAllow:
			body.EvaluatedPermission, body.Evaluation = wire.PermissionResultAllow, &wire.Evaluation{Type: string(wire.PermissionAlwaysAllow)}
		default: // always_ask, and auto until a judge exists
			body.EvaluatedPermission, body.Evaluation = wire.PermissionResultAsk, &wire.Evaluation{Type: string(wire.PermissionAlwaysAsk)}
		}
	}
	return newEvent(id, wire.EventAgentToolUse, body)
}
