package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// ---- hand-written logs for the pure functions ----------------------------------------------

var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// ev is a delivered event with a literal JSON body.
func ev(id, typ, body string) wire.Event {
	t := epoch
	return wire.Event{ID: id, Type: typ, Body: json.RawMessage(body), ProcessedAt: &t}
}

// queued is a client event not yet delivered.
func queued(e wire.Event) wire.Event {
	e.ProcessedAt = nil
	return e
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func userMsg(id, text string) wire.Event {
	return ev(id, wire.EventUserMessage, `{"content":[{"type":"text","text":`+jsonString(text)+`}]}`)
}

func agentMsg(id string, texts ...string) wire.Event {
	blocks := ""
	for i, t := range texts {
		if i > 0 {
			blocks += ","
		}
		blocks += `{"type":"text","text":` + jsonString(t) + `}`
	}
	return ev(id, wire.EventAgentMessage, `{"content":[`+blocks+`]}`)
}

func thinking(id string) wire.Event { return ev(id, wire.EventAgentThinking, `{}`) }

func spanStart(id string) wire.Event { return ev(id, "span.model_request_start", `{}`) }

func spanEnd(id, startID string, isError bool) wire.Event {
	return ev(id, "span.model_request_end", fmt.Sprintf(
		`{"model_request_start_id":%q,"is_error":%t,"model_usage":{"input_tokens":10,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"speed":null}}`,
		startID, isError))
}

// toolUse is an agent.tool_use with evaluated permission perm (allow, ask or deny).
func toolUse(id, name, input, perm string) wire.Event {
	evaluation := `,"evaluation":{"type":"always_allow"}`
	switch perm {
	case "ask":
		evaluation = `,"evaluation":{"type":"always_ask"}`
	case "deny":
		evaluation = ""
	}
	return ev(id, wire.EventAgentToolUse, fmt.Sprintf(`{"name":%q,"input":%s,"evaluated_permission":%q%s,"session_thread_id":null}`, name, input, perm, evaluation))
}

func customUse(id, name, input string) wire.Event {
	return ev(id, wire.EventAgentCustomToolUse, fmt.Sprintf(`{"name":%q,"input":%s,"session_thread_id":null}`, name, input))
}

func toolResult(id, useID, text string, isError bool) wire.Event {
	return ev(id, wire.EventAgentToolResult, fmt.Sprintf(`{"tool_use_id":%q,"content":[{"type":"text","text":%s}],"is_error":%t}`, useID, jsonString(text), isError))
}

func customResult(id, useID, text string, isError bool) wire.Event {
	return ev(id, wire.EventUserCustomToolResult, fmt.Sprintf(`{"custom_tool_use_id":%q,"content":[{"type":"text","text":%s}],"is_error":%t,"session_thread_id":null}`, useID, jsonString(text), isError))
}

func confirm(id, useID, result string, denyMessage ...string) wire.Event {
	extra := ""
	if len(denyMessage) > 0 {
		extra = `,"deny_message":` + jsonString(denyMessage[0])
	}
	return ev(id, wire.EventUserToolConfirmation, fmt.Sprintf(`{"tool_use_id":%q,"result":%q%s,"session_thread_id":null}`, useID, result, extra))
}

func interrupt(id string) wire.Event { return ev(id, wire.EventUserInterrupt, `{}`) }

func sessionError(id, typ, retry string) wire.Event {
	return ev(id, wire.EventSessionError, fmt.Sprintf(`{"error":{"type":%q,"message":"m","retry_status":{"type":%q}}}`, typ, retry))
}

func idle(id, stop string) wire.Event {
	return ev(id, wire.EventSessionStatusIdle, fmt.Sprintf(`{"stop_reason":{"type":%q},"stop_details":null}`, stop))
}

// response is one complete model response: span start, the given events, span end.
func response(n string, evs ...wire.Event) []wire.Event {
	out := []wire.Event{spanStart("start" + n)}
	out = append(out, evs...)
	return append(out, spanEnd("end"+n, "start"+n, false))
}

// hist concatenates events and slices of events.
func hist(parts ...any) []wire.Event {
	var out []wire.Event
	for _, p := range parts {
		switch v := p.(type) {
		case wire.Event:
			out = append(out, v)
		case []wire.Event:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("hist: unexpected %T", p))
		}
	}
	return out
}

// ---- model messages --------------------------------------------------------------------------

func user(blocks ...model.Block) model.Message { return model.Message{Role: "user", Content: blocks} }

func assistant(blocks ...model.Block) model.Message {
	return model.Message{Role: "assistant", Content: blocks}
}

func text(s string) model.Block { return model.Block{Type: model.BlockText, Text: s} }

