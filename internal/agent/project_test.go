package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestProject(t *testing.T) {
	t.Parallel()
	const bashIn = `{"command":"ls"}`
	const weatherIn = `{"city":"Paris"}`
	tests := []struct {
		name    string
		history []wire.Event
		want    []model.Message
	}{
		{
			name: "empty log",
		},
		{
			name:    "user message",
			history: hist(userMsg("u1", "hello")),
			want:    []model.Message{user(text("hello"))},
		},
		{
			name: "plain turn; thinking and spans add nothing",
			history: hist(
				ev("r1", wire.EventSessionStatusRunning, `{}`),
				userMsg("u1", "hello"),
				response("1", thinking("th1"), agentMsg("m1", "echo: hello")),
				ev("us1", wire.EventSessionUsage, `{"usage":{}}`),
				idle("i1", "end_turn"),
			),
			want: []model.Message{user(text("hello")), assistant(text("echo: hello"))},
		},
		{
			name: "built-in tool turn; the tool_use id is the event id",
			history: hist(
				userMsg("u1", "list"),
				response("1", agentMsg("m1", "looking"), toolUse("tu1", "bash", bashIn, "allow")),
				toolResult("tr1", "tu1", "a.txt", false),
				response("2", agentMsg("m2", "done")),
			),
			want: []model.Message{
				user(text("list")),
				assistant(text("looking"), use("tu1", "bash", bashIn)),
				user(result("tu1", "a.txt", false)),
				assistant(text("done")),
			},
		},
		{
			name: "custom tool result, error flag kept",
			history: hist(
				userMsg("u1", "weather?"),
				response("1", customUse("cu1", "get_weather", weatherIn)),
				customResult("cr1", "cu1", "no such city", true),
			),
			want: []model.Message{
				user(text("weather?")),
				assistant(use("cu1", "get_weather", weatherIn)),
				user(result("cu1", "no such city", true)),
			},
		},
		{
			name: "a custom tool result re-sent after the turn ended is not projected: one tool_result per tool_use",
			history: hist(
				userMsg("u1", "weather?"),
				response("1", customUse("cu1", "get_weather", weatherIn)),
				customResult("cr1", "cu1", "sunny", false),
				response("2", agentMsg("m1", "get_weather: sunny")),
				idle("i1", "end_turn"),
				customResult("cr2", "cu1", "stormy", false),
				ev("r2", wire.EventSessionStatusRunning, `{}`),
				idle("i2", "end_turn"),
				userMsg("u2", "next"),
			),
			want: []model.Message{
				user(text("weather?")),
				assistant(use("cu1", "get_weather", weatherIn)),
				user(result("cu1", "sunny", false)),
				assistant(text("get_weather: sunny")),
				user(text("next")),
			},
		},
		{
			name: "confirmed call with its result",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "ask")),
				confirm("c1", "tu1", "allow"),
				toolResult("tr1", "tu1", "ok", false),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", "ok", false)),
			},
		},
		{
			name: "denied by confirmation, deny result committed",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "ask")),
				confirm("c1", "tu1", "deny", "not today"),
				toolResult("tr1", "tu1", "Permission to use bash has been rejected. Rejection message: not today", true),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", "Permission to use bash has been rejected. Rejection message: not today", true)),
			},
		},
		{
			name: "denied by confirmation, result not yet committed: the deny text is synthesised",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "ask")),
				confirm("c1", "tu1", "deny", "no"),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", "Permission to use bash has been rejected. Rejection message: no", true)),
			},
		},
		{
			name: "evaluated deny without its result yet",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "deny")),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", `The tool "bash" is not enabled for this agent, so the call was not executed.`, true)),
			},
		},
		{
			name: "interrupted while parked: the call is closed with an error result before the next message",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "ask"), customUse("cu1", "get_weather", weatherIn)),
				interrupt("x1"),
				idle("i1", "end_turn"),
				userMsg("u2", "never mind"),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn), use("cu1", "get_weather", weatherIn)),
				user(
					result("tu1", "The turn was interrupted before this tool call returned a result.", true),
					result("cu1", "The turn was interrupted before this tool call returned a result.", true),
					text("never mind"),
				),
			},
		},
		{
			name: "results follow call order, not log order",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "allow"), customUse("cu1", "get_weather", weatherIn)),
				customResult("cr1", "cu1", "sunny", false),
				toolResult("tr1", "tu1", "a.txt", false),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn), use("cu1", "get_weather", weatherIn)),
				user(result("tu1", "a.txt", false), result("cu1", "sunny", false)),
			},
		},
		{
			name: "a message joining the turn comes after the results it was sent between",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "allow")),
				userMsg("u2", "also this"),
				toolResult("tr1", "tu1", "a.txt", false),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", "a.txt", false), text("also this")),
			},
		},
		{
			name: "queued events are not delivered yet",
			history: hist(
				userMsg("u1", "first"),
				response("1", agentMsg("m1", "echo: first")),
				queued(userMsg("u2", "second")),
				queued(interrupt("x1")),
			),
			want: []model.Message{user(text("first")), assistant(text("echo: first"))},
		},
		{
			name: "text before and after a tool call keeps its place",
			history: hist(
				userMsg("u1", "go"),
				response("1", agentMsg("m1", "a", "b"), toolUse("tu1", "bash", bashIn, "allow"), agentMsg("m2", "c")),
				toolResult("tr1", "tu1", "ok", false),
			),
			want: []model.Message{
				user(text("go")),
				assistant(text("a"), text("b"), use("tu1", "bash", bashIn), text("c")),
				user(result("tu1", "ok", false)),
			},
		},
		{
			name: "empty text blocks are dropped",
			history: hist(
				userMsg("u1", "go"),
				response("1", agentMsg("m1", "", "x")),
			),
			want: []model.Message{user(text("go")), assistant(text("x"))},
		},
		{
			name: "consecutive user messages merge into one",
			history: hist(
				userMsg("u1", "one"),
				userMsg("u2", "two"),
			),
			want: []model.Message{user(text("one"), text("two"))},
		},
		{
			name: "a failed request adds nothing",
			history: hist(
				userMsg("u1", "go"),
				spanStart("s1"), spanEnd("e1", "s1", true),
				response("2", agentMsg("m1", "ok")),
			),
			want: []model.Message{user(text("go")), assistant(text("ok"))},
		},
		{
			name: "responses with nothing between them merge",
			history: hist(
				userMsg("u1", "go"),
				response("1", agentMsg("m1", "a")),
				response("2", agentMsg("m2", "b")),
			),
			want: []model.Message{user(text("go")), assistant(text("a"), text("b"))},
		},
		{
			name: "MCP calls and results",
			history: hist(
				userMsg("u1", "go"),
				response("1", ev("mu1", wire.EventAgentMCPToolUse, `{"mcp_server_name":"gh","name":"get_issue","input":{"n":1},"evaluated_permission":"allow","evaluation":{"type":"always_allow"}}`)),
				ev("mr1", wire.EventAgentMCPToolResult, `{"mcp_tool_use_id":"mu1","content":[{"type":"text","text":"issue 1"}],"is_error":false}`),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("mu1", "mcp__gh__get_issue", `{"n":1}`)),
				user(result("mu1", "issue 1", false)),
			},
		},
		{
			name: "self-hosted user.tool_result answers an agent.tool_use",
			history: hist(
				userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", bashIn, "allow")),
				ev("ur1", wire.EventUserToolResult, `{"tool_use_id":"tu1","content":[{"type":"text","text":"remote"}],"is_error":false}`),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", "remote", false)),
			},
		},
		{
			name: "a result without content",
			history: hist(
				userMsg("u1", "go"),
				response("1", customUse("cu1", "get_weather", weatherIn)),
				ev("cr1", wire.EventUserCustomToolResult, `{"custom_tool_use_id":"cu1","session_thread_id":null}`),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("cu1", "get_weather", weatherIn)),
				user(model.Block{Type: model.BlockToolResult, ToolUseID: "cu1", Content: []model.Block{}}),
			},
		},
		{
			name: "a tool_use without input gets an empty object",
			history: hist(
				userMsg("u1", "go"),
				response("1", ev("tu1", wire.EventAgentToolUse, `{"name":"bash","evaluated_permission":"allow"}`)),
				toolResult("tr1", "tu1", "ok", false),
			),
			want: []model.Message{
				user(text("go")),
				assistant(use("tu1", "bash", `{}`)),
				user(result("tu1", "ok", false)),
			},
		},
		{
			name: "a result logged after the turn went on still answers its call",
			history: hist(
				userMsg("u1", "list"),
				response("1", toolUse("tu1", "bash", bashIn, "allow")),
				interrupt("i1"),
				userMsg("u2", "again"),
				response("2", agentMsg("m2", "ok")),
				toolResult("tr1", "tu1", "a.txt", false),
			),
			want: []model.Message{
				user(text("list")),
				assistant(use("tu1", "bash", bashIn)),
				user(result("tu1", "a.txt", false), text("again")),
				assistant(text("ok")),
			},
		},
		{
			name: "images and documents reach the model as themselves, sources unchanged; redacted blocks add nothing",
			history: hist(ev("u1", wire.EventUserMessage, `{"content":[
				{"type":"text","text":"see"},
				{"type":"image","source":{"type":"url","url":"https://x/y.png"}},
				{"type":"redacted"},
				{"type":"document","title":"notes","context":"from the user","source":{"type":"text","media_type":"text/plain","data":"line one"}},
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}`)),
			want: []model.Message{user(
				text("see"),
				model.Block{Type: model.BlockImage, Source: json.RawMessage(`{"type":"url","url":"https://x/y.png"}`)},
				model.Block{Type: model.BlockDocument, Title: "notes", Context: "from the user",
					Source: json.RawMessage(`{"type":"text","media_type":"text/plain","data":"line one"}`)},
				model.Block{Type: model.BlockDocument, Source: json.RawMessage(`{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}`)},
			)},
		},
		{
			name: "a system.message follows the user turn it came with as a system message",
			history: hist(
				userMsg("u1", "hello"),
				ev("y1", wire.EventSystemMessage, `{"content":[{"type":"text","text":"Answer in French."}]}`),
				response("1", agentMsg("m1", "bonjour")),
				userMsg("u2", "again")),
			want: []model.Message{
				user(text("hello")),
				{Role: "system", Content: []model.Block{text("Answer in French.")}},
				assistant(text("bonjour")),
				user(text("again")),
			},
		},
		{
			name: "a tool result's image reaches the model inside the tool_result",
			history: hist(
				ev("u1", wire.EventUserMessage, `{"content":[{"type":"text","text":"look"}]}`),
				ev("s1", wire.EventSpanModelRequestStart, `{}`),
				ev("t1", wire.EventAgentToolUse, `{"name":"read","input":{"file_path":"a.png"},"evaluated_permission":"allow"}`),
				ev("e1", wire.EventSpanModelRequestEnd, `{"model_request_start_id":"s1","is_error":false,"model_usage":{}}`),
				ev("r1", wire.EventAgentToolResult, `{"tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}}]}`)),
			want: []model.Message{
				user(text("look")),
				{Role: "assistant", Content: []model.Block{{Type: model.BlockToolUse, ID: "t1", Name: "read", Input: json.RawMessage(`{"file_path":"a.png"}`)}}},
				user(model.Block{Type: model.BlockToolResult, ToolUseID: "t1", Content: []model.Block{
					{Type: model.BlockImage, Source: json.RawMessage(`{"type":"base64","media_type":"image/png","data":"iVBORw=="}`)}}}),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := agent.Project(tt.history)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			// Projected in parts, as the conversation cache does, at every split and one
			// event at a time, it is the same.
			log, err := agent.DecodeLog(tt.history)
			require.NoError(t, err)
			for k := range len(log) + 1 {
				require.Equal(t, tt.want, projectInParts(t, log, k).Messages(), "split at %d", k)
			}
			require.Equal(t, tt.want, projectInParts(t, log, oneByOne(len(log))...).Messages(), "one event at a time")
		})
	}
}

