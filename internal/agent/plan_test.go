package agent_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// stepOf is the comparable part of a Step: kind, call ids, reject texts, waiting ids.
type stepOf struct {
	Kind       agent.StepKind
	Calls      []string
	Texts      []string
	EventIDs   []string
	StopReason string
	StartID    string
}

func summarize(s agent.Step) stepOf {
	out := stepOf{Kind: s.Kind, EventIDs: s.EventIDs, StopReason: s.StopReason, StartID: s.RequestStartID}
	for _, c := range s.Calls {
		out.Calls = append(out.Calls, c.Event.ID)
		if c.RejectText != "" {
			out.Texts = append(out.Texts, c.RejectText)
		}
	}
	return out
}

// rounds returns n complete model responses that each call bash and get its result.
func rounds(n int) []wire.Event {
	var out []wire.Event
	for i := range n {
		id := fmt.Sprint(i)
		out = append(out, response(id, toolUse("tu"+id, "bash", `{}`, "allow"))...)
		out = append(out, toolResult("tr"+id, "tu"+id, "ok", false))
	}
	return out
}

func TestNext(t *testing.T) {
	t.Parallel()
	const in = `{"command":"true"}`
	model := stepOf{Kind: agent.StepModel}
	endTurn := stepOf{Kind: agent.StepEnd, StopReason: agent.StopEndTurn}
	exhausted := stepOf{Kind: agent.StepEnd, StopReason: agent.StopRetriesExhausted}
	tests := []struct {
		name    string
		history []wire.Event
		want    stepOf
	}{
		{name: "empty log: nothing to do", want: endTurn},
		{name: "a user message starts a turn", history: hist(userMsg("u1", "hi")), want: model},
		{name: "a queued user message is not delivered yet", history: hist(queued(userMsg("u1", "hi"))), want: endTurn},
		{
			name:    "a response without tool calls ends the turn",
			history: hist(userMsg("u1", "hi"), response("1", agentMsg("m1", "echo: hi"))),
			want:    endTurn,
		},
		{
			name:    "an empty response ends the turn",
			history: hist(userMsg("u1", "hi"), response("1")),
			want:    endTurn,
		},
		{
			name: "a custom tool result re-sent after the turn ended opens no turn: no model call",
			history: hist(userMsg("u1", "hi"), response("1", customUse("cu1", "get_weather", `{}`)), customResult("cr1", "cu1", "sunny", false),
				response("2", agentMsg("m1", "get_weather: sunny")), idle("i1", "end_turn"), customResult("cr2", "cu1", "sunny", false)),
			want: endTurn,
		},
		{
			name:    "the next message starts the next turn",
			history: hist(userMsg("u1", "hi"), response("1", agentMsg("m1", "echo: hi")), idle("i1", "end_turn"), userMsg("u2", "again")),
			want:    model,
		},
		{
			name:    "an allowed call runs",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "allow"))),
			want:    stepOf{Kind: agent.StepExecute, Calls: []string{"tu1"}},
		},
		{
			name:    "a call with its result goes back to the model",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "allow")), toolResult("tr1", "tu1", "ok", false)),
			want:    model,
		},
		{
			name:    "an ask call parks",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask"))),
			want:    stepOf{Kind: agent.StepPark, EventIDs: []string{"tu1"}},
		},
		{
			name:    "a queued confirmation is not delivered yet",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), queued(confirm("c1", "tu1", "allow"))),
			want:    stepOf{Kind: agent.StepPark, EventIDs: []string{"tu1"}},
		},
		{
			name:    "an ask call confirmed allow runs",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), confirm("c1", "tu1", "allow")),
			want:    stepOf{Kind: agent.StepExecute, Calls: []string{"tu1"}},
		},
		{
			name:    "an ask call confirmed deny is rejected with the deny message",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), confirm("c1", "tu1", "deny", "too risky")),
			want: stepOf{Kind: agent.StepReject, Calls: []string{"tu1"},
				Texts: []string{"Permission to use bash has been rejected. Rejection message: too risky"}},
		},
		{
			name:    "a deny without a message",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "read", in, "ask")), confirm("c1", "tu1", "deny")),
			want:    stepOf{Kind: agent.StepReject, Calls: []string{"tu1"}, Texts: []string{"Permission to use read has been rejected."}},
		},
		{
			name: "a denied call with its result goes back to the model",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), confirm("c1", "tu1", "deny", "no"),
				toolResult("tr1", "tu1", "Permission to use bash has been rejected. Rejection message: no", true)),
			want: model,
		},
		{
			name:    "an evaluated deny is rejected",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "deny"))),
			want: stepOf{Kind: agent.StepReject, Calls: []string{"tu1"},
				Texts: []string{`The tool "bash" is not enabled for this agent, so the call was not executed.`}},
		},
		{
			name:    "an allowed MCP call runs",
			history: hist(userMsg("u1", "go"), response("1", ev("mu1", wire.EventAgentMCPToolUse, `{"mcp_server_name":"gh","name":"get_issue","input":{},"evaluated_permission":"allow"}`))),
			want:    stepOf{Kind: agent.StepExecute, Calls: []string{"mu1"}},
		},
		{
			name:    "an MCP call that asks parks until confirmed",
			history: hist(userMsg("u1", "go"), response("1", ev("mu1", wire.EventAgentMCPToolUse, `{"mcp_server_name":"gh","name":"get_issue","input":{},"evaluated_permission":"ask","evaluation":{"type":"always_ask"}}`))),
			want:    stepOf{Kind: agent.StepPark, EventIDs: []string{"mu1"}},
		},
		{
			name: "an MCP call denied by confirmation is rejected with the deny message",
			history: hist(userMsg("u1", "go"), response("1", ev("mu1", wire.EventAgentMCPToolUse, `{"mcp_server_name":"gh","name":"get_issue","input":{},"evaluated_permission":"ask","evaluation":{"type":"always_ask"}}`)),
				confirm("c1", "mu1", "deny", "not that one")),
			want: stepOf{Kind: agent.StepReject, Calls: []string{"mu1"},
				Texts: []string{"Permission to use get_issue has been rejected. Rejection message: not that one"}},
		},
		{
			name:    "a custom call parks",
			history: hist(userMsg("u1", "go"), response("1", customUse("cu1", "get_weather", `{}`))),
			want:    stepOf{Kind: agent.StepPark, EventIDs: []string{"cu1"}},
		},
		{
			name:    "a custom call with its result goes back to the model",
			history: hist(userMsg("u1", "go"), response("1", customUse("cu1", "get_weather", `{}`)), customResult("cr1", "cu1", "sunny", false)),
			want:    model,
		},
		{
			name: "partial answers run what they can",
			history: hist(userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", in, "ask"), toolUse("tu2", "read", in, "ask"), customUse("cu1", "get_weather", `{}`)),
				confirm("c1", "tu1", "allow")),
			want: stepOf{Kind: agent.StepExecute, Calls: []string{"tu1"}},
		},
		{
			name: "partial answers keep the rest parked",
			history: hist(userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", in, "ask"), toolUse("tu2", "read", in, "ask"), customUse("cu1", "get_weather", `{}`)),
				confirm("c1", "tu1", "allow"), toolResult("tr1", "tu1", "ok", false)),
			want: stepOf{Kind: agent.StepPark, EventIDs: []string{"tu2", "cu1"}},
		},
		{
			name: "rejections come before executions",
			history: hist(userMsg("u1", "go"),
				response("1", toolUse("tu1", "bash", in, "allow"), toolUse("tu2", "nope", in, "deny"))),
			want: stepOf{Kind: agent.StepReject, Calls: []string{"tu2"},
				Texts: []string{`The tool "nope" is not enabled for this agent, so the call was not executed.`}},
		},
		{
			name:    "an interrupt while parked ends the turn",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), interrupt("x1")),
			want:    endTurn,
		},
		{
			name:    "an interrupt not applied yet changes nothing",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), queued(interrupt("x1"))),
			want:    stepOf{Kind: agent.StepPark, EventIDs: []string{"tu1"}},
		},
		{
			name:    "an interrupt during a model call ends the turn",
			history: hist(userMsg("u1", "go"), spanStart("s1"), interrupt("x1"), spanEnd("e1", "s1", true)),
			want:    endTurn,
		},
		{
			name:    "a confirmation after the interrupt does not reopen the turn",
			history: hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "ask")), interrupt("x1"), confirm("c1", "tu1", "allow")),
			want:    endTurn,
		},
		{
			name:    "a model call that died without an end is reused",
			history: hist(userMsg("u1", "go"), spanStart("s1")),
			want:    stepOf{Kind: agent.StepModel, StartID: "s1"},
		},
		{
			name:    "a failed model call is retried with a new request",
			history: hist(userMsg("u1", "go"), spanStart("s1"), spanEnd("e1", "s1", true)),
			want:    model,
		},
		{
			name:    "a parked turn stays open across the caller's idle event",
			history: hist(userMsg("u1", "go"), response("1", customUse("cu1", "get_weather", `{}`)), idle("i1", "requires_action"), customResult("cr1", "cu1", "x", false)),
			want:    model,
		},
		{
			name:    "19 rounds: one more model call",
			history: hist(userMsg("u1", "/loop"), rounds(agent.MaxRounds-1)),
			want:    model,
		},
		{
			name:    "20 rounds: the cap",
			history: hist(userMsg("u1", "/loop"), rounds(agent.MaxRounds)),
			want:    stepOf{Kind: agent.StepCap},
		},
		{
			name:    "failed requests are not rounds",
			history: hist(userMsg("u1", "/loop"), rounds(agent.MaxRounds-1), spanStart("s"), spanEnd("e", "s", true)),
			want:    model,
		},
		{
			name:    "a message joining the turn does not reset the count",
			history: hist(userMsg("u1", "/loop"), rounds(10), userMsg("u2", "more"), rounds(agent.MaxRounds-10)),
			want:    stepOf{Kind: agent.StepCap},
		},
		{
			name:    "the cap error ends the turn",
			history: hist(userMsg("u1", "/loop"), rounds(agent.MaxRounds), sessionError("se1", "tool_use_limit_reached_error", "exhausted")),
			want:    exhausted,
		},
		{
			name:    "the next turn counts from zero",
			history: hist(userMsg("u1", "/loop"), rounds(agent.MaxRounds), sessionError("se1", "tool_use_limit_reached_error", "exhausted"), userMsg("u2", "hi")),
			want:    model,
		},
		{
			name:    "model retries exhausted by the caller end the turn",
			history: hist(userMsg("u1", "go"), spanStart("s1"), spanEnd("e1", "s1", true), sessionError("se1", "model_overloaded_error", "exhausted")),
			want:    exhausted,
		},
		{
			name:    "a retrying error keeps the turn open",
			history: hist(userMsg("u1", "go"), spanStart("s1"), spanEnd("e1", "s1", true), sessionError("se1", "model_overloaded_error", "retrying")),
			want:    model,
		},
		{
			name:    "the caller's status events do not decide the turn",
			history: hist(userMsg("u1", "go"), idle("i1", "end_turn"), ev("r1", wire.EventSessionStatusRunning, `{}`)),
			want:    model,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := agent.Next(tt.history)
			require.NoError(t, err)
			require.Equal(t, tt.want, summarize(got))
		})
	}
}

