package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var errCrash = errors.New("worker killed")

// crashingLog simulates a worker dying around its nth Emit call: before the append commits
// (nothing reaches the log) or after it (the append is in the log but the step never learns).
type crashingLog struct {
	*agent.MemoryLog
	failAt      int
	afterCommit bool
	calls       int
}

func (c *crashingLog) Emit(ctx context.Context, evs []agent.NewEvent) ([]wire.Event, error) {
	c.calls++
	if c.calls != c.failAt {
		return c.MemoryLog.Emit(ctx, evs)
	}
	if c.afterCommit {
		if _, err := c.MemoryLog.Emit(ctx, evs); err != nil {
			return nil, err
		}
	}
	return nil, errCrash
}

// input builds a step input from the log as committed now, as a retried activity would.
func input(ag wire.SessionAgent, l *agent.MemoryLog, em agent.Emitter, sb agent.SandboxSource) agent.Input {
	return agent.Input{Agent: ag, History: l.Events(), Emitter: em, Sandbox: sb}
}

func TestModelTurnRetriedAfterCrash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		failAt      int
		afterCommit bool
		// modelCalls is how often the model is called over the attempt and its retry.
		modelCalls int
	}{
		{name: "no crash", modelCalls: 1},
		{name: "crash before the request start commits", failAt: 1, modelCalls: 1},
		{name: "crash before the response commits", failAt: 2, modelCalls: 2},
		{name: "crash after the response commits", failAt: 2, afterCommit: true, modelCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &countingModel{Client: fake.New()}
			core := agent.NewCore(m)
			ag := agentWith(t, noTools)
			l := agent.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`), true)

			crashing := &crashingLog{MemoryLog: l, failAt: tt.failAt, afterCommit: tt.afterCommit}
			_, err := core.ModelTurn(t.Context(), input(ag, l, crashing, nil))
			if tt.failAt > 0 {
				require.ErrorIs(t, err, errCrash)
			} else {
				require.NoError(t, err)
			}

			// The retry reads the log again and completes whatever is missing.
			_, err = core.ModelTurn(t.Context(), input(ag, l, l, nil))
			require.NoError(t, err)
			// Once complete, further retries do nothing.
			res, err := core.ModelTurn(t.Context(), input(ag, l, l, nil))
			require.NoError(t, err)
			require.False(t, res.Ran)

			evs := l.Events()
			require.Equal(t, []string{"user.message", "span.model_request_start", "agent.message", "span.model_request_end"}, types(evs),
				"one request, one message, however the first attempt died")
			require.Equal(t, evs[1].ID, body(t, evs[3])["model_request_start_id"])
			require.Equal(t, tt.modelCalls, m.count())
		})
	}
}

func TestExecuteToolRetriedAfterCrash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		failAt      int
		afterCommit bool
	}{
		{name: "no crash"},
		{name: "crash after the result commits", failAt: 1, afterCommit: true},
		// The command ran but its result never reached the log: the retry gets the result
		// recorded in the sandbox instead of running the command again.
		{name: "crash before the result commits", failAt: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core := agent.NewCore(fake.New())
			ag := agentWith(t, allowTools)
			sb := newLocalSandbox(t)
			l := agent.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool bash {\"command\":\"echo run >> runs.txt; wc -l < runs.txt\"}"}]}`), true)
			_, err := core.ModelTurn(t.Context(), input(ag, l, l, nil))
			require.NoError(t, err)
			step, err := agent.Next(l.Events())
			require.NoError(t, err)
			require.Equal(t, agent.StepExecute, step.Kind)
			use := step.Calls[0].Event

			crashing := &crashingLog{MemoryLog: l, failAt: tt.failAt, afterCommit: tt.afterCommit}
			err = core.ExecuteTool(t.Context(), input(ag, l, crashing, sb), use)
			if tt.failAt > 0 {
				require.ErrorIs(t, err, errCrash)
			} else {
				require.NoError(t, err)
			}
			require.NoError(t, core.ExecuteTool(t.Context(), input(ag, l, l, sb), use))
			require.NoError(t, core.ExecuteTool(t.Context(), input(ag, l, l, sb), use))

			results := ofType(l.Events(), wire.EventAgentToolResult)
			require.Len(t, results, 1)
			require.Equal(t, "1", messageText(t, results[0]), "the committed result is the first run's")
			require.Equal(t, 1, runCount(t, sb), "the command ran exactly once")
			step, err = agent.Next(l.Events())
			require.NoError(t, err)
			require.Equal(t, agent.StepModel, step.Kind)
		})
	}
}

