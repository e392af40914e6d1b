//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/managed-agents/managed-agents/internal/durable"
)

// turnFixture is a running session with a live SDK stream opened before anything was sent.
type turnFixture struct {
	t         *testing.T
	e         *env
	sessionID string
	stream    *sdkStream
}

func newTurnFixture(t *testing.T, tools ...anthropic.BetaAgentNewParamsToolUnion) *turnFixture {
	t.Helper()
	return newTurnFixtureIn(t, newRunningEnv(t), tools...)
}

func newTurnFixtureIn(t *testing.T, e *env, tools ...anthropic.BetaAgentNewParamsToolUnion) *turnFixture {
	t.Helper()
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "worker", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}, Tools: tools})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "turns"})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)
	return &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}
}

func builtinTools(policy string) anthropic.BetaAgentNewParamsToolUnion {
	ts := &anthropic.BetaManagedAgentsAgentToolset20260401Params{}
	if policy == "always_ask" {
		ts.DefaultConfig = anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParams{
			PermissionPolicy: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParamsPermissionPolicyUnion{OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}}}
	}
	return anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: ts}
}

func (f *turnFixture) send(events ...anthropic.BetaManagedAgentsEventParamsUnion) {
	f.t.Helper()
	_, err := f.e.client.Beta.Sessions.Events.Send(context.Background(), f.sessionID, anthropic.BetaSessionEventSendParams{Events: events})
	require.NoError(f.t, err)
}

// untilIdle reads the stream up to and including the next session.status_idle.
func (f *turnFixture) untilIdle() []anthropic.BetaManagedAgentsStreamSessionEventsUnion {
	f.t.Helper()
	var out []anthropic.BetaManagedAgentsStreamSessionEventsUnion
	for {
		require.True(f.t, f.stream.Next(), "stream ended before idle after %v: %v", types(out), f.stream.Err())
		ev := f.stream.Current()
		out = append(out, ev)
		if ev.Type == "session.status_idle" {
			return out
		}
	}
}

// until reads the stream up to and including the first event of type typ.
func (f *turnFixture) until(typ string) []anthropic.BetaManagedAgentsStreamSessionEventsUnion {
	f.t.Helper()
	var out []anthropic.BetaManagedAgentsStreamSessionEventsUnion
	for {
		require.True(f.t, f.stream.Next(), "stream ended before %s after %v: %v", typ, types(out), f.stream.Err())
		out = append(out, f.stream.Current())
		if f.stream.Current().Type == typ {
			return out
		}
	}
}

func types(evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func fieldsOf(t *testing.T, ev anthropic.BetaManagedAgentsStreamSessionEventsUnion) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &m))
	return m
}

func last(evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion) anthropic.BetaManagedAgentsStreamSessionEventsUnion {
	return evs[len(evs)-1]
}

func find(t *testing.T, evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion, typ string) anthropic.BetaManagedAgentsStreamSessionEventsUnion {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("no %s in %v", typ, types(evs))
	return anthropic.BetaManagedAgentsStreamSessionEventsUnion{}
}

func messageText(ev anthropic.BetaManagedAgentsStreamSessionEventsUnion) string {
	var body struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal([]byte(ev.RawJSON()), &body)
	var b strings.Builder
	for _, c := range body.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

var closing = []string{"session.thread_status_idle", "session.usage", "session.status_idle"}

func TestTurnPlain(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t)
	f.send(userMessage("hello there"))
	evs := f.untilIdle()
	require.Equal(t, append([]string{"session.status_running", "session.thread_status_running", "user.message",
		"span.model_request_start", "agent.message", "span.model_request_end"}, closing...), types(evs))
	require.Equal(t, "echo: hello there", messageText(find(t, evs, "agent.message")))
	require.NotNil(t, fieldsOf(t, find(t, evs, "user.message"))["processed_at"], "the stream shows the message once, delivered")
	idle := last(evs)
	require.Equal(t, "end_turn", idle.StopReason.Type)
	usage := fieldsOf(t, find(t, evs, "session.usage"))["usage"].(map[string]any)
	require.Positive(t, usage["input_tokens"])
	end := fieldsOf(t, find(t, evs, "span.model_request_end"))
	require.Equal(t, find(t, evs, "span.model_request_start").ID, end["model_request_start_id"])
	require.Equal(t, false, end["is_error"])

	sess, err := f.e.client.Beta.Sessions.Get(context.Background(), f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("idle"), sess.Status)
	require.Positive(t, sess.Usage.OutputTokens)

	// The history holds the same events in the same order.
	page, err := f.e.client.Beta.Sessions.Events.List(context.Background(), f.sessionID, anthropic.BetaSessionEventListParams{})
	require.NoError(t, err)
	var hist []string
	for _, ev := range page.Data {
		hist = append(hist, ev.ID)
	}
	require.Equal(t, streamIDs(evs), hist)
}