func TestNextCallCarriesNameAndInput(t *testing.T) {
	t.Parallel()
	step, err := agent.Next(hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", `{"command":"ls"}`, "allow"))))
	require.NoError(t, err)
	require.Len(t, step.Calls, 1)
	require.Equal(t, "bash", step.Calls[0].Name)
	require.JSONEq(t, `{"command":"ls"}`, string(step.Calls[0].Input))
	require.Equal(t, wire.EventAgentToolUse, step.Calls[0].Event.Type)
}

func TestTurnUsage(t *testing.T) {
	t.Parallel()
	// Each span end of the helpers carries 10 input and 2 output tokens.
	h := hist(
		userMsg("u1", "first"), response("1", agentMsg("m1", "x")),
		userMsg("u2", "go"), spanStart("s"), spanEnd("e", "s", true),
		response("2", customUse("cu1", "get_weather", `{}`)), customResult("cr1", "cu1", "x", false),
		response("3", agentMsg("m3", "done")),
	)
	turn, err := agent.TurnUsage(h)
	require.NoError(t, err)
	require.Equal(t, model.Usage{InputTokens: 30, OutputTokens: 6}, turn)
	all, err := agent.LogUsage(h)
	require.NoError(t, err)
	require.Equal(t, model.Usage{InputTokens: 40, OutputTokens: 8}, all)
}

// withSeqs numbers a hand-written log as the store would (1, 2, …).
func withSeqs(h []wire.Event) []wire.Event {
	for i := range h {
		h[i].Seq = int64(i + 1)
	}
	return h
}

func TestTurnPart(t *testing.T) {
	t.Parallel()
	running := func(id string) wire.Event { return ev(id, wire.EventSessionStatusRunning, `{}`) }
	h := withSeqs(hist(running("r1"), userMsg("u1", "hi"), queued(userMsg("u2", "later")), response("1", agentMsg("m1", "a")),
		idle("i1", "end_turn"), running("r2"), userMsg("u3", "go")))
	ids := func(evs []wire.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	tests := []struct {
		name  string
		start int64
		want  []string
	}{
		{name: "no window: the whole log", start: 0, want: ids(h)},
		{name: "from the first event: the whole log", start: 1, want: ids(h)},
		{name: "from the queued message on", start: 3, want: ids(h[2:])},
		{name: "within the first turn: the queued message before it comes first", start: 5, want: append([]string{"u2"}, ids(h[4:])...)},
		{name: "the second turn and the message still queued in the first", start: 8, want: []string{"u2", "r2", "u3"}},
		{name: "past the end: only what is queued", start: 100, want: []string{"u2"}},
	}
	decoded, err := agent.DecodeLog(h)
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ids(agent.TurnPart(h, tt.start)))
			// What LoadConversation passes: the events read after the kept (delivered) ones,
			// here from the queued message on.
			require.Equal(t, tt.want, ids(agent.DecodedTurnPart(decoded, tt.start, decoded[2:])))
			require.Equal(t, tt.want, ids(agent.DecodedTurnPart(decoded, tt.start, decoded)))
		})
	}
	// The log before the turn is not read: a queued event that unsettled does not hold is
	// not found there (LoadConversation's kept events never hold one).
	require.Equal(t, []string{"r2", "u3"}, ids(agent.DecodedTurnPart(decoded, 8, decoded[3:])))
}

