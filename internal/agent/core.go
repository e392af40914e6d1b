package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/tools"
	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// ToolRunner executes built-in tools. callID is the agent.tool_use event id: the runner must
// let a call take effect at most once however often it is run with the same id, because a
// step retried after a worker died runs it again when its result was not committed. The
// default is tools.RunBuiltinOnce; tests may script it.
type ToolRunner interface {
	RunBuiltin(ctx context.Context, sb sandbox.Sandbox, callID, name string, input json.RawMessage) ToolResult
}

// ToolRunnerFunc adapts a function to ToolRunner.
type ToolRunnerFunc func(ctx context.Context, sb sandbox.Sandbox, callID, name string, input json.RawMessage) ToolResult

// RunBuiltin calls f.
func (f ToolRunnerFunc) RunBuiltin(ctx context.Context, sb sandbox.Sandbox, callID, name string, input json.RawMessage) ToolResult {
	return f(ctx, sb, callID, name, input)
}

// builtinTools runs the built-ins of package tools, exactly once per call id.
var builtinTools = ToolRunnerFunc(func(ctx context.Context, sb sandbox.Sandbox, callID, name string, input json.RawMessage) ToolResult {
	res := tools.RunBuiltinOnce(ctx, sb, callID, name, input)
	return ToolResult{Text: res.Text, Content: res.Content, IsError: res.IsError}
})

// ToolResult is what a tool returns; a failing tool is a result with IsError, not an error.
// Content, when set, is the result's content blocks (documents, search results, images);
// otherwise the result is Text as one text block.
type ToolResult struct {
	Text    string
	Content []wire.ContentBlock
	IsError bool
}

func (r ToolResult) content() []wire.ContentBlock {
	if r.Content != nil {
		return r.Content
	}
	return wire.NewTextContent(r.Text)
}

// WebTools runs the server-side web tools (web_fetch, web_search) with the tool's resolved
// configuration (allowed and blocked domains, max_content_tokens). They need no sandbox.
type WebTools interface {
	RunWeb(ctx context.Context, name string, input json.RawMessage, cfg wire.ToolConfig) ToolResult
}

// SandboxSource provides the session's sandbox. It is asked only when a built-in that needs
// one actually runs, so sessions that never run a tool never provision a sandbox.
// Implementations should return the same sandbox on every call.
type SandboxSource interface {
	Sandbox(ctx context.Context) (sandbox.Sandbox, error)
}

// SandboxFunc adapts a function to SandboxSource.
type SandboxFunc func(ctx context.Context) (sandbox.Sandbox, error)

// Sandbox calls f.
func (f SandboxFunc) Sandbox(ctx context.Context) (sandbox.Sandbox, error) { return f(ctx) }

// Input is what every step works from.
type Input struct {
	// Agent is the session's immutable agent snapshot: model, system prompt, resolved tools.
	Agent wire.SessionAgent
	// History is the session's log as committed so far, in log order: the current turn's
	// part of it (turns.Service.LoadTurn) or, for a model request, all of it.
	History []wire.Event
	// TurnStart is the seq where the current turn starts in History (0: at its start); the
	// turn is planned from there on (TurnPart).
	TurnStart int64
	// Conversation, when set, is History decoded (DecodeLog) by a caller that keeps decoded
	// events between requests; nil, ModelTurn decodes History.
	Conversation []Decoded
	// Projection, when set, is Conversation projected (Projection.Extend) by a caller that
	// keeps projections between requests; nil, ModelTurn projects Conversation.
	Projection *Projection
	// Emitter appends the step's events to the log.
	Emitter Emitter
	// HoldResponse makes ModelTurn return a successful response's events in
	// ModelTurnResult.Held instead of emitting them, for a caller that commits them in the
	// transaction of the bookkeeping that follows (one commit instead of two). The request's
	// start is emitted either way: it is what a stream shows while the model thinks.
	HoldResponse bool
	// Previews receives stream previews; nil sends none.
	Previews PreviewSink
	// Sandbox provides the sandbox for built-in tools; nil when the agent has none enabled.
	Sandbox SandboxSource
	// MCPTools is what the agent's MCP servers listed for the current turn; servers that
	// could not be reached are absent, and their tools are not offered.
	MCPTools []MCPServerTools
	// MCP calls MCP tools; nil answers every MCP call with an error result.
	MCP MCPCaller
	// Harness is what the caller knows of where the agent runs, for the preamble of the
	// system prompt (prompt.go); the zero value leaves those facts out.
	Harness HarnessInfo
}