func TestTurnBuiltinTool(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, builtinTools("always_allow"))
	f.send(userMessage("make a file\n/tool bash {\"command\":\"echo made > f.txt && cat f.txt\"}"))
	evs := f.untilIdle()
	require.Equal(t, append([]string{"session.status_running", "session.thread_status_running", "user.message",
		"span.model_request_start", "agent.tool_use", "span.model_request_end", "agent.tool_result",
		"span.model_request_start", "agent.message", "span.model_request_end"}, closing...), types(evs))
	use := fieldsOf(t, find(t, evs, "agent.tool_use"))
	require.Equal(t, "allow", use["evaluated_permission"])
	require.Equal(t, map[string]any{"type": "always_allow"}, use["evaluation"])
	result := fieldsOf(t, find(t, evs, "agent.tool_result"))
	require.Equal(t, find(t, evs, "agent.tool_use").ID, result["tool_use_id"])
	require.Equal(t, false, result["is_error"])
	require.Equal(t, "bash: made", messageText(find(t, evs, "agent.message")))

	// The sandbox persists across turns of the session.
	f.send(userMessage("/tool read {\"file_path\":\"f.txt\"}"))
	evs = f.untilIdle()
	require.Contains(t, messageText(find(t, evs, "agent.message")), "made")
}

func TestTurnConfirmationAllowAndDeny(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, builtinTools("always_ask"))
	f.send(userMessage("/tool bash {\"command\":\"echo allowed\"}"))
	evs := f.untilIdle()
	use := find(t, evs, "agent.tool_use")
	require.Equal(t, "ask", fieldsOf(t, use)["evaluated_permission"])
	require.Equal(t, append([]string{"session.status_running", "session.thread_status_running", "user.message",
		"span.model_request_start", "agent.tool_use", "span.model_request_end"}, closing...), types(evs))
	require.Equal(t, "requires_action", last(evs).StopReason.Type)
	require.Equal(t, []string{use.ID}, last(evs).StopReason.EventIDs)

	f.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}})
	evs = f.untilIdle()
	require.Equal(t, append([]string{"user.tool_confirmation", "session.status_running", "session.thread_status_running",
		"agent.tool_result", "span.model_request_start", "agent.message", "span.model_request_end"}, closing...), types(evs))
	require.Equal(t, "bash: allowed", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	// Deny: the call does not run; the model sees the rejection.
	f.send(userMessage("/tool bash {\"command\":\"touch denied\"}"))
	evs = f.untilIdle()
	use = find(t, evs, "agent.tool_use")
	f.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny, DenyMessage: param.NewOpt("not now")}})
	evs = f.untilIdle()
	result := fieldsOf(t, find(t, evs, "agent.tool_result"))
	require.Equal(t, true, result["is_error"])
	require.Equal(t, "Permission to use bash has been rejected. Rejection message: not now", result["content"].([]any)[0].(map[string]any)["text"])
	require.Equal(t, "bash error: Permission to use bash has been rejected. Rejection message: not now", messageText(find(t, evs, "agent.message")))
}

func TestTurnCustomTool(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, anthropic.BetaAgentNewParamsToolUnion{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
		Name: "get_weather", Description: "weather of a city",
		InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}})
	f.send(userMessage("/tool get_weather {\"city\":\"Paris\"}"))
	evs := f.untilIdle()
	use := find(t, evs, "agent.custom_tool_use")
	require.Equal(t, "get_weather", fieldsOf(t, use)["name"])
	require.Equal(t, "requires_action", last(evs).StopReason.Type)
	require.Equal(t, []string{use.ID}, last(evs).StopReason.EventIDs)

	f.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
		CustomToolUseID: use.ID, Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{
			{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "sunny"}}}}})
	evs = f.untilIdle()
	require.Equal(t, append([]string{"user.custom_tool_result", "session.status_running", "session.thread_status_running",
		"span.model_request_start", "agent.message", "span.model_request_end"}, closing...), types(evs))
	require.Equal(t, "get_weather: sunny", messageText(find(t, evs, "agent.message")))
}

func TestTurnInterrupt(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t)
	f.send(userMessage("/sleep 30000"))
	f.until("span.model_request_start")
	f.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}})
	evs := f.untilIdle()
	require.Equal(t, append([]string{"span.model_request_end", "user.interrupt"}, closing...), types(evs))
	require.Equal(t, true, fieldsOf(t, evs[0])["is_error"])
	require.NotNil(t, fieldsOf(t, find(t, evs, "user.interrupt"))["processed_at"])
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	sess, err := f.e.client.Beta.Sessions.Get(context.Background(), f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("idle"), sess.Status)

	// The next message starts a normal turn.
	f.send(userMessage("hello again"))
	evs = f.untilIdle()
	require.Equal(t, "echo: hello again", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
}

