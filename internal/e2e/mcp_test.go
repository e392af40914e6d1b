//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// allowLocalMCP lets the worker reach the tests' MCP servers, which listen on 127.0.0.1.
func allowLocalMCP(c *app.Config) { c.MCP.AllowPrivateNetworks = true }

// mcpToolset is an mcp_toolset for server; allow makes every tool run unasked.
func mcpToolset(server string, allow bool, configs ...anthropic.BetaManagedAgentsMCPToolConfigParams) anthropic.BetaAgentNewParamsToolUnion {
	ts := &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: server, Configs: configs}
	if allow {
		ts.DefaultConfig.PermissionPolicy = anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParamsPermissionPolicyUnion{OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{}}
	}
	return anthropic.BetaAgentNewParamsToolUnion{OfMCPToolset: ts}
}

// newMCPFixture is a running session whose agent declares the given MCP servers (name → URL).
func newMCPFixture(t *testing.T, e *env, servers map[string]string, tools ...anthropic.BetaAgentNewParamsToolUnion) *turnFixture {
	t.Helper()
	ctx := context.Background()
	params := anthropic.BetaAgentNewParams{Name: "mcp", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: tools}
	for name, url := range servers {
		params.MCPServers = append(params.MCPServers, anthropic.BetaManagedAgentsURLMCPServerParams{Name: name, URL: url})
	}
	agent, err := e.client.Beta.Agents.New(ctx, params)
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "mcp-" + ids.New("")})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)
	return &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}
}

func mcpConfirmation(useID string, allow bool, denyMessage string) anthropic.BetaManagedAgentsEventParamsUnion {
	p := &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{ToolUseID: useID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}
	if !allow {
		p.Result, p.DenyMessage = anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny, param.NewOpt(denyMessage)
	}
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: p}
}

func mcpResultText(t *testing.T, ev anthropic.BetaManagedAgentsStreamSessionEventsUnion) (string, bool) {
	t.Helper()
	f := fieldsOf(t, ev)
	content := f["content"].([]any)
	require.NotEmpty(t, content)
	return content[0].(map[string]any)["text"].(string), f["is_error"].(bool)
}

func TestMCPToolsRunEndToEnd(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	e := newRunningEnv(t, allowLocalMCP)
	f := newMCPFixture(t, e, map[string]string{"tools": srv.URL}, mcpToolset("tools", false))

	// MCP tools ask by default: the call waits for a confirmation.
	f.send(userMessage(`/tool mcp__tools__echo {"text":"hello from mcp"}`))
	evs := f.untilIdle()
	use := find(t, evs, "agent.mcp_tool_use")
	fields := fieldsOf(t, use)
	require.Equal(t, "tools", fields["mcp_server_name"])
	require.Equal(t, "echo", fields["name"])
	require.Equal(t, map[string]any{"text": "hello from mcp"}, fields["input"])
	require.Equal(t, "ask", fields["evaluated_permission"])
	require.Equal(t, map[string]any{"type": "always_ask"}, fields["evaluation"])
	require.Equal(t, "requires_action", last(evs).StopReason.Type)
	require.Equal(t, []string{use.ID}, last(evs).StopReason.EventIDs)
	require.Zero(t, srv.Calls("echo"), "nothing is called before the confirmation")

	f.send(mcpConfirmation(use.ID, true, ""))
	evs = f.untilIdle()
	require.Equal(t, append([]string{"user.tool_confirmation", "session.status_running", "session.thread_status_running",
		"agent.mcp_tool_result", "span.model_request_start", "agent.message", "span.model_request_end"}, closing...), types(evs))
	res := find(t, evs, "agent.mcp_tool_result")
	require.Equal(t, use.ID, fieldsOf(t, res)["mcp_tool_use_id"])
	text, isErr := mcpResultText(t, res)
	require.False(t, isErr)
	require.Equal(t, "hello from mcp", text)
	require.Equal(t, "mcp__tools__echo: hello from mcp", messageText(find(t, evs, "agent.message")))
	require.Equal(t, 1, srv.Calls("echo"))

	// Deny: the server is never called, the model sees the rejection.
	f.send(userMessage(`/tool mcp__tools__add {"a":1,"b":2}`))
	use = find(t, f.untilIdle(), "agent.mcp_tool_use")
	f.send(mcpConfirmation(use.ID, false, "not today"))
	evs = f.untilIdle()
	text, isErr = mcpResultText(t, find(t, evs, "agent.mcp_tool_result"))
	require.True(t, isErr)
	require.Equal(t, "Permission to use add has been rejected. Rejection message: not today", text)
	require.Zero(t, srv.Calls("add"))

	// A tool that fails is an error result, not a session error.
	f.send(userMessage(`/tool mcp__tools__fail {"message":"boom"}`))
	use = find(t, f.untilIdle(), "agent.mcp_tool_use")
	f.send(mcpConfirmation(use.ID, true, ""))
	evs = f.untilIdle()
	text, isErr = mcpResultText(t, find(t, evs, "agent.mcp_tool_result"))
	require.True(t, isErr)
	require.Contains(t, text, "boom")
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	// The history reads back through the SDK with the MCP events typed.
	page, err := e.client.Beta.Sessions.Events.List(context.Background(), f.sessionID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt[int64](100)})
	require.NoError(t, err)
	var uses, results int
	for _, ev := range page.Data {
		switch ev.Type {
		case "agent.mcp_tool_use":
			uses++
			require.Equal(t, "tools", ev.MCPServerName)
		case "agent.mcp_tool_result":
			results++
		case "session.error":
			t.Fatalf("unexpected session.error: %s", ev.RawJSON())
		}
	}
	require.Equal(t, 3, uses)
	require.Equal(t, 3, results)
}

