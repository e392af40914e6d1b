package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestMCPToolName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		server, tool string
		want         string
	}{
		{"github", "get_issue", "mcp__github__get_issue"},
		{"my-server", "list-files", "mcp__my-server__list-files"},
		{"gh", "a_b_c", "mcp__gh__a_b_c"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, agent.MCPToolName(tt.server, tt.tool))
	}
	// Names that are not plain get the hashed form: valid for the model, within 64
	// characters, and distinct for pairs whose plain forms would collide.
	hashed := [][2]string{
		{"a__b", "c"}, {"a", "b__c"}, {"my server", "get"}, {"docs.example.com", "search"},
		{"s", strings.Repeat("x", 100)}, {"s", strings.Repeat("x", 101)}, {"_s", "t"}, {"s", "t_"}, {"ü", "t"},
	}
	seen := map[string]bool{}
	for _, p := range hashed {
		name := agent.MCPToolName(p[0], p[1])
		require.Regexp(t, `^mcpx_[A-Za-z0-9_-]*_[0-9a-f]{12}$`, name, "%q/%q", p[0], p[1])
		require.LessOrEqual(t, len(name), 64)
		require.False(t, seen[name], "%s is given twice", name)
		seen[name] = true
		require.Equal(t, name, agent.MCPToolName(p[0], p[1]), "stable")
	}
}

// recordingMCP is an MCPCaller double that answers from a map and counts calls per id.
type recordingMCP struct {
	mu    sync.Mutex
	calls map[string]int
	res   agent.ToolResult
	err   error
}

func (r *recordingMCP) CallMCP(_ context.Context, callID, server, tool string, input json.RawMessage) (agent.ToolResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[callID]++
	if r.err != nil {
		return agent.ToolResult{}, r.err
	}
	res := r.res
	if res.Text == "" && res.Content == nil {
		res.Text = server + "/" + tool + " " + string(input)
	}
	return res, nil
}

func mcpAgent(t *testing.T, toolset string) wire.SessionAgent {
	t.Helper()
	servers := json.RawMessage(`[{"type":"url","name":"gh","url":"https://mcp.example.test/mcp"}]`)
	resolved, decoded, err := toolconfig.ParseAndResolve(json.RawMessage(`[`+toolset+`]`), servers)
	require.NoError(t, err)
	ag := agentWith(t, noTools)
	ag.Tools, ag.MCPServers = resolved, decoded
	return ag
}

var ghListing = []agent.MCPServerTools{{Server: "gh", Tools: []agent.MCPTool{
	{Name: "get_issue", Description: "Get an issue.", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
	{Name: "delete_repo", Description: "Delete a repository.", InputSchema: json.RawMessage(`{"type":"object"}`)},
	{Name: "no_schema", InputSchema: json.RawMessage(`"oops"`)},
}}}

// toolsModel records the tools of every request and answers like the fake model.
type toolsModel struct {
	model.Client
	mu    sync.Mutex
	tools [][]string
	reqs  []model.Request
}

func (m *toolsModel) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	m.mu.Lock()
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
		var schema map[string]any
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil || schema == nil {
			panic("a tool without an object schema reached the model: " + tl.Name)
		}
	}
	m.tools = append(m.tools, names)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.Client.Stream(ctx, req, onDelta)
}