func TestTurnRoundCap(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, builtinTools("always_allow"))
	f.send(userMessage("/loop bash {\"command\":\"true\"}"))
	evs := f.untilIdle()
	uses := 0
	for _, ev := range evs {
		if ev.Type == "agent.tool_use" {
			uses++
		}
	}
	require.Equal(t, 20, uses)
	errEv := fieldsOf(t, find(t, evs, "session.error"))["error"].(map[string]any)
	require.Equal(t, "tool_use_limit_reached_error", errEv["type"])
	require.Equal(t, map[string]any{"type": "exhausted"}, errEv["retry_status"])
	require.Equal(t, closing, types(evs[len(evs)-3:]))
	require.Equal(t, "retries_exhausted", last(evs).StopReason.Type)
}

func TestTurnReschedulingRecovers(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t)
	f.send(userMessage("/fail overloaded 2\nhi"))
	evs := f.untilIdle()
	var rescheduled, retrying int
	for _, ev := range evs {
		switch ev.Type {
		case "session.status_rescheduled":
			rescheduled++
		case "session.error":
			e := fieldsOf(t, ev)["error"].(map[string]any)
			require.Equal(t, "model_overloaded_error", e["type"])
			require.Equal(t, map[string]any{"type": "retrying"}, e["retry_status"])
			retrying++
		}
	}
	require.Equal(t, 2, rescheduled)
	require.Equal(t, 2, retrying)
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	require.Equal(t, "echo: hi", messageText(find(t, evs, "agent.message")))
}

func TestTurnReschedulingExhausted(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t)
	f.send(userMessage("/fail overloaded 99\nhi"))
	evs := f.untilIdle()
	var statuses []string
	for _, ev := range evs {
		if ev.Type == "session.error" {
			statuses = append(statuses, fieldsOf(t, ev)["error"].(map[string]any)["retry_status"].(map[string]any)["type"].(string))
		}
	}
	require.Equal(t, []string{"retrying", "retrying", "retrying", "exhausted"}, statuses, "MaxRetries is 3 in the e2e env")
	require.Equal(t, "retries_exhausted", last(evs).StopReason.Type)
	require.Equal(t, closing, types(evs[len(evs)-3:]))
}

// TestTurnMessageDuringAStep: a message sent while the model step runs opens the next turn
// once this one ends, with no further send. (The step's closing Advance opens it from the
// queued message.) Its wake-up, sent while the first one was still in flight, reaches the
// run as a second wake update, which the run accepts.
func TestTurnMessageDuringAStep(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t)
	f.send(userMessage("/sleep 1500\nfirst"))
	f.until("span.model_request_start")
	f.send(userMessage("second"))

	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	evs = f.untilIdle()
	require.Equal(t, "echo: second", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	tc := sharedTemporal(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		accepted := 0
		it := tc.GetWorkflowHistory(context.Background(), durable.WorkflowID(f.sessionID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if !assert.NoError(c, err) {
				return
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
				accepted++
			}
		}
		assert.GreaterOrEqual(c, accepted, 2, "wake updates the run accepted")
	}, 15*time.Second, 100*time.Millisecond)
}

// TestTurnInterruptsAroundAQueuedMessage: a message and two interrupts queued during a turn.
// The interrupts apply first and close the turn; the message then runs its own turn; nothing
// is left queued and the session ends idle (it used to stay running).
func TestTurnInterruptsAroundAQueuedMessage(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t)
	f.send(userMessage("/sleep 30000"))
	f.until("span.model_request_start")
	interrupt := anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}}
	f.send(userMessage("after the interrupts"), interrupt, interrupt)

	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	evs = f.untilIdle()
	require.Equal(t, "echo: after the interrupts", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	for _, ev := range f.e.history(t, f.sessionID) {
		require.NotNil(t, ev.ProcessedAt, "%s %s left queued", ev.Type, ev.ID)
	}
	sess, err := f.e.client.Beta.Sessions.Get(context.Background(), f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("idle"), sess.Status)
}

// TestTurnInterruptWhileParked: an interrupt of a turn waiting for a confirmation closes it,
// and the status events say so.
func TestTurnInterruptWhileParked(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, builtinTools("always_ask"))
	f.send(userMessage(`/tool bash {"command":"true"}`))
	require.Equal(t, "requires_action", last(f.untilIdle()).StopReason.Type)

	f.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}})
	evs := f.untilIdle()
	require.Equal(t, append([]string{"user.interrupt"}, closing...), types(evs))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	f.send(userMessage("next"))
	evs = f.untilIdle()
	require.Equal(t, "echo: next", messageText(find(t, evs, "agent.message")))
}