func TestMCPToolConfigsEnableAndDisable(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t, mcptest.WithSSEOnly())
	e := newRunningEnv(t, allowLocalMCP)
	disabled := anthropic.BetaAgentNewParamsToolUnion{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{
		MCPServerName: "legacy",
		DefaultConfig: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParams{Enabled: param.NewOpt(false)},
		Configs: []anthropic.BetaManagedAgentsMCPToolConfigParams{{Name: "add", Enabled: param.NewOpt(true),
			PermissionPolicy: anthropic.BetaManagedAgentsMCPToolConfigParamsPermissionPolicyUnion{OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{}}}},
	}}
	f := newMCPFixture(t, e, map[string]string{"legacy": srv.URL}, disabled)

	// add is enabled and runs unasked over the older SSE transport; echo is disabled and is
	// refused without reaching the server.
	f.send(userMessage("/tool mcp__legacy__add {\"a\":2,\"b\":40}\n/tool mcp__legacy__echo {\"text\":\"no\"}"))
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	use := find(t, evs, "agent.mcp_tool_use")
	require.Equal(t, "allow", fieldsOf(t, use)["evaluated_permission"])
	text, isErr := mcpResultText(t, find(t, evs, "agent.mcp_tool_result"))
	require.False(t, isErr)
	require.Equal(t, "42", text)
	refused := fieldsOf(t, find(t, evs, "agent.tool_use"))
	require.Equal(t, "mcp__legacy__echo", refused["name"], "a tool that is not offered is an unknown name")
	require.Equal(t, "deny", refused["evaluated_permission"])
	require.Equal(t, 1, srv.Calls("add"))
	require.Zero(t, srv.Calls("echo"))
}

func TestMCPServerFailuresAreSessionErrors(t *testing.T) {
	t.Parallel()
	good := mcptest.Start(t)
	locked := mcptest.Start(t, mcptest.WithBearer(func(token string) bool { return token == "secret" }))
	e := newRunningEnv(t, allowLocalMCP)
	f := newMCPFixture(t, e, map[string]string{"good": good.URL, "down": mcptest.ClosedURL(t), "locked": locked.URL},
		mcpToolset("good", true), mcpToolset("down", true), mcpToolset("locked", true))

	// The turn goes on with the tools of the server that answered.
	f.send(userMessage(`/tool mcp__good__echo {"text":"still works"}`))
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	errs := map[string]map[string]any{}
	for _, ev := range evs {
		if ev.Type == "session.error" {
			e := fieldsOf(t, ev)["error"].(map[string]any)
			errs[e["mcp_server_name"].(string)] = e
		}
	}
	require.Len(t, errs, 2, "one session.error per failed server")
	require.Equal(t, "mcp_connection_failed_error", errs["down"]["type"])
	require.Equal(t, "mcp_authentication_failed_error", errs["locked"]["type"])
	for _, e := range errs {
		require.Equal(t, map[string]any{"type": "retrying"}, e["retry_status"])
	}
	text, isErr := mcpResultText(t, find(t, evs, "agent.mcp_tool_result"))
	require.False(t, isErr)
	require.Equal(t, "still works", text)

	// The next turn tries the failed servers again.
	f.send(userMessage("hello"))
	evs = f.untilIdle()
	var again int
	for _, ev := range evs {
		if ev.Type == "session.error" {
			again++
		}
	}
	require.Equal(t, 2, again)

	// The SDK decodes the error with its server name.
	page, err := e.client.Beta.Sessions.Events.List(context.Background(), f.sessionID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt[int64](100)})
	require.NoError(t, err)
	var names []string
	for _, ev := range page.Data {
		if ev.Type == "session.error" {
			names = append(names, ev.Error.MCPServerName)
		}
	}
	require.ElementsMatch(t, []string{"down", "locked", "down", "locked"}, names)
}