// A worker that dies while the command runs (here: the step's ctx ends, and the sandbox kills
// the command) leaves no result. The retried step does not run the command again: it commits
// an error result that says the call was interrupted.
func TestExecuteToolInterruptedWhileRunningIsNotRunAgain(t *testing.T) {
	t.Parallel()
	core := agent.NewCore(fake.New())
	ag := agentWith(t, allowTools)
	sb := newLocalSandbox(t)
	l := agent.NewMemoryLog()
	l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/tool bash {\"command\":\"echo begun; echo run >> runs.txt; sleep 100\"}"}]}`), true)
	_, err := core.ModelTurn(t.Context(), input(ag, l, l, nil))
	require.NoError(t, err)
	use := ofType(l.Events(), wire.EventAgentToolUse)[0]

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		// Kill the step once the command has started (and written begun).
		for ctx.Err() == nil {
			if data, err := sb.sb.ReadFile(ctx, "runs.txt"); err == nil && len(data) > 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err = core.ExecuteTool(ctx, input(ag, l, l, sb), use)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, ofType(l.Events(), wire.EventAgentToolResult))

	require.NoError(t, core.ExecuteTool(t.Context(), input(ag, l, l, sb), use))
	results := ofType(l.Events(), wire.EventAgentToolResult)
	require.Len(t, results, 1)
	res := body(t, results[0])
	require.Equal(t, true, res["is_error"])
	text := messageText(t, results[0])
	require.Contains(t, text, "interrupted by a worker failure")
	require.Contains(t, text, "may have partially run")
	require.Contains(t, text, "begun", "the output recorded before the interruption is shown")
	require.Equal(t, 1, runCount(t, sb))
}

// runCount is how often the test commands ran: each appends a line to runs.txt.
func runCount(t *testing.T, sb *countingSandbox) int {
	t.Helper()
	data, err := sb.sb.ReadFile(t.Context(), "runs.txt")
	require.NoError(t, err)
	return strings.Count(string(data), "run\n")
}

func TestExecuteToolRefusesCallsThatMayNotRun(t *testing.T) {
	t.Parallel()
	core := agent.NewCore(fake.New(), agent.WithToolRunner(agent.ToolRunnerFunc(
		func(context.Context, sandbox.Sandbox, string, string, json.RawMessage) agent.ToolResult {
			t.Error("no tool may run")
			return agent.ToolResult{}
		})))
	l := agent.NewMemoryLog()
	ask, custom, denied := toolUse("tu1", "bash", `{}`, "ask"), customUse("cu1", "get_weather", `{}`), toolUse("tu2", "bash", `{}`, "ask")
	h := hist(userMsg("u1", "go"), response("1", ask, custom, denied), confirm("c1", "tu2", "deny"))
	in := agent.Input{Agent: agentWith(t, askAndCustom), History: h, Emitter: l, Sandbox: newLocalSandbox(t)}

	for _, use := range []wire.Event{ask, custom, denied} {
		require.ErrorIs(t, core.ExecuteTool(t.Context(), in, use), agent.ErrNotRunnable, use.ID)
	}
	// A call that is not part of the open turn has nothing left to do.
	require.NoError(t, core.ExecuteTool(t.Context(), in, toolUse("old", "bash", `{}`, "allow")))
	require.Empty(t, l.Events())
}

func TestExecuteToolSandboxFailures(t *testing.T) {
	t.Parallel()
	core := agent.NewCore(fake.New())
	ag := agentWith(t, allowTools)
	h := hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", `{"command":"true"}`, "allow")))
	l := agent.NewMemoryLog()

	err := core.ExecuteTool(t.Context(), agent.Input{Agent: ag, History: h, Emitter: l}, h[2])
	require.ErrorContains(t, err, "no sandbox source")

	gone := agent.SandboxFunc(func(context.Context) (sandbox.Sandbox, error) { return nil, sandbox.ErrGone })
	err = core.ExecuteTool(t.Context(), agent.Input{Agent: ag, History: h, Emitter: l, Sandbox: gone}, h[2])
	require.ErrorIs(t, err, sandbox.ErrGone)
	require.Empty(t, l.Events(), "no result is invented when the sandbox is unavailable")
}

func TestWebToolsRunWithoutSandbox(t *testing.T) {
	t.Parallel()
	s := newSession(t, allowTools, nil)
	s.say(`/tool web_search {"query":"go"}`)
	out, err := s.rt.Run(t.Context(), agent.Input{Agent: s.agent, History: s.log.Events(), Emitter: s.log})
	require.NoError(t, err, "no SandboxSource is needed for tools that run without one")
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	res := body(t, ofType(s.log.Events(), wire.EventAgentToolResult)[0])
	require.Equal(t, true, res["is_error"], "web tools are declared but not implemented")
}

func TestModelTurnErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind      string
		retryable bool
	}{
		{"overloaded", true},
		{"rate_limited", true},
		{"server", true},
		{"invalid", false},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			core := agent.NewCore(fake.New())
			ag := agentWith(t, noTools)
			l := agent.NewMemoryLog()
			l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"/fail `+tt.kind+` 1\nhi"}]}`), true)

			_, err := core.ModelTurn(t.Context(), input(ag, l, l, nil))
			var me *model.Error
			require.ErrorAs(t, err, &me, "the model error comes back unchanged")
			require.Equal(t, model.ErrorKind(tt.kind), me.Kind)
			require.Equal(t, tt.retryable, model.IsRetryable(err))
			evs := l.Events()
			require.Equal(t, []string{"user.message", "span.model_request_start", "span.model_request_end"}, types(evs))
			require.JSONEq(t, `{"model_request_start_id":"`+evs[1].ID+`","is_error":true,"model_usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"speed":null}}`,
				string(evs[2].Body))

			// The caller's retry (attempt 2) opens a new request and succeeds.
			res, err := core.ModelTurn(model.WithAttempt(t.Context(), 2), input(ag, l, l, nil))
			require.NoError(t, err)
			require.True(t, res.Ran)
			evs = l.Events()
			require.Equal(t, []string{"user.message", "span.model_request_start", "span.model_request_end",
				"span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
			require.Equal(t, evs[3].ID, body(t, evs[5])["model_request_start_id"])
			require.Equal(t, []wire.Event(res.Events), evs[4:])
		})
	}
}