func TestMCPToolsAreOfferedAndCalled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		toolset string
		offered []string
		// perm is the evaluated permission of the mcp__gh__get_issue call.
		perm string
	}{
		{"MCP tools ask by default", `{"type":"mcp_toolset","mcp_server_name":"gh"}`,
			[]string{"mcp__gh__get_issue", "mcp__gh__delete_repo", "mcp__gh__no_schema"}, wire.PermissionResultAsk},
		{"always_allow runs unasked", `{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"permission_policy":{"type":"always_allow"}}}`,
			[]string{"mcp__gh__get_issue", "mcp__gh__delete_repo", "mcp__gh__no_schema"}, wire.PermissionResultAllow},
		{"configs enable and disable single tools", `{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"enabled":false},"configs":[{"name":"get_issue","enabled":true,"permission_policy":{"type":"always_allow"}}]}`,
			[]string{"mcp__gh__get_issue"}, wire.PermissionResultAllow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &toolsModel{Client: fake.New()}
			caller := &recordingMCP{}
			rt := agent.NewRuntime(agent.NewCore(m))
			l := agent.NewMemoryLog()
			in := func() agent.Input {
				return agent.Input{Agent: mcpAgent(t, tt.toolset), History: l.Events(), Emitter: l, MCPTools: ghListing, MCP: caller}
			}
			l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool mcp__gh__get_issue {\"n\":7}"}]}`), true)
			out, err := rt.Run(t.Context(), in())
			require.NoError(t, err)
			require.Equal(t, tt.offered, m.tools[0])

			use := ofType(l.Events(), wire.EventAgentMCPToolUse)
			require.Len(t, use, 1)
			b := body(t, use[0])
			require.Equal(t, "gh", b["mcp_server_name"])
			require.Equal(t, "get_issue", b["name"])
			require.Equal(t, tt.perm, b["evaluated_permission"])
			if tt.perm == wire.PermissionResultAsk {
				require.Equal(t, agent.StopRequiresAction, out.StopReason)
				require.Equal(t, []string{use[0].ID}, out.EventIDs)
				require.Empty(t, caller.calls, "nothing runs before the confirmation")
				l.Append(wire.EventUserToolConfirmation, json.RawMessage(`{"tool_use_id":"`+use[0].ID+`","result":"allow","session_thread_id":null}`), true)
				out, err = rt.Run(t.Context(), in())
				require.NoError(t, err)
			}
			require.Equal(t, agent.StopEndTurn, out.StopReason)
			require.Equal(t, map[string]int{use[0].ID: 1}, caller.calls)
			res := ofType(l.Events(), wire.EventAgentMCPToolResult)
			require.Len(t, res, 1)
			require.JSONEq(t, `{"mcp_tool_use_id":"`+use[0].ID+`","content":[{"type":"text","text":"gh/get_issue {\"n\":7}"}],"is_error":false}`, string(res[0].Body))
			require.Empty(t, ofType(l.Events(), wire.EventAgentToolResult))
			require.Contains(t, messageText(t, ofType(l.Events(), wire.EventAgentMessage)[0]), `mcp__gh__get_issue: gh/get_issue {"n":7}`)
		})
	}
}

func TestMCPCallDeniedOrUnavailable(t *testing.T) {
	t.Parallel()
	toolset := `{"type":"mcp_toolset","mcp_server_name":"gh"}`
	t.Run("a denied call gets an mcp_tool_result with the deny text", func(t *testing.T) {
		t.Parallel()
		caller := &recordingMCP{}
		rt := agent.NewRuntime(agent.NewCore(fake.New()))
		l := agent.NewMemoryLog()
		l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool mcp__gh__delete_repo {}"}]}`), true)
		in := func() agent.Input {
			return agent.Input{Agent: mcpAgent(t, toolset), History: l.Events(), Emitter: l, MCPTools: ghListing, MCP: caller}
		}
		_, err := rt.Run(t.Context(), in())
		require.NoError(t, err)
		use := ofType(l.Events(), wire.EventAgentMCPToolUse)[0]
		l.Append(wire.EventUserToolConfirmation, json.RawMessage(`{"tool_use_id":"`+use.ID+`","result":"deny","deny_message":"never","session_thread_id":null}`), true)
		out, err := rt.Run(t.Context(), in())
		require.NoError(t, err)
		require.Equal(t, agent.StopEndTurn, out.StopReason)
		require.Empty(t, caller.calls)
		res := ofType(l.Events(), wire.EventAgentMCPToolResult)
		require.Len(t, res, 1)
		require.JSONEq(t, `{"mcp_tool_use_id":"`+use.ID+`","content":[{"type":"text","text":"Permission to use delete_repo has been rejected. Rejection message: never"}],"is_error":true}`, string(res[0].Body))
	})
	t.Run("a server that was not listed offers nothing and its names are refused", func(t *testing.T) {
		t.Parallel()
		m := &toolsModel{Client: fake.New()}
		rt := agent.NewRuntime(agent.NewCore(m))
		l := agent.NewMemoryLog()
		l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool mcp__gh__get_issue {}"}]}`), true)
		out, err := rt.Run(t.Context(), agent.Input{Agent: mcpAgent(t, toolset), History: l.Events(), Emitter: l})
		require.NoError(t, err)
		require.Equal(t, agent.StopEndTurn, out.StopReason)
		require.Empty(t, m.tools[0])
		require.Empty(t, ofType(l.Events(), wire.EventAgentMCPToolUse))
		res := body(t, ofType(l.Events(), wire.EventAgentToolResult)[0])
		require.Equal(t, true, res["is_error"])
		// The request after the refused call defines no tools, so it carries no tool blocks
		// (models refuse them there): the call and its result are told as text.
		require.Len(t, m.reqs, 2)
		var texts []string
		for _, msg := range m.reqs[1].Messages {
			for _, b := range msg.Content {
				require.Equal(t, model.BlockText, b.Type)
				texts = append(texts, b.Text)
			}
		}
		require.Contains(t, texts, "[called the tool mcp__gh__get_issue with {}]")
	})
	t.Run("a cancelled call records no result and is asked again with the same id", func(t *testing.T) {
		t.Parallel()
		caller := &recordingMCP{err: context.Canceled}
		core := agent.NewCore(fake.New())
		l := agent.NewMemoryLog()
		ag := mcpAgent(t, `{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"permission_policy":{"type":"always_allow"}}}`)
		l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool mcp__gh__get_issue {}"}]}`), true)
		_, err := core.ModelTurn(t.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, MCPTools: ghListing, MCP: caller})
		require.NoError(t, err)
		use := ofType(l.Events(), wire.EventAgentMCPToolUse)[0]
		err = core.ExecuteTool(t.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, MCPTools: ghListing, MCP: caller}, use)
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, ofType(l.Events(), wire.EventAgentMCPToolResult))
		caller.err = nil
		require.NoError(t, core.ExecuteTool(t.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, MCPTools: ghListing, MCP: caller}, use))
		require.NoError(t, core.ExecuteTool(t.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, MCPTools: ghListing, MCP: caller}, use))
		require.Equal(t, map[string]int{use.ID: 2}, caller.calls, "the retry asks again under the same id (the caller keeps it at most once); a committed result is never asked again")
		require.Len(t, ofType(l.Events(), wire.EventAgentMCPToolResult), 1)
	})
}