// turn is the part of History that plans the current turn.
func (in Input) turn() []wire.Event { return TurnPart(in.History, in.TurnStart) }

// ErrNotRunnable is returned by ExecuteTool for a call the log does not allow to run: it waits
// for a confirmation, was denied, or is a custom tool call.
var ErrNotRunnable = errors.New("tool call is not allowed to run")

// spanEndTimeout bounds the emit that closes a failed model request: it runs even when the
// step's context was cancelled (an interrupt), so previews are closed and the span paired.
const spanEndTimeout = 10 * time.Second

// Core performs the single steps of a turn. It is safe for concurrent use by many sessions.
type Core struct {
	model     model.Client
	tools     ToolRunner
	web       WebTools
	maxTokens int
	catalog   *catalog.Table
	log       *slog.Logger
}

// CoreOption configures a Core.
type CoreOption func(*Core)

// WithMaxTokens caps max_tokens of model requests at n; 0 (the default) sends each model's
// own output limit from the catalog. A tool call cut at a cap below the model's limit is asked
// for once more with the limit.
func WithMaxTokens(n int) CoreOption { return func(c *Core) { c.maxTokens = n } }

// WithCatalog sets the model table that gives each model's limits and capabilities (default
// catalog.Builtin()).
func WithCatalog(t *catalog.Table) CoreOption { return func(c *Core) { c.catalog = t } }

// WithToolRunner replaces how built-in tools run (default: tools.RunBuiltinOnce).
func WithToolRunner(t ToolRunner) CoreOption { return func(c *Core) { c.tools = t } }

// WithWebTools runs web_fetch and web_search with w (default: an error result saying the
// server has no web tools).
func WithWebTools(w WebTools) CoreOption { return func(c *Core) { c.web = w } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) CoreOption { return func(c *Core) { c.log = l } }