// failingEmitter fails every Emit.
type failingEmitter struct{}

func (failingEmitter) Emit(context.Context, []agent.NewEvent) ([]wire.Event, error) {
	return nil, errCrash
}

func TestModelTurnErrorAndLogFailure(t *testing.T) {
	t.Parallel()
	failing := &scriptedModel{} // an empty script fails with a non-retryable model error
	core := agent.NewCore(failing)
	h := hist(userMsg("u1", "hi"), spanStart("s1")) // reuse the open request: no emit before the call
	_, err := core.ModelTurn(t.Context(), agent.Input{Agent: agentWith(t, noTools), History: h, Emitter: failingEmitter{}})
	var me *model.Error
	require.ErrorAs(t, err, &me, "the model error survives")
	require.ErrorIs(t, err, errCrash, "and so does the log failure")
}

func TestModelTurnSegmentsTextAndPreviews(t *testing.T) {
	t.Parallel()
	scripted := &scriptedModel{responses: []model.Response{{
		Content: []model.Block{
			{Type: model.BlockThinking, Thinking: "hmm"},
			text("a"), text("b"),
			{Type: model.BlockToolUse, ID: "toolu_1", Name: "get_weather", Input: json.RawMessage(`{"city":"Rome"}`)},
			text("c"),
			{Type: model.BlockToolUse, ID: "toolu_2", Name: "get_weather", Input: json.RawMessage(`not json`)},
			text(""),
		},
		StopReason: model.StopToolUse,
		Usage:      model.Usage{InputTokens: 7, OutputTokens: 3, CacheCreationInputTokens: 2, CacheReadInputTokens: 1},
	}}}
	core := agent.NewCore(scripted)
	l := agent.NewMemoryLog()
	l.Append(wire.EventUserMessage, json.RawMessage(`{"content":[{"type":"text","text":"go"}]}`), true)
	pv := &previewRecorder{}
	in := input(agentWith(t, `[`+weatherTool+`]`), l, l, nil)
	in.Previews = pv

	res, err := core.ModelTurn(t.Context(), in)
	require.NoError(t, err)
	evs := res.Events
	require.Equal(t, []string{"agent.thinking", "agent.message", "agent.custom_tool_use", "agent.message", "agent.custom_tool_use", "span.model_request_end"}, types(evs),
		"text keeps its place around tool calls; an all-empty text run is no message")
	require.JSONEq(t, `{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, string(evs[1].Body))
	require.JSONEq(t, `{"content":[{"type":"text","text":"c"}]}`, string(evs[3].Body))
	require.JSONEq(t, `{"name":"get_weather","input":{},"session_thread_id":null}`, string(evs[4].Body), "unparsable input becomes {}")
	require.JSONEq(t, `{"input_tokens":7,"output_tokens":3,"cache_creation_input_tokens":2,"cache_read_input_tokens":1,"speed":null}`,
		mustJSON(t, body(t, evs[5])["model_usage"]))

	require.Equal(t, evs[0].ID, pv.starts[0].id)
	require.Equal(t, []previewStart{{evs[0].ID, "agent.thinking"}, {evs[1].ID, "agent.message"}, {evs[3].ID, "agent.message"}}, pv.starts[:3])
	require.Len(t, pv.starts, 4, "the empty run was announced too; span.model_request_end closes it")
	require.Equal(t, map[int]string{0: "a", 1: "b"}, pv.deltas[evs[1].ID])
	require.Equal(t, map[int]string{0: "c"}, pv.deltas[evs[3].ID])
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestStepsDoNothingWhenNotDue(t *testing.T) {
	t.Parallel()
	m := &countingModel{Client: fake.New()}
	core := agent.NewCore(m)
	l := agent.NewMemoryLog()
	ag := agentWith(t, askTools)
	// A parked turn: no model call, no rejection and no cap is due.
	h := hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", `{}`, "ask")))
	in := agent.Input{Agent: ag, History: h, Emitter: l}

	res, err := core.ModelTurn(t.Context(), in)
	require.NoError(t, err)
	require.False(t, res.Ran)
	require.NoError(t, core.RejectTools(t.Context(), in))
	require.NoError(t, core.StopAtCap(t.Context(), in))
	require.Empty(t, l.Events())
	require.Zero(t, m.count())
}

func TestRejectAndCapAreIdempotent(t *testing.T) {
	t.Parallel()
	core := agent.NewCore(fake.New())
	ag := agentWith(t, askTools)

	l := agent.NewMemoryLog()
	h := hist(userMsg("u1", "go"), response("1", toolUse("tu1", "bash", `{}`, "ask"), toolUse("tu2", "nope", `{}`, "deny")), confirm("c1", "tu1", "deny", "no"))
	require.NoError(t, core.RejectTools(t.Context(), agent.Input{Agent: ag, History: h, Emitter: l}))
	require.Len(t, l.Events(), 2, "one result per denied call, in one emit")
	h = append(h, l.Events()...)
	require.NoError(t, core.RejectTools(t.Context(), agent.Input{Agent: ag, History: h, Emitter: l}))
	require.Len(t, l.Events(), 2)

	capLog := agent.NewMemoryLog()
	h = hist(userMsg("u1", "/loop"), rounds(agent.MaxRounds))
	require.NoError(t, core.StopAtCap(t.Context(), agent.Input{Agent: ag, History: h, Emitter: capLog}))
	h = append(h, capLog.Events()...)
	require.NoError(t, core.StopAtCap(t.Context(), agent.Input{Agent: ag, History: h, Emitter: capLog}))
	require.Equal(t, []string{wire.EventSessionError}, types(capLog.Events()))
}

func TestRunRequiresEmitter(t *testing.T) {
	t.Parallel()
	rt := agent.NewRuntime(agent.NewCore(fake.New()))
	_, err := rt.Run(t.Context(), agent.Input{History: hist(userMsg("u1", "hi"))})
	require.ErrorContains(t, err, "Emitter")
}

func TestRunStopsOnLogFailure(t *testing.T) {
	t.Parallel()
	rt := agent.NewRuntime(agent.NewCore(fake.New()))
	_, err := rt.Run(t.Context(), agent.Input{Agent: agentWith(t, noTools), History: hist(userMsg("u1", "hi")), Emitter: failingEmitter{}})
	require.ErrorIs(t, err, errCrash)
}

func TestMemoryLog(t *testing.T) {
	t.Parallel()
	l := agent.NewMemoryLog()
	q := l.Append(wire.EventUserMessage, nil, false)
	require.Nil(t, q.ProcessedAt)
	require.JSONEq(t, `{}`, string(q.Body))
	out, err := l.Emit(t.Context(), []agent.NewEvent{{ID: "sevt_pre", Type: wire.EventAgentThinking}, {Type: wire.EventAgentThinking}})
	require.NoError(t, err)
	require.Equal(t, "sevt_pre", out[0].ID, "a pre-assigned id is kept")
	require.True(t, strings.HasPrefix(out[1].ID, "sevt_"))
	require.NotNil(t, out[0].ProcessedAt)
	require.Equal(t, []int64{1, 2, 3}, []int64{q.Seq, out[0].Seq, out[1].Seq})
	require.Len(t, l.Events(), 3)
}
