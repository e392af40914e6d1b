package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The behaviours a real model needs that the fake never exercised: thinking blocks going back
// with their signatures, tool calls cut at max_tokens, refusals, and the request's thinking,
// effort and speed. The whole path against a strict Messages API is in internal/e2e
// (realmodel_test.go).

func thinkingBlock(text, sig string) model.Block {
	return model.Block{Type: model.BlockThinking, Thinking: text, Signature: sig}
}

func TestThinkingGoesBackWithItsSignature(t *testing.T) {
	t.Parallel()
	redacted := model.Block{Type: model.BlockRedactedThinking, Data: "opaque"}
	scripted := &scriptedModel{responses: []model.Response{
		{Content: []model.Block{thinkingBlock("plan", "sig-1"), redacted, use("toolu_model_1", "bash", `{"command":"echo hi"}`)}, StopReason: model.StopToolUse},
		{Content: []model.Block{text("done")}, StopReason: model.StopEndTurn},
	}}
	s := newSession(t, allowTools, scripted)
	s.say("go")
	out, evs := s.run(t.Context())
	require.Equal(t, agent.StopEndTurn, out.StopReason)

	// Clients see agent.thinking with no content at all (API.md §17)…
	thinkings := ofType(evs, wire.EventAgentThinking)
	require.Len(t, thinkings, 2)
	for _, ev := range thinkings {
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(raw, &fields))
		require.ElementsMatch(t, []string{"id", "type", "processed_at"}, keys(fields), string(raw))
		require.NotContains(t, string(raw), "sig-1")
	}
	// …while the second request carries both blocks back, unchanged, before the call.
	require.Len(t, scripted.requests, 2)
	msgs := scripted.requests[1].Messages
	require.Len(t, msgs, 3)
	got := msgs[1].Content
	require.Len(t, got, 3)
	require.Equal(t, thinkingBlock("plan", "sig-1"), got[0])
	require.Equal(t, redacted, got[1])
	require.Equal(t, model.BlockToolUse, got[2].Type)
	// The call goes back under the model's own id, and its result answers that id; clients
	// know the call by its event id.
	require.Equal(t, "toolu_model_1", got[2].ID)
	require.Equal(t, "toolu_model_1", msgs[2].Content[0].ToolUseID)
	require.NotEqual(t, "toolu_model_1", ofType(evs, wire.EventAgentToolUse)[0].ID)
}

