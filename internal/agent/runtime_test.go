package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/model/fake"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// session drives Runtime.Run over an in-memory log the way a caller would: client events
// are appended as delivered, and each Run sees the log as committed so far.
type session struct {
	t        *testing.T
	log      *agent.MemoryLog
	rt       *agent.Runtime
	agent    wire.SessionAgent
	sandbox  *countingSandbox
	previews *previewRecorder
}

func newSession(t *testing.T, toolsJSON string, m model.Client) *session {
	t.Helper()
	if m == nil {
		m = fake.New()
	}
	return &session{
		t:        t,
		log:      agent.NewMemoryLog(),
		rt:       agent.NewRuntime(agent.NewCore(m)),
		agent:    agentWith(t, toolsJSON),
		sandbox:  newLocalSandbox(t),
		previews: &previewRecorder{},
	}
}

// send appends a delivered client event.
func (s *session) send(typ, body string) wire.Event {
	return s.log.Append(typ, json.RawMessage(body), true)
}

func (s *session) say(text string) wire.Event {
	return s.send(wire.EventUserMessage, `{"content":[{"type":"text","text":`+jsonString(text)+`}]}`)
}

func (s *session) confirm(toolUseID, result string, denyMessage ...string) {
	extra := ""
	if len(denyMessage) > 0 {
		extra = `,"deny_message":` + jsonString(denyMessage[0])
	}
	s.send(wire.EventUserToolConfirmation, `{"tool_use_id":`+jsonString(toolUseID)+`,"result":"`+result+`"`+extra+`,"session_thread_id":null}`)
}

func (s *session) customResult(useID, text string) {
	s.send(wire.EventUserCustomToolResult, `{"custom_tool_use_id":`+jsonString(useID)+`,"content":[{"type":"text","text":`+jsonString(text)+`}],"session_thread_id":null}`)
}

// run runs the turn and returns the outcome and the events the run emitted.
func (s *session) run(ctx context.Context) (agent.Outcome, []wire.Event) {
	s.t.Helper()
	out, emitted, err := s.tryRun(ctx)
	require.NoError(s.t, err)
	return out, emitted
}

func (s *session) tryRun(ctx context.Context) (agent.Outcome, []wire.Event, error) {
	before := s.log.Events()
	out, err := s.rt.Run(ctx, agent.Input{
		Agent:    s.agent,
		History:  before,
		Emitter:  s.log,
		Previews: s.previews,
		Sandbox:  s.sandbox,
	})
	return out, s.log.Events()[len(before):], err
}