// projectInParts projects log in the parts that end at the given indexes (and the rest), as
// the conversation cache does: a part Extend refuses is projected with everything before it.
func projectInParts(t *testing.T, log []agent.Decoded, ends ...int) *agent.Projection {
	t.Helper()
	var p *agent.Projection
	from := 0
	for _, end := range append(ends, len(log)) {
		next, ok := p.Extend(log[from:end])
		if !ok {
			next, ok = (*agent.Projection)(nil).Extend(log[:end])
			require.True(t, ok, "a projection from the start never refuses")
		}
		p, from = next, end
	}
	return p
}

func oneByOne(n int) []int {
	ends := make([]int, n)
	for i := range ends {
		ends[i] = i + 1
	}
	return ends
}

// A projection never changes: two continuations of one projection each get their own
// conversation, and the first is what it was.
func TestProjectionIsNeverChanged(t *testing.T) {
	t.Parallel()
	const bashIn = `{"command":"ls"}`
	base, err := agent.DecodeLog(hist(
		userMsg("u1", "list"),
		response("1", agentMsg("m1", "looking"), toolUse("tu1", "bash", bashIn, "allow")),
	))
	require.NoError(t, err)
	p, ok := (*agent.Projection)(nil).Extend(base)
	require.True(t, ok)
	before := p.Messages()

	a, err := agent.DecodeLog(hist(toolResult("tr1", "tu1", "a.txt", false), response("2", agentMsg("m2", "done"))))
	require.NoError(t, err)
	b, err := agent.DecodeLog(hist(interrupt("i1"), userMsg("u2", "stop"), response("3", agentMsg("m3", "stopped"))))
	require.NoError(t, err)
	pa, ok := p.Extend(a)
	require.True(t, ok)
	pb, ok := p.Extend(b)
	require.True(t, ok)

	require.Equal(t, []model.Message{
		user(text("list")),
		assistant(text("looking"), use("tu1", "bash", bashIn)),
		user(result("tu1", "a.txt", false)),
		assistant(text("done")),
	}, pa.Messages())
	require.Equal(t, []model.Message{
		user(text("list")),
		assistant(text("looking"), use("tu1", "bash", bashIn)),
		user(result("tu1", "The turn was interrupted before this tool call returned a result.", true), text("stop")),
		assistant(text("stopped")),
	}, pb.Messages())
	require.Equal(t, before, p.Messages())

	// The call is placed with a synthetic result in pb: its first real result, later, changes
	// what is already projected, so pb cannot be extended with it.
	late, err := agent.DecodeLog(hist(toolResult("tr9", "tu1", "late", false)))
	require.NoError(t, err)
	_, ok = pb.Extend(late)
	require.False(t, ok)
	// pa placed it with its real result: a second result is a stray and changes nothing.
	pa2, ok := pa.Extend(late)
	require.True(t, ok)
	require.Equal(t, pa.Messages(), pa2.Messages())
}

func TestProjectRejectsCorruptBodies(t *testing.T) {
	t.Parallel()
	for _, e := range []wire.Event{
		ev("u1", wire.EventUserMessage, `{"content":"nope"}`),
		ev("tu1", wire.EventAgentToolUse, `{"name":1}`),
		ev("tr1", wire.EventAgentToolResult, `[]`),
	} {
		_, err := agent.Project([]wire.Event{e})
		require.ErrorContains(t, err, e.ID, e.Type)
	}
}