func TestUnsignedThinkingIsNotSentBack(t *testing.T) {
	t.Parallel()
	scripted := &scriptedModel{responses: []model.Response{
		{Content: []model.Block{thinkingBlock("no signature", ""), use("", "bash", `{"command":"true"}`)}, StopReason: model.StopToolUse},
		{Content: []model.Block{text("done")}, StopReason: model.StopEndTurn},
	}}
	s := newSession(t, allowTools, scripted)
	s.say("go")
	s.run(t.Context())
	require.Len(t, scripted.requests, 2)
	for _, b := range scripted.requests[1].Messages[1].Content {
		require.NotEqual(t, model.BlockThinking, b.Type, "the API refuses a thinking block without its signature")
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestToolCallCutAtMaxTokens(t *testing.T) {
	t.Parallel()
	cut := model.Block{Type: model.BlockToolUse, Name: "write", Input: json.RawMessage(`{}`), Truncated: true}
	tests := []struct {
		name      string
		maxTokens int // the Core's cap; 0 is the model's limit
		responses []model.Response
		// wantRequests are the max_tokens of the requests made, in order.
		wantRequests []int
		wantRan      bool
	}{
		{
			name:      "below the model's limit: asked once more with the limit, and the whole call runs",
			maxTokens: 1000,
			responses: []model.Response{
				{Content: []model.Block{text("writing"), cut}, StopReason: model.StopMaxTokens, Usage: model.Usage{OutputTokens: 1000}},
				{Content: []model.Block{text("writing"), use("", "bash", `{"command":"echo whole"}`)}, StopReason: model.StopToolUse, Usage: model.Usage{OutputTokens: 1500}},
				{Content: []model.Block{text("done")}, StopReason: model.StopEndTurn},
			},
			wantRequests: []int{1000, 8192, 1000}, // the next request is capped again
			wantRan:      true,
		},
		{
			name: "at the model's limit: never run, never asked again; the model is told why",
			responses: []model.Response{
				{Content: []model.Block{text("writing"), cut}, StopReason: model.StopMaxTokens},
				{Content: []model.Block{text("I will split it")}, StopReason: model.StopEndTurn},
			},
			wantRequests: []int{8192, 8192},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scripted := &scriptedModel{responses: tt.responses}
			s := newSession(t, allowTools, scripted)
			s.rt = agent.NewRuntime(agent.NewCore(scripted, agent.WithMaxTokens(tt.maxTokens)))
			s.say("write a big file")
			out, evs := s.run(t.Context())
			require.Equal(t, agent.StopEndTurn, out.StopReason)

			var sent []int
			for _, r := range scripted.requests {
				sent = append(sent, r.MaxTokens)
			}
			require.Equal(t, tt.wantRequests, sent)

			results := ofType(evs, wire.EventAgentToolResult)
			require.Len(t, results, 1)
			b := body(t, results[0])
			if tt.wantRan {
				require.Equal(t, false, b["is_error"])
				require.Contains(t, messageText(t, results[0]), "whole")
				// The cut attempt's tokens were billed: its usage is in the span.
				ends := ofType(evs, wire.EventSpanModelRequestEnd)
				usage := body(t, ends[0])["model_usage"].(map[string]any)
				require.EqualValues(t, 2500, usage["output_tokens"])
				return
			}
			require.Equal(t, true, b["is_error"])
			require.Contains(t, messageText(t, results[0]), "max_tokens 8192")
			require.Zero(t, s.sandbox.count(), "a cut call must never reach the sandbox")
			// The model's next request has the call answered with that error.
			last := scripted.requests[1].Messages
			res := last[len(last)-1].Content[0]
			require.Equal(t, model.BlockToolResult, res.Type)
			require.True(t, res.IsError)
		})
	}
}

func TestRefusalEndsTheTurnWithRefusal(t *testing.T) {
	t.Parallel()
	scripted := &scriptedModel{responses: []model.Response{{
		Content:     []model.Block{text("I can't help with that.")},
		StopReason:  model.StopRefusal,
		StopDetails: json.RawMessage(`{"type":"refusal","category":"cyber","explanation":"policy"}`),
	}, {Content: []model.Block{text("sure")}, StopReason: model.StopEndTurn}}}
	s := newSession(t, allowTools, scripted)
	s.say("do something bad")
	out, _ := s.run(t.Context())
	require.Equal(t, agent.StopRefusal, out.StopReason)

	step, err := agent.Next(s.log.Events())
	require.NoError(t, err)
	require.Equal(t, agent.StepEnd, step.Kind)
	require.Equal(t, agent.StopRefusal, step.StopReason)
	require.JSONEq(t, `{"type":"refusal","category":"cyber","explanation":"policy"}`, string(step.StopDetails))

	// The next turn does not send the refused exchange back (the docs: reset the context, or
	// the model keeps refusing): the user's words and the refused answer are gone.
	s.say("something else")
	s.run(t.Context())
	require.Len(t, scripted.requests, 2)
	msgs := scripted.requests[1].Messages
	require.Len(t, msgs, 1)
	require.Equal(t, "user", msgs[0].Role)
	require.Len(t, msgs[0].Content, 2)
	require.Contains(t, msgs[0].Content[0].Text, "declined")
	require.Equal(t, "something else", msgs[0].Content[1].Text)
}

func TestRequestThinkingEffortSpeed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		model, effort, speed string
		wantThinking         *model.Thinking
		wantEffort           string
		wantSpeed            string
		wantMaxTokens        int
	}{
		{model: "claude-opus-5", effort: "high", speed: "fast",
			wantThinking: &model.Thinking{Type: model.ThinkingAdaptive, Display: model.ThinkingDisplayOmitted},
			wantEffort:   "high", wantSpeed: "fast", wantMaxTokens: 128_000},
		{model: "claude-sonnet-4-5", effort: "high", speed: "fast",
			wantThinking: &model.Thinking{Type: model.ThinkingEnabled, BudgetTokens: 32_000}, wantMaxTokens: 64_000},
		{model: "some-unknown-model", effort: "low", wantMaxTokens: 8192},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			t.Parallel()
			scripted := &scriptedModel{responses: []model.Response{{Content: []model.Block{text("ok")}, StopReason: model.StopEndTurn}}}
			s := newSession(t, noTools, scripted)
			s.agent.Model = wire.Model{ID: tt.model, Effort: &wire.Effort{Type: tt.effort}, Speed: tt.speed}
			s.say("hi")
			s.run(t.Context())
			req := scripted.requests[0]
			require.Equal(t, tt.wantThinking, req.Thinking)
			require.Equal(t, tt.wantEffort, req.Effort)
			require.Equal(t, tt.wantSpeed, req.Speed)
			require.Equal(t, tt.wantMaxTokens, req.MaxTokens)
			require.True(t, req.Cache)
			require.True(t, strings.HasSuffix(req.System, "You are a test agent."))
			// A fast request says so in its span's usage (it is priced differently).
			end := ofType(s.log.Events(), wire.EventSpanModelRequestEnd)[0]
			speed := body(t, end)["model_usage"].(map[string]any)["speed"]
			if tt.wantSpeed == "" {
				require.Nil(t, speed)
			} else {
				require.Equal(t, tt.wantSpeed, speed)
			}
		})
	}
}