// TestMCPServersOnPrivateAddressesAreRefusedByDefault: an agent's author cannot point the
// worker at the cluster's own services unless the deployment allows private networks.
func TestMCPServersOnPrivateAddressesAreRefusedByDefault(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	e := newRunningEnv(t)
	f := newMCPFixture(t, e, map[string]string{"inside": srv.URL}, mcpToolset("inside", true))
	f.send(userMessage(`/tool mcp__inside__echo {"text":"x"}`))
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	e2 := fieldsOf(t, find(t, evs, "session.error"))["error"].(map[string]any)
	require.Equal(t, "mcp_connection_failed_error", e2["type"])
	require.Equal(t, "inside", e2["mcp_server_name"])
	require.Contains(t, e2["message"], "loopback")
	require.Zero(t, srv.Calls("echo"))
	require.Empty(t, srv.Tokens(), "nothing reached the server")
}

func TestMCPLimitedNetworkingNeedsAllowMCPServers(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	e := newRunningEnv(t, allowLocalMCP)
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "mcp", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "tools", URL: srv.URL}}, Tools: []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("tools", true)}})
	require.NoError(t, err)
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_mcp_servers=%v", allow), func(t *testing.T) {
			resp, body := e.raw("POST", "/v1/environments", fmt.Sprintf(`{"name":"limited-%s","config":{"type":"cloud","networking":{"type":"limited","allowed_hosts":[],"allow_mcp_servers":%v}}}`, ids.New(""), allow))
			require.Equal(t, 200, resp.StatusCode, body)
			var envr struct{ ID string }
			require.NoError(t, json.Unmarshal([]byte(body), &envr))
			sess, err := newSession(t, e.client, agent.ID, envr.ID)
			require.NoError(t, err)
			f := &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}
			before := srv.Calls("echo")
			f.send(userMessage(`/tool mcp__tools__echo {"text":"x"}`))
			evs := f.untilIdle()
			if allow {
				require.Equal(t, before+1, srv.Calls("echo"))
				find(t, evs, "agent.mcp_tool_result")
				return
			}
			require.Equal(t, before, srv.Calls("echo"), "a limited environment without allow_mcp_servers never reaches the server")
			e := fieldsOf(t, find(t, evs, "session.error"))["error"].(map[string]any)
			require.Equal(t, "mcp_connection_failed_error", e["type"])
			require.Contains(t, e["message"], "allow_mcp_servers")
		})
	}
}

// TestMCPCallNotRepeatedAfterWorkerKill kills the worker process (SIGKILL) while an MCP call
// runs and again right after a call's result was committed: a fresh worker finishes both
// turns, and the server sees each call exactly once.
func TestMCPCallNotRepeatedAfterWorkerKill(t *testing.T) {
	bin := managedAgentsBinary(t)
	tc := sharedTemporal(t)
	srv := mcptest.Start(t)
	queue := "mcp-crash-" + ids.New("")
	e := newAPIEnv(t, app.Config{TaskQueue: queue, ModelRetry: fastRetry}, tc)
	env := []string{
		"MANAGED_AGENT_DATABASE_URL=" + e.dbURL,
		"MANAGED_AGENT_TEMPORAL_ADDRESS=" + temporalSrv.FrontendHostPort(),
		"MANAGED_AGENT_TEMPORAL_TASK_QUEUE=" + queue,
		"MANAGED_AGENT_SANDBOX_DIR=" + t.TempDir(),
		"MANAGED_AGENT_LOG_LEVEL=warn",
		"MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS=1", // the test's MCP server is on 127.0.0.1
	}
	logPath := filepath.Join(t.TempDir(), "workers.log")
	w := startWorkerProcess(t, bin, env, logPath)
	defer func() { w.kill() }()
	f := newMCPFixture(t, e, map[string]string{"tools": srv.URL}, mcpToolset("tools", true))

	// Killed mid-call: the call's fate is unknown, so it is not sent again.
	f.send(userMessage(`/tool mcp__tools__slow {"ms":4000}`))
	select {
	case <-srv.Started("slow"):
	case <-time.After(60 * time.Second):
		t.Fatal("the slow tool was never called")
	}
	w.kill()
	w = startWorkerProcess(t, bin, env, logPath)
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	text, isErr := mcpResultText(t, find(t, evs, "agent.mcp_tool_result"))
	require.True(t, isErr)
	require.Contains(t, text, "outcome of this MCP tool call is unknown")
	time.Sleep(4 * time.Second) // the first call may still be running at the server; it must stay the only one
	require.Equal(t, 1, srv.Calls("slow"))

	// Killed right after the result committed: the retried step finds it and calls nothing.
	f.send(userMessage(`/tool mcp__tools__echo {"text":"once"}`))
	f.until("agent.mcp_tool_result")
	w.kill()
	w = startWorkerProcess(t, bin, env, logPath)
	evs = f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	require.Equal(t, 1, srv.Calls("echo"))

	var results int
	for _, ev := range e.history(t, f.sessionID) {
		if ev.Type == wire.EventAgentMCPToolResult {
			results++
		}
	}
	require.Equal(t, 2, results, "one result per call")
	requireConsistentLog(t, e.history(t, f.sessionID))
}