func TestMCPToolLosesToACustomToolOfTheSameName(t *testing.T) {
	t.Parallel()
	m := &toolsModel{Client: fake.New()}
	core := agent.NewCore(m)
	servers := json.RawMessage(`[{"type":"url","name":"gh","url":"https://mcp.example.test/mcp"}]`)
	resolved, decoded, err := toolconfig.ParseAndResolve(json.RawMessage(`[{"type":"mcp_toolset","mcp_server_name":"gh"},
		{"type":"custom","name":"mcp__gh__get_issue","description":"mine","input_schema":{"type":"object"}}]`), servers)
	require.NoError(t, err)
	ag := agentWith(t, noTools)
	ag.Tools, ag.MCPServers = resolved, decoded
	l := agent.NewMemoryLog()
	l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool mcp__gh__get_issue {}"}]}`), true)
	_, err = core.ModelTurn(t.Context(), agent.Input{Agent: ag, History: l.Events(), Emitter: l, MCPTools: ghListing})
	require.NoError(t, err)
	require.Equal(t, []string{"mcp__gh__get_issue", "mcp__gh__delete_repo", "mcp__gh__no_schema"}, m.tools[0], "offered once, as the custom tool")
	require.Len(t, ofType(l.Events(), wire.EventAgentCustomToolUse), 1)
}

func TestMCPServersToList(t *testing.T) {
	t.Parallel()
	servers := json.RawMessage(`[{"type":"url","name":"on","url":"https://a.example.test"},{"type":"url","name":"off","url":"https://b.example.test"},{"type":"url","name":"one","url":"https://c.example.test"}]`)
	resolved, decoded, err := toolconfig.ParseAndResolve(json.RawMessage(`[
		{"type":"mcp_toolset","mcp_server_name":"on"},
		{"type":"mcp_toolset","mcp_server_name":"off","default_config":{"enabled":false},"configs":[{"name":"x","enabled":false}]},
		{"type":"mcp_toolset","mcp_server_name":"one","default_config":{"enabled":false},"configs":[{"name":"x","enabled":true}]}]`), servers)
	require.NoError(t, err)
	ag := agentWith(t, noTools)
	ag.Tools, ag.MCPServers = resolved, decoded
	var names []string
	for _, s := range agent.MCPServersToList(ag) {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"on", "one"}, names, "a server whose toolset enables nothing is not contacted")
}