func TestRunPlainTurn(t *testing.T) {
	t.Parallel()
	s := newSession(t, noTools, nil)
	s.say("hello")
	out, evs := s.run(t.Context())

	require.Equal(t, []string{"span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
	require.Equal(t, "echo: hello", messageText(t, evs[1]))
	end := body(t, evs[2])
	require.Equal(t, evs[0].ID, end["model_request_start_id"])
	require.Equal(t, false, end["is_error"])
	usage := end["model_usage"].(map[string]any)
	require.Contains(t, usage, "speed")
	require.Nil(t, usage["speed"])
	for _, e := range evs {
		require.NotNil(t, e.ProcessedAt, e.Type)
		require.True(t, strings.HasPrefix(e.ID, "sevt_"), e.ID)
	}
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Empty(t, out.EventIDs)
	require.Equal(t, usage["input_tokens"], float64(out.Usage.InputTokens))
	require.Equal(t, usage["output_tokens"], float64(out.Usage.OutputTokens))
	require.Positive(t, out.Usage.OutputTokens)
	require.Zero(t, s.sandbox.count(), "a session without tools never provisions a sandbox")

	// Nothing more to do: a second Run emits nothing.
	out, evs = s.run(t.Context())
	require.Empty(t, evs)
	require.Equal(t, agent.StopEndTurn, out.StopReason)
}

func TestRunThinking(t *testing.T) {
	t.Parallel()
	s := newSession(t, noTools, nil)
	s.say("/think\nhello world")
	_, evs := s.run(t.Context())

	require.Equal(t, []string{"span.model_request_start", "agent.thinking", "agent.message", "span.model_request_end"}, types(evs))
	require.JSONEq(t, `{}`, string(evs[1].Body), "agent.thinking carries no content")

	// Previews: a start for each event, deltas only for the message, the same ids as committed.
	require.Equal(t, []previewStart{{evs[1].ID, "agent.thinking"}, {evs[2].ID, "agent.message"}}, s.previews.starts)
	require.Equal(t, map[string]map[int]string{evs[2].ID: {0: messageText(t, evs[2])}}, s.previews.deltas)
}

func TestRunBuiltinToolTurn(t *testing.T) {
	t.Parallel()
	s := newSession(t, allowTools, nil)
	s.say(`/tool bash {"command":"echo hi from bash"}`)
	out, evs := s.run(t.Context())

	require.Equal(t, []string{
		"span.model_request_start", "agent.tool_use", "span.model_request_end",
		"agent.tool_result",
		"span.model_request_start", "agent.message", "span.model_request_end",
	}, types(evs))
	use := evs[1]
	require.JSONEq(t, `{"name":"bash","input":{"command":"echo hi from bash"},"evaluated_permission":"allow",
		"evaluation":{"type":"always_allow"},"session_thread_id":null}`, string(use.Body))
	res := body(t, evs[3])
	require.Equal(t, use.ID, res["tool_use_id"])
	require.Equal(t, false, res["is_error"])
	content := res["content"].([]any)[0].(map[string]any)
	require.Equal(t, "text", content["type"])
	require.Contains(t, content["text"], "hi from bash")
	require.Equal(t, "bash: hi from bash", messageText(t, evs[5]))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Equal(t, 1, s.sandbox.count())
}

func TestRunConfirmAllow(t *testing.T) {
	t.Parallel()
	s := newSession(t, askTools, nil)
	s.say(`/tool bash {"command":"echo allowed"}`)
	out, evs := s.run(t.Context())

	require.Equal(t, []string{"span.model_request_start", "agent.tool_use", "span.model_request_end"}, types(evs))
	use := evs[1]
	require.JSONEq(t, `{"name":"bash","input":{"command":"echo allowed"},"evaluated_permission":"ask",
		"evaluation":{"type":"always_ask"},"session_thread_id":null}`, string(use.Body))
	require.Equal(t, agent.Outcome{StopReason: agent.StopRequiresAction, EventIDs: []string{use.ID}, Usage: out.Usage}, out)
	require.Zero(t, s.sandbox.count(), "nothing runs before the confirmation")

	// Parked runs stay parked.
	out, evs = s.run(t.Context())
	require.Empty(t, evs)
	require.Equal(t, []string{use.ID}, out.EventIDs)

	s.confirm(use.ID, "allow")
	out, evs = s.run(t.Context())
	require.Equal(t, []string{"agent.tool_result", "span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
	require.Equal(t, use.ID, body(t, evs[0])["tool_use_id"])
	require.Equal(t, "bash: allowed", messageText(t, evs[2]))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Equal(t, 1, s.sandbox.count())
}

func TestRunConfirmDeny(t *testing.T) {
	t.Parallel()
	s := newSession(t, askTools, nil)
	s.say(`/tool bash {"command":"rm -rf /"}`)
	out, _ := s.run(t.Context())
	require.Equal(t, agent.StopRequiresAction, out.StopReason)
	useID := out.EventIDs[0]

	s.confirm(useID, "deny", "not on my machine")
	out, evs := s.run(t.Context())
	const deny = "Permission to use bash has been rejected. Rejection message: not on my machine"
	require.Equal(t, []string{"agent.tool_result", "span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
	require.JSONEq(t, `{"tool_use_id":"`+useID+`","content":[{"type":"text","text":"`+deny+`"}],"is_error":true}`, string(evs[0].Body))
	require.Equal(t, "bash error: "+deny, messageText(t, evs[2]))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Zero(t, s.sandbox.count(), "a denied call never runs")
}

func TestRunCustomTool(t *testing.T) {
	t.Parallel()
	s := newSession(t, `[`+weatherTool+`]`, nil)
	s.say(`/tool get_weather {"city":"Paris"}`)
	out, evs := s.run(t.Context())

	require.Equal(t, []string{"span.model_request_start", "agent.custom_tool_use", "span.model_request_end"}, types(evs))
	use := evs[1]
	require.JSONEq(t, `{"name":"get_weather","input":{"city":"Paris"},"session_thread_id":null}`, string(use.Body))
	require.Equal(t, agent.StopRequiresAction, out.StopReason)
	require.Equal(t, []string{use.ID}, out.EventIDs)

	s.customResult(use.ID, "sunny, 21°C")
	out, evs = s.run(t.Context())
	require.Equal(t, []string{"span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
	require.Equal(t, "get_weather: sunny, 21°C", messageText(t, evs[1]))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Zero(t, s.sandbox.count())
}

func TestRunPartialAnswers(t *testing.T) {
	t.Parallel()
	s := newSession(t, askAndCustom, nil)
	s.say("/tool bash {\"command\":\"echo one\"}\n/tool read {\"file_path\":\"x.txt\"}\n/tool get_weather {\"city\":\"Oslo\"}")
	out, evs := s.run(t.Context())
	require.Equal(t, []string{"span.model_request_start", "agent.tool_use", "agent.tool_use", "agent.custom_tool_use", "span.model_request_end"}, types(evs))
	bash, read, weather := evs[1].ID, evs[2].ID, evs[3].ID
	require.Equal(t, []string{bash, read, weather}, out.EventIDs)

	// Allow one: it runs, the others stay parked.
	s.confirm(bash, "allow")
	out, evs = s.run(t.Context())
	require.Equal(t, []string{"agent.tool_result"}, types(evs))
	require.Equal(t, bash, body(t, evs[0])["tool_use_id"])
	require.Equal(t, agent.StopRequiresAction, out.StopReason)
	require.Equal(t, []string{read, weather}, out.EventIDs)

	// Answer the custom call: still parked on the last one, nothing emitted.
	s.customResult(weather, "snow")
	out, evs = s.run(t.Context())
	require.Empty(t, evs)
	require.Equal(t, []string{read}, out.EventIDs)

	// Deny the last one: the turn continues with all three results.
	s.confirm(read, "deny", "private")
	out, evs = s.run(t.Context())
	require.Equal(t, []string{"agent.tool_result", "span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
	require.Equal(t, "bash: one\nread error: Permission to use read has been rejected. Rejection message: private\nget_weather: snow",
		messageText(t, evs[2]))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
}

func TestRunDisabledAndUnknownTools(t *testing.T) {
	t.Parallel()
	s := newSession(t, `[{"type":"agent_toolset_20260401","configs":[{"name":"bash","enabled":false}]}]`, nil)
	s.say("/tool bash {\"command\":\"true\"}\n/tool frobnicate {}")
	out, evs := s.run(t.Context())

	require.Equal(t, []string{
		"span.model_request_start", "agent.tool_use", "agent.tool_use", "span.model_request_end",
		"agent.tool_result", "agent.tool_result",
		"span.model_request_start", "agent.message", "span.model_request_end",
	}, types(evs))
	require.JSONEq(t, `{"name":"bash","input":{"command":"true"},"evaluated_permission":"deny","session_thread_id":null}`, string(evs[1].Body),
		"refused before any policy applied: no evaluation")
	require.JSONEq(t, `{"name":"frobnicate","input":{},"evaluated_permission":"deny","session_thread_id":null}`, string(evs[2].Body))
	for i, use := range []wire.Event{evs[1], evs[2]} {
		res := body(t, evs[4+i])
		require.Equal(t, use.ID, res["tool_use_id"])
		require.Equal(t, true, res["is_error"])
	}
	require.Equal(t, "bash error: The tool \"bash\" is not enabled for this agent, so the call was not executed.\n"+
		"frobnicate error: The tool \"frobnicate\" is not enabled for this agent, so the call was not executed.", messageText(t, evs[7]))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Zero(t, s.sandbox.count())
}

func TestRunAutoPolicyAsks(t *testing.T) {
	t.Parallel()
	s := newSession(t, `[{"type":"agent_toolset_20260401","configs":[{"name":"bash","permission_policy":{"type":"auto"}}]}]`, nil)
	s.say(`/tool bash {"command":"true"}`)
	out, evs := s.run(t.Context())
	require.Equal(t, agent.StopRequiresAction, out.StopReason)
	b := body(t, evs[1])
	require.Equal(t, "ask", b["evaluated_permission"])
	require.Equal(t, map[string]any{"type": "auto", "evaluated_permission": map[string]any{"type": "ask", "reason_code": "indeterminate"}}, b["evaluation"],
		"without a judge every call is undecided, and an undecided call asks (API.md §3.3)")
}

func TestRunRoundCap(t *testing.T) {
	t.Parallel()
	s := newSession(t, allowTools, nil)
	s.say(`/loop bash {"command":"true"}`)
	out, evs := s.run(t.Context())

	require.Equal(t, agent.StopRetriesExhausted, out.StopReason)
	require.Len(t, ofType(evs, "span.model_request_start"), agent.MaxRounds)
	require.Len(t, ofType(evs, wire.EventAgentToolUse), agent.MaxRounds)
	require.Len(t, ofType(evs, wire.EventAgentToolResult), agent.MaxRounds)
	last := evs[len(evs)-1]
	require.Equal(t, wire.EventSessionError, last.Type)
	require.JSONEq(t, `{"error":{"type":"tool_use_limit_reached_error","message":"The agent reached the limit of 20 model requests in one turn without finishing.","retry_status":{"type":"exhausted"}}}`,
		string(last.Body))
	require.Equal(t, wire.EventAgentToolResult, evs[len(evs)-2].Type, "the 20th round's tools still run")

	// The turn is over: another Run does nothing; the next message starts a fresh count.
	out, evs = s.run(t.Context())
	require.Empty(t, evs)
	require.Equal(t, agent.StopRetriesExhausted, out.StopReason)
	s.say("hello")
	out, evs = s.run(t.Context())
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Equal(t, []string{"span.model_request_start", "agent.message", "span.model_request_end"}, types(evs))
}

// blockOnce is a fake-model sleep that blocks its first call until the context ends and
// reports that it started; later calls return at once.
type blockOnce struct {
	once    sync.Once
	started chan struct{}
}

func (b *blockOnce) sleep(ctx context.Context, _ time.Duration) error {
	first := false
	b.once.Do(func() { first = true })
	if !first {
		return nil
	}
	close(b.started)
	<-ctx.Done()
	return ctx.Err()
}

func TestRunInterruptDuringModelCall(t *testing.T) {
	t.Parallel()
	block := &blockOnce{started: make(chan struct{})}
	s := newSession(t, noTools, fake.New(fake.WithSleep(block.sleep)))
	s.say("/sleep 60000\nslow")

	// The workflow cancels the in-flight step when the interrupt arrives.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := s.tryRun(ctx)
		done <- err
	}()
	<-block.started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	evs := s.log.Events()
	require.Equal(t, []string{"user.message", "span.model_request_start", "span.model_request_end"}, types(evs))
	require.Equal(t, true, body(t, evs[2])["is_error"], "the request is closed even though its context was cancelled")

	// Applying the interrupt ends the turn without another model call.
	s.send(wire.EventUserInterrupt, `{}`)
	out, emitted := s.run(t.Context())
	require.Empty(t, emitted)
	require.Equal(t, agent.StopEndTurn, out.StopReason)

	// The next message starts a new turn on a valid conversation.
	s.say("hello")
	out, emitted = s.run(t.Context())
	require.Equal(t, []string{"span.model_request_start", "agent.message", "span.model_request_end"}, types(emitted))
	require.Equal(t, agent.StopEndTurn, out.StopReason)
}

func TestRunInterruptWhileParked(t *testing.T) {
	t.Parallel()
	s := newSession(t, askTools, nil)
	s.say(`/tool bash {"command":"echo never"}`)
	out, _ := s.run(t.Context())
	require.Equal(t, agent.StopRequiresAction, out.StopReason)
	useID := out.EventIDs[0]

	s.send(wire.EventUserInterrupt, `{}`)
	out, evs := s.run(t.Context())
	require.Empty(t, evs)
	require.Equal(t, agent.StopEndTurn, out.StopReason)

	// A late confirmation does not run the abandoned call.
	s.confirm(useID, "allow")
	out, evs = s.run(t.Context())
	require.Empty(t, evs)
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Zero(t, s.sandbox.count())

	// The abandoned call reaches the model closed with an error result (TestProject checks
	// the projection); the model answers the new message.
	s.say("never mind")
	out, evs = s.run(t.Context())
	require.Equal(t, agent.StopEndTurn, out.StopReason)
	require.Equal(t, "echo: never mind", messageText(t, ofType(evs, wire.EventAgentMessage)[0]))
}

func TestRunOffersToolsAndAgent(t *testing.T) {
	t.Parallel()
	scripted := &scriptedModel{responses: []model.Response{{Content: []model.Block{text("ok")}, StopReason: model.StopEndTurn}}}
	s := newSession(t, `[{"type":"agent_toolset_20260401","configs":[{"name":"web_search","enabled":false},{"name":"grep","enabled":false}]},`+weatherTool+`]`, scripted)
	s.say("hi")
	s.run(t.Context())

	require.Len(t, scripted.requests, 1)
	req := scripted.requests[0]
	require.Equal(t, "fake", req.Model)
	// The harness preamble (prompt.go) comes first, then the agent's own system prompt.
	require.True(t, strings.HasPrefix(req.System, "You are an autonomous agent running in a session"), req.System)
	require.True(t, strings.HasSuffix(req.System, ".\n\nYou are a test agent."), req.System)
	// An unknown model gets the catalog's conservative output limit, and no thinking.
	require.Equal(t, catalog.DefaultMaxOutputTokens, req.MaxTokens)
	require.Nil(t, req.Thinking)
	require.True(t, req.Cache)
	require.Equal(t, []model.Message{user(text("hi"))}, req.Messages)
	var names []string
	for _, tool := range req.Tools {
		names = append(names, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tool.InputSchema, &schema), tool.Name)
		require.Equal(t, "object", schema["type"], tool.Name)
	}
	require.Equal(t, []string{"bash", "read", "write", "edit", "glob", "web_fetch", "get_weather"}, names)
}

func TestNeedsSandbox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tools string
		want  bool
	}{
		{noTools, false},
		{`[` + weatherTool + `]`, false},
		{allowTools, true},
		{`[{"type":"agent_toolset_20260401","default_config":{"enabled":false},"configs":[{"name":"web_fetch","enabled":true}]}]`, false},
		{`[{"type":"agent_toolset_20260401","default_config":{"enabled":false},"configs":[{"name":"read","enabled":true}]}]`, true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, agent.NeedsSandbox(agentWith(t, tt.tools).Tools), tt.tools)
	}
}