// listedTools reads the session's stored MCP listing: the turn it belongs to and the tool
// names per server.
func listedTools(t *testing.T, e *env, sessionID string) (int64, map[string][]string) {
	t.Helper()
	l, err := e.api.Store.GetMCPListing(context.Background(), sessionID)
	require.NoError(t, err)
	var servers []struct {
		Server string
		Tools  []struct{ Name string }
	}
	require.NoError(t, json.Unmarshal(l.Servers, &servers))
	out := map[string][]string{}
	for _, s := range servers {
		for _, tl := range s.Tools {
			out[s.Server] = append(out[s.Server], tl.Name)
		}
	}
	return l.TurnStartSeq, out
}

// TestMCPListingIsFixedForATurn: a server that changes its tools while a turn is parked does
// not change what that turn offers; the next turn lists again and offers the new tools.
func TestMCPListingIsFixedForATurn(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	e := newRunningEnv(t, allowLocalMCP)
	f := newMCPFixture(t, e, map[string]string{"s": srv.URL}, mcpToolset("s", false))

	f.send(userMessage(`/tool mcp__s__echo {"text":"parked"}`))
	evs := f.untilIdle()
	use := find(t, evs, "agent.mcp_tool_use")
	turn1, tools := listedTools(t, e, f.sessionID)
	require.Contains(t, tools["s"], "echo")

	srv.RemoveTools("echo")
	srv.AddTool(&sdk.Tool{Name: "late", Description: "Added while a turn was parked.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "late answer"}}}, nil
		})

	// The resumed turn works from its own listing: the call goes out as offered (the server,
	// which no longer has echo, answers with an error the model reads) and nothing is listed
	// again.
	f.send(mcpConfirmation(use.ID, true, ""))
	evs = f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	_, isErr := mcpResultText(t, find(t, evs, "agent.mcp_tool_result"))
	require.True(t, isErr)
	again, tools := listedTools(t, e, f.sessionID)
	require.Equal(t, turn1, again)
	require.Contains(t, tools["s"], "echo")
	require.NotContains(t, tools["s"], "late")

	// The next turn lists again.
	f.send(userMessage(`/tool mcp__s__late {}`))
	evs = f.untilIdle()
	use = find(t, evs, "agent.mcp_tool_use")
	require.Equal(t, "late", fieldsOf(t, use)["name"])
	turn2, tools := listedTools(t, e, f.sessionID)
	require.Greater(t, turn2, turn1)
	require.Contains(t, tools["s"], "late")
	require.NotContains(t, tools["s"], "echo")
}

// BenchmarkMCPToolTurn: a turn that calls one MCP tool (listing at the turn's first model
// request, claim, connect, call, record), through the official SDK and the whole stack,
// beside the same turn with one bash call:
//
//	go test -tags integration -run '^$' -bench MCPToolTurn -benchtime=40x ./internal/e2e/
func BenchmarkMCPToolTurn(b *testing.B) {
	srv := mcptest.Start(b)
	e := newRunningEnv(b, allowLocalMCP)
	ctx := context.Background()
	for _, tc := range []struct {
		name, text string
		tools      []anthropic.BetaAgentNewParamsToolUnion
	}{
		{"mcp", `/tool mcp__s__echo {"text":"x"}`, []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("s", true)}},
		{"bash", `/tool bash {"command":"true"}`, []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			params := anthropic.BetaAgentNewParams{Name: "bench", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: tc.tools}
			if tc.name == "mcp" {
				params.MCPServers = []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "s", URL: srv.URL}}
			}
			agent, err := e.client.Beta.Agents.New(ctx, params)
			require.NoError(b, err)
			envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bench-" + ids.New("")})
			require.NoError(b, err)
			var sessionID string
			n := 0
			for b.Loop() {
				if n%turnsPerSession == 0 { // a bounded log per session, as the other turn benchmarks
					b.StopTimer()
					sess, err := newSessionWith(ctx, e.client, agent.ID, envr.ID)
					require.NoError(b, err)
					sessionID = sess.ID
					b.StartTimer()
				}
				n++
				require.NoError(b, sendAndAwaitIdle(e, sessionID, tc.text))
			}
		})
	}
}