func use(id, name, input string) model.Block {
	return model.Block{Type: model.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(input)}
}

func result(useID, s string, isError bool) model.Block {
	return model.Block{Type: model.BlockToolResult, ToolUseID: useID, Content: []model.Block{text(s)}, IsError: isError}
}

// ---- agents ----------------------------------------------------------------------------------

// agentWith resolves a tools array the way the API stores it.
func agentWith(t testing.TB, toolsJSON string) wire.SessionAgent {
	t.Helper()
	resolved, _, err := toolconfig.ParseAndResolve(json.RawMessage(toolsJSON), nil)
	require.NoError(t, err)
	system := "You are a test agent."
	return wire.SessionAgent{ID: "agent_test", Type: "agent", Version: 1, Name: "test", System: &system,
		Model: wire.Model{ID: "fake", Speed: "standard"}, Tools: resolved}
}

const (
	noTools      = `[]`
	allowTools   = `[{"type":"agent_toolset_20260401"}]`
	askTools     = `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"always_ask"}}}]`
	weatherTool  = `{"type":"custom","name":"get_weather","description":"Weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	askAndCustom = `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"always_ask"}}},` + weatherTool + `]`
)

// ---- sandboxes -------------------------------------------------------------------------------

// countingSandbox is a SandboxSource over one local sandbox that counts how often it is asked.
type countingSandbox struct {
	mu    sync.Mutex
	sb    sandbox.Sandbox
	calls int
}

func (c *countingSandbox) Sandbox(context.Context) (sandbox.Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.sb, nil
}

func (c *countingSandbox) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// newLocalSandbox creates a real local sandbox under a test directory.
func newLocalSandbox(t testing.TB) *countingSandbox {
	t.Helper()
	ctx := context.Background()
	p := local.New(t.TempDir())
	ref, err := p.Create(ctx, sandbox.Spec{Name: sandbox.NameFor("sesn_test"), SessionID: "sesn_test"})
	require.NoError(t, err)
	sb, err := p.Attach(ctx, ref)
	require.NoError(t, err)
	return &countingSandbox{sb: sb}
}

// ---- previews --------------------------------------------------------------------------------

// previewRecorder is a PreviewSink that remembers what it was sent.
type previewRecorder struct {
	mu     sync.Mutex
	starts []previewStart
	deltas map[string]map[int]string
}

type previewStart struct{ id, typ string }

func (p *previewRecorder) Start(eventID, eventType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts = append(p.starts, previewStart{eventID, eventType})
}

func (p *previewRecorder) Delta(eventID string, index int, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deltas == nil {
		p.deltas = map[string]map[int]string{}
	}
	if p.deltas[eventID] == nil {
		p.deltas[eventID] = map[int]string{}
	}
	p.deltas[eventID][index] += text
}

// ---- models ----------------------------------------------------------------------------------

// countingModel wraps a model and counts its calls.
type countingModel struct {
	model.Client
	mu    sync.Mutex
	calls int
}

func (m *countingModel) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	return m.Client.Stream(ctx, req, onDelta)
}

func (m *countingModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// scriptedModel answers with fixed responses in order and records the requests.
type scriptedModel struct {
	mu        sync.Mutex
	responses []model.Response
	requests  []model.Request
}

func (m *scriptedModel) Create(ctx context.Context, req model.Request) (model.Response, error) {
	return m.Stream(ctx, req, nil)
}

func (m *scriptedModel) Stream(_ context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, req)
	if len(m.responses) == 0 {
		return model.Response{}, &model.Error{Kind: model.ErrInvalid, Status: 400, Message: "script exhausted"}
	}
	resp := m.responses[0]
	m.responses = m.responses[1:]
	if onDelta != nil {
		for i, b := range resp.Content {
			onDelta(model.Delta{Kind: model.DeltaBlockStart, Index: i, Type: b.Type})
			if b.Type == model.BlockText {
				onDelta(model.Delta{Kind: model.DeltaText, Index: i, Text: b.Text})
			}
		}
	}
	return resp, nil
}

// ---- event inspection ------------------------------------------------------------------------

// types lists the event types of evs.
func types(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// body decodes an event body into a generic map.
func body(t testing.TB, e wire.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Body, &m), "body of %s", e.Type)
	return m
}

// ofType returns the events of one type.
func ofType(evs []wire.Event, typ string) []wire.Event {
	var out []wire.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// messageText joins the text blocks of an agent.message or agent.tool_result.
func messageText(t testing.TB, e wire.Event) string {
	t.Helper()
	var b struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(e.Body, &b))
	s := ""
	for _, c := range b.Content {
		s += c.Text
	}
	return s
}