// NewCore returns a Core that calls m and runs built-ins with the tools package.
func NewCore(m model.Client, opts ...CoreOption) *Core {
	c := &Core{model: m, tools: builtinTools, catalog: catalog.Builtin(), log: slog.Default()}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// ModelTurnResult is the outcome of ModelTurn.
type ModelTurnResult struct {
	// Ran is false when the log showed no model call was due (a retry after the commit); then
	// nothing was called or emitted.
	Ran bool
	// Response is the model's answer.
	Response model.Response
	// Events are the committed events of the response, span.model_request_end last.
	Events []wire.Event
	// Held are the response's events, span.model_request_end last, not yet in the log: set
	// instead of Events when Input.HoldResponse asked for them. The caller must commit them
	// as they are, all together, or the response is lost (a retry asks the model again).
	Held []NewEvent
}

// ModelTurn calls the model once if the log says a model call is due: it projects the
// conversation, emits span.model_request_start (unless a dangling one from a crashed attempt
// is reused), streams the answer to the preview sink, then emits the whole response —
// agent.thinking, agent.message, agent.tool_use / agent.custom_tool_use and
// span.model_request_end — in one Emit call, so a response is in the log entirely or not at
// all.
//
// A model error is returned unchanged (model.IsRetryable tells whether to retry) after a
// span.model_request_end with is_error true; retrying, backoff and session.error belong to
// the caller.
func (c *Core) ModelTurn(ctx context.Context, in Input) (ModelTurnResult, error) {
	step, err := Next(in.turn())
	if err != nil {
		return ModelTurnResult{}, err
	}
	if step.Kind != StepModel {
		c.log.DebugContext(ctx, "model turn not due; nothing to do", "next", step.Kind)
		return ModelTurnResult{}, nil
	}
	msgs, err := in.messages()
	if err != nil {
		return ModelTurnResult{}, err
	}
	ts := newToolset(in.Agent.Tools, in.MCPTools)
	if len(ts.offered) == 0 {
		// Models refuse tool blocks in a request that defines no tools, which happens when
		// the only servers an agent's earlier calls went to cannot be reached this turn.
		msgs = toolBlocksAsText(msgs)
	}
	mdl := c.catalog.Resolve(in.Agent.Model.ID)
	req := c.request(in, mdl, msgs, ts)

	startID := step.RequestStartID
	if startID == "" {
		startID = ids.New(ids.Event)
		if _, err := in.Emitter.Emit(ctx, []NewEvent{{ID: startID, Type: wire.EventSpanModelRequestStart, Body: emptyBody()}}); err != nil {
			return ModelTurnResult{}, fmt.Errorf("emit model request start: %w", err)
		}
	}
	// billed is what this step's calls cost before its final one: summarising the
	// conversation, a call cut at max_tokens. Those tokens were paid for, so the span's usage
	// includes them.
	var billed model.Usage
	compacted := false
	compact := func() (bool, error) {
		var used model.Usage
		var err error
		req, used, err = c.compact(ctx, in, req)
		billed = sumUsage(billed, used)
		compacted = err == nil
		if errors.Is(err, errCompactionLimit) {
			return false, c.stopAtCompactionLimit(ctx, in, startID, billed, err)
		}
		if err != nil {
			return false, c.failRequest(ctx, in, startID, err, billed)
		}
		return true, nil
	}
	if needsCompaction(req, mdl) && len(req.Messages) > 1 {
		if ok, err := compact(); !ok {
			return ModelTurnResult{Ran: err == nil}, err
		}
	}
	rids := &responseIDs{}
	resp, err := c.model.Stream(ctx, req, newPreviewer(in.Previews, rids).onDelta)
	if me := (*model.Error)(nil); errors.As(err, &me) && me.PromptTooLong {
		// The estimate was short, or nothing older is left to summarise: compact now, or
		// give up when this prompt is already the continuation of a compaction.
		if compacted || len(req.Messages) <= 1 {
			return ModelTurnResult{Ran: true}, c.stopAtCompactionLimit(ctx, in, startID, billed, fmt.Errorf("%w: %s", errCompactionLimit, me.Message))
		}
		if ok, err := compact(); !ok {
			return ModelTurnResult{Ran: err == nil}, err
		}
		rids = &responseIDs{}
		resp, err = c.model.Stream(ctx, req, newPreviewer(in.Previews, rids).onDelta)
		if me := (*model.Error)(nil); errors.As(err, &me) && me.PromptTooLong {
			return ModelTurnResult{Ran: true}, c.stopAtCompactionLimit(ctx, in, startID, billed, fmt.Errorf("%w: %s", errCompactionLimit, me.Message))
		}
	}
	if err == nil && cutCall(resp) && req.MaxTokens < mdl.MaxOutputTokens {
		// The model ran out of max_tokens inside a tool call: the call is incomplete and must
		// not run, and the same request would be cut the same way. Ask once more with the
		// model's whole output limit (platform.claude.com/docs/en/build-with-claude/
		// handling-stop-reasons: "retry the request with a higher max_tokens value to get the
		// full tool use"). The cut response's previews end without a committed event, which
		// clients tolerate (API.md §5.4); its tokens were billed and stay in the usage.
		c.log.InfoContext(ctx, "tool call cut at max_tokens; asking again with the model's output limit",
			"max_tokens", req.MaxTokens, "retry_max_tokens", mdl.MaxOutputTokens)
		billed = sumUsage(billed, resp.Usage)
		req.MaxTokens = mdl.MaxOutputTokens
		rids = &responseIDs{}
		resp, err = c.model.Stream(ctx, req, newPreviewer(in.Previews, rids).onDelta)
	}
	if err != nil {
		return ModelTurnResult{}, c.failRequest(ctx, in, startID, err, billed)
	}
	resp.Usage = sumUsage(billed, resp.Usage)
	evs, err := responseEvents(resp, rids, ts, req.MaxTokens)
	if err != nil {
		return ModelTurnResult{}, err
	}
	end, err := spanEndEvent(ids.New(ids.Event), startID, false, resp.Usage, req.Speed)
	if err != nil {
		return ModelTurnResult{}, err
	}
	if end.Private, err = json.Marshal(responsePrivate{StopReason: resp.StopReason, StopDetails: resp.StopDetails}); err != nil {
		return ModelTurnResult{}, fmt.Errorf("encode response stop: %w", err)
	}
	if in.HoldResponse {
		return ModelTurnResult{Ran: true, Response: resp, Held: append(evs, end)}, nil
	}
	committed, err := in.Emitter.Emit(ctx, append(evs, end))
	if err != nil {
		return ModelTurnResult{}, fmt.Errorf("emit model response: %w", err)
	}
	return ModelTurnResult{Ran: true, Response: resp, Events: committed}, nil
}

// messages is the conversation a model request sends, from what the caller kept.
func (in Input) messages() ([]model.Message, error) {
	if in.Projection != nil {
		return in.Projection.Messages(), nil
	}
	conv := in.Conversation
	if conv == nil {
		var err error
		if conv, err = DecodeLog(in.History); err != nil {
			return nil, err
		}
	}
	return ProjectDecoded(conv), nil
}

// stopAtCompactionLimit ends the turn because compaction could not make the conversation fit:
// the span closes as failed and session.error compaction_limit_reached_error follows, in one
// commit. The step then has nothing more to do; the turn ends with retries_exhausted.
func (c *Core) stopAtCompactionLimit(ctx context.Context, in Input, startID string, billed model.Usage, cause error) error {
	c.log.WarnContext(ctx, "compaction limit reached", "err", cause)
	evs, err := compactionLimitEvents(startID, billed, cause)
	if err != nil {
		return err
	}
	if _, err := in.Emitter.Emit(ctx, evs); err != nil {
		return fmt.Errorf("emit compaction limit: %w", err)
	}
	return nil
}

// failRequest closes a failed model request in the log and returns the model error unchanged,
// or joined with the emit error if the log could not be written.
func (c *Core) failRequest(ctx context.Context, in Input, startID string, modelErr error, billed model.Usage) error {
	end, err := spanEndEvent(ids.New(ids.Event), startID, true, billed)
	if err != nil {
		return errors.Join(modelErr, err)
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spanEndTimeout)
	defer cancel()
	if _, err := in.Emitter.Emit(ectx, []NewEvent{end}); err != nil {
		return errors.Join(modelErr, fmt.Errorf("emit failed model request end: %w", err))
	}
	return modelErr
}

// ExecuteTool runs one allowed built-in call in the sandbox and emits its agent.tool_result.
// If the log already has a result for the call, or the call's turn has ended, it does
// nothing. A call that may not run (it waits for a confirmation, was denied, or is a custom
// tool) is ErrNotRunnable. A tool failure is a result with is_error, not an error; an error is
// returned only when the sandbox or the log fails, or when ctx is cancelled while the tool
// runs (then no result is emitted: the cut-short output is not a result).
//
// The tool runs under the tool_use event id, so a retry after a crash between running it and
// committing its result does not run it again: it gets the recorded result, waits for a run
// that outlived its worker, or, for a run that died unrecorded (also one cut short by a
// cancelled ctx), gets an is_error result saying the call was interrupted.
func (c *Core) ExecuteTool(ctx context.Context, in Input, toolUse wire.Event) error {
	ev, ran, err := c.RunTool(ctx, in, toolUse)
	if err != nil || !ran {
		return err
	}
	if _, err := in.Emitter.Emit(ctx, []NewEvent{ev}); err != nil {
		return fmt.Errorf("emit tool result of %s: %w", toolUse.ID, err)
	}
	return nil
}

// RunTool is ExecuteTool without the emit: it runs the call if the log says it is due and
// returns its result event, not yet in the log, for a caller that commits it with the
// bookkeeping that follows (one commit instead of two). ran is false when nothing was due.
// The caller must commit the event as it is, or the call's result is lost (a retry runs the
// call again, which the sandbox's at-most-once records answer).
func (c *Core) RunTool(ctx context.Context, in Input, toolUse wire.Event) (ev NewEvent, ran bool, err error) {
	d, err := readDue(in.turn())
	if err != nil {
		return NewEvent{}, false, err
	}
	i := slices.IndexFunc(d.run, func(tc ToolCall) bool { return tc.Event.ID == toolUse.ID })
	if i < 0 {
		if slices.Contains(d.waiting, toolUse.ID) || slices.ContainsFunc(d.reject, func(tc ToolCall) bool { return tc.Event.ID == toolUse.ID }) {
			return NewEvent{}, false, fmt.Errorf("execute %s: %w", toolUse.ID, ErrNotRunnable)
		}
		c.log.DebugContext(ctx, "tool call already answered or abandoned; nothing to do", "tool_use_id", toolUse.ID)
		return NewEvent{}, false, nil
	}
	call := d.run[i]
	res, err := c.run(ctx, in, call)
	if err != nil {
		return NewEvent{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return NewEvent{}, false, fmt.Errorf("execute %s %s: %w", call.Name, call.Event.ID, err)
	}
	ev, err = resultEvent(ids.New(ids.Event), call, res.content(), res.IsError)
	if err != nil {
		return NewEvent{}, false, err
	}
	return ev, true, nil
}

// run executes one runnable call where it runs: an MCP server, the web tools, or the sandbox.
func (c *Core) run(ctx context.Context, in Input, call ToolCall) (ToolResult, error) {
	switch {
	case call.MCPServer != "":
		if in.MCP == nil {
			return ToolResult{Text: fmt.Sprintf("The MCP server %q is not available to this session.", call.MCPServer), IsError: true}, nil
		}
		res, err := in.MCP.CallMCP(ctx, call.Event.ID, call.MCPServer, call.Name, call.Input)
		if err != nil {
			return ToolResult{}, fmt.Errorf("call MCP tool %s of %s (%s): %w", call.Name, call.MCPServer, call.Event.ID, err)
		}
		return res, nil
	case tools.IsWebTool(call.Name) && c.web != nil:
		cfg, _ := toolconfig.NewEffective(in.Agent.Tools).BuiltInConfig(call.Name)
		return c.web.RunWeb(ctx, call.Name, call.Input, cfg), nil
	}
	var sb sandbox.Sandbox
	if tools.NeedsSandbox(call.Name) {
		if in.Sandbox == nil {
			return ToolResult{}, fmt.Errorf("execute %s %s: no sandbox source for built-in tools", call.Name, call.Event.ID)
		}
		var err error
		if sb, err = in.Sandbox.Sandbox(ctx); err != nil {
			return ToolResult{}, fmt.Errorf("acquire sandbox for %s %s: %w", call.Name, call.Event.ID, err)
		}
	}
	return c.tools.RunBuiltin(ctx, sb, call.Event.ID, call.Name, call.Input), nil
}

// RejectTools emits an error agent.tool_result for every call the log says is denied (denied
// by confirmation, or evaluated deny), all in one Emit call. With none due it does nothing.
func (c *Core) RejectTools(ctx context.Context, in Input) error {
	d, err := readDue(in.turn())
	if err != nil || len(d.reject) == 0 {
		return err
	}
	evs := make([]NewEvent, 0, len(d.reject))
	for _, tc := range d.reject {
		ev, err := resultEvent(ids.New(ids.Event), tc, wire.NewTextContent(tc.RejectText), true)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	if _, err := in.Emitter.Emit(ctx, evs); err != nil {
		return fmt.Errorf("emit rejected tool results: %w", err)
	}
	return nil
}

// StopAtCap emits session.error tool_use_limit_reached_error (retry_status exhausted) if the
// log says the round cap is reached; the turn then ends with retries_exhausted. Otherwise it
// does nothing.
func (c *Core) StopAtCap(ctx context.Context, in Input) error {
	step, err := Next(in.turn())
	if err != nil || step.Kind != StepCap {
		return err
	}
	ev, err := newEvent(ids.New(ids.Event), wire.EventSessionError, wire.NewSessionErrorBody(
		wire.SessionErrorToolUseLimitReached,
		fmt.Sprintf("The agent reached the limit of %d model requests in one turn without finishing.", MaxRounds),
		wire.RetryStatusExhausted,
	))
	if err != nil {
		return err
	}
	if _, err := in.Emitter.Emit(ctx, []NewEvent{ev}); err != nil {
		return fmt.Errorf("emit round cap error: %w", err)
	}
	return nil
}