// TestNextFromTheTurnPart: for every prefix of a log of several turns, the step planned from
// the turn's part (from the session.status_running that opened it on; a resume after a park
// opens no turn) is the step planned from the whole log.
func TestNextFromTheTurnPart(t *testing.T) {
	t.Parallel()
	const in = `{"command":"true"}`
	running := func(id string) wire.Event { return ev(id, wire.EventSessionStatusRunning, `{}`) }
	h := withSeqs(hist(
		running("r1"), userMsg("u1", "go"), response("1", toolUse("tu1", "bash", in, "allow")), toolResult("tr1", "tu1", "ok", false),
		response("2", agentMsg("m1", "done")), idle("i1", "end_turn"),
		running("r2"), userMsg("u2", "again"), queued(userMsg("u3", "queued")), response("3", toolUse("tu2", "bash", in, "ask")),
		idle("i2", "requires_action"), confirm("c1", "tu2", "deny", "no"), running("resume"),
		toolResult("tr2", "tu2", "Permission to use bash has been rejected. Rejection message: no", true),
		spanStart("start4"), spanEnd("end4", "start4", true), sessionError("e1", "model_overloaded_error", "retrying"),
		response("5", customUse("cu1", "get_weather", `{}`)), idle("i3", "requires_action"),
	))
	for k := range len(h) + 1 {
		var start int64
		for _, e := range h[:k] {
			if e.Type == wire.EventSessionStatusRunning && e.ID != "resume" {
				start = e.Seq
			}
		}
		whole, err := agent.Next(h[:k])
		require.NoError(t, err)
		part, err := agent.Next(agent.TurnPart(h[:k], start))
		require.NoError(t, err)
		require.Equal(t, summarize(whole), summarize(part), "the first %d events", k)
		decoded, err := agent.DecodeLog(h[:k])
		require.NoError(t, err)
		// Appended to an empty slice: an empty part may be nil from one and not the other.
		require.Equal(t, append([]wire.Event{}, agent.TurnPart(h[:k], start)...),
			append([]wire.Event{}, agent.DecodedTurnPart(decoded, start, decoded)...), "the first %d events, decoded", k)
	}
}
