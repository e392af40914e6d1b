package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/mcpsession"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Application error types the workflow branches on.
const (
	errTypeSessionGone = "SessionGone"
	errTypeModel       = "ModelError"
	// Permanent sandbox failures: retrying cannot bring a destroyed sandbox back or make an
	// unknown provider appear.
	errTypeSandboxGone     = "SandboxGone"
	errTypeSandboxProvider = "SandboxProvider"
	// errTypeSandboxQuota: the workspace's sandbox quota refused a new sandbox. Retrying at
	// once would meet the same quota; the turn ends with session.error saying so, and the
	// session, unharmed, takes the next message.
	errTypeSandboxQuota = "SandboxQuota"
	// errTypePermanent: a step failed in a way no retry can heal (classifyError); the
	// workflow ends the turn with session.error instead of retrying it.
	errTypePermanent = "PermanentStepFailure"
	// The workflow and the log disagree: a plan names a call or a step kind the log does not
	// have. Retrying the same plan cannot help.
	errTypeUnknownToolCall = "UnknownToolCall"
	errTypeUnknownPlan     = "UnknownPlan"
	// errTypeInterrupted: a step running as a local activity stopped because its session was
	// interrupted (InterruptWatch); the workflow then lets Advance deliver the interrupt.
	errTypeInterrupted = "Interrupted"
)

// Plan is what Advance, and every step after its own work, answers: small, so workflow
// history stays small.
type Plan struct {
	// Kind is the planner's step kind; StepEnd and StepPark both mean the workflow waits for a
	// signal (StepKind.Waits).
	Kind agent.StepKind
	// ToolUseIDs are the calls StepExecute still has to run, in log order.
	ToolUseIDs []string
	// NeedsSandbox: a call needs a sandbox and the session has none bound yet, so
	// AcquireSandbox runs first. A bound sandbox is attached by ToolCall itself.
	NeedsSandbox bool
	// Delegated are the calls of a self-hosted session that its environment's worker runs
	// (docs/self-hosted-environments.md): the workflow offers the session's work and waits for
	// their results, until WorkerDeadline, after the calls ToolUseIDs names have run.
	Delegated      []string  `json:",omitempty"`
	WorkerDeadline time.Time `json:",omitzero"`
}

// SelfHostedWork hands the built-in sandbox calls of sessions on self-hosted environments to
// their environments' workers (workqueue.Service).
type SelfHostedWork interface {
	// SelfHosted reports whether the session's environment is self-hosted.
	SelfHosted(ctx context.Context, sessionID string) (bool, error)
	// OfferSession makes sure the session has a live work item for a worker to claim, and
	// reports whether a worker holds it now (its lease has not run out).
	OfferSession(ctx context.Context, sessionID string) (held bool, err error)
}

// InterruptWatch tells a step that its session was interrupted (turns.Interrupts): a step
// running as a local activity hears of it from the workflow only at the workflow's next task.
type InterruptWatch interface {
	Watch(sessionID string) (interrupted <-chan struct{}, stop func())
}

// MCPServers lists and calls the MCP servers of sessions (mcpsession.Connector).
type MCPServers interface {
	// List lists servers' tools for a turn; blocked, when set, fails them all unasked.
	List(ctx context.Context, sessionID string, servers []wire.MCPServer, blocked string) ([]agent.MCPServerTools, []mcpsession.Failure)
	// Caller calls the tools of one session's servers, each call at most once.
	Caller(sessionID string, servers []wire.MCPServer) agent.MCPCaller
}

// ModelTurnInput names one model call; Attempt counts retries of the same call (1 = first).
type ModelTurnInput struct {
	SessionID string
	Attempt   int
}

// ToolCallInput names one built-in call.
type ToolCallInput struct {
	SessionID string
	ToolUseID string
}

// RescheduleInput carries a model failure to record.
type RescheduleInput struct {
	SessionID string
	Failure   ModelFailure
}

// ModelFailure is a model error as the workflow sees it.
type ModelFailure struct {
	Kind       string
	Status     int
	Message    string
	Retryable  bool
	RetryAfter time.Duration
}

func (f ModelFailure) err() error {
	return &model.Error{Kind: model.ErrorKind(f.Kind), Status: f.Status, Message: f.Message}
}

// Activities are the steps of a session's turn. Each is idempotent against the event log.
type Activities struct {
	Turns *turns.Service
	Core  *agent.Core
	// Sandboxes owns the sessions' sandboxes: acquisition, reuse, re-attachment, teardown.
	Sandboxes *sandbox.Manager
	// Previews carries token previews to API processes; nil sends none.
	Previews stream.Hub
	// MCP lists and calls the sessions' MCP servers; nil offers no MCP tools.
	MCP    MCPServers
	Logger *slog.Logger
	// Tracer traces steps, tool calls and sandbox acquisitions (trace.go); nil traces nothing.
	Tracer trace.TracerProvider
	// Observer records tool calls (metrics); nil records nothing.
	Observer Observer
	// Interrupts stops a step running as a local activity when its session is interrupted;
	// nil leaves that to the workflow (at its next task, within seconds).
	Interrupts InterruptWatch
	// Work hands self-hosted sessions' calls to their workers; nil runs every call here.
	Work SelfHostedWork
	// WorkerTimeout bounds how long a delegated call waits for its worker's result
	// (DefaultWorkerTimeout when zero).
	WorkerTimeout time.Duration

	// facts keeps the sessions' sandbox facts for the model's preamble (harness.go).
	facts factsCache
}

// Advance does the lifecycle bookkeeping and returns the next step. The workflow runs it only
// when it has no plan: every step ends with the same bookkeeping (next) and returns the plan.
func (a *Activities) Advance(ctx context.Context, sessionID string) (Plan, error) {
	return a.next(ctx, sessionID)
}

// next is Advance's work: one turns.Service.Advance transaction, then the plan it implies.
func (a *Activities) next(ctx context.Context, sessionID string) (Plan, error) {
	turn, err := a.Turns.Advance(ctx, sessionID)
	if err != nil {
		return Plan{}, activityError(err)
	}
	return a.planOf(ctx, sessionID, turn)
}

// planOf is the plan of the step an Advance returned.
func (a *Activities) planOf(ctx context.Context, sessionID string, turn turns.Turn) (Plan, error) {
	if turn.Step.Kind == agent.StepModel && !slices.ContainsFunc(turn.History, isRequestStart) {
		a.offerAtTurnStart(ctx, sessionID)
	}
	if turn.Step.Kind == agent.StepExecute {
		return a.executePlan(ctx, sessionID, turn.Step.Calls, turn.History)
	}
	return Plan{Kind: turn.Step.Kind}, nil
}

func (a *Activities) executePlan(ctx context.Context, sessionID string, calls []agent.ToolCall, history []wire.Event) (Plan, error) {
	p := Plan{Kind: agent.StepExecute}
	delegate, err := a.delegates(ctx, sessionID, calls)
	if err != nil {
		return Plan{}, activityError(err)
	}
	needs := false
	var oldest time.Time
	for _, c := range calls {
		if delegate && c.NeedsSandbox() {
			p.Delegated = append(p.Delegated, c.Event.ID)
			if at := callTime(c.Event); oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
			continue
		}
		p.ToolUseIDs = append(p.ToolUseIDs, c.Event.ID)
		needs = needs || c.NeedsSandbox()
	}
	if len(p.Delegated) > 0 {
		p.WorkerDeadline = runnableSince(oldest, history).Add(a.workerTimeout())
	}
	if needs {
		bound, err := a.hasSandbox(ctx, sessionID)
		if err != nil {
			return Plan{}, activityError(err)
		}
		p.NeedsSandbox = !bound
	}
	return p, nil
}

func isRequestStart(ev wire.Event) bool { return ev.Type == wire.EventSpanModelRequestStart }

// offerAtTurnStart queues a self-hosted session's work when its turn starts (before its first
// model call), as the hosted service does for each run of a session: the worker claims it
// and is ready by the time the model asks for a tool, and it serves the custom tools it
// offers too. A failure is only logged: the wait for a delegated call offers again.
func (a *Activities) offerAtTurnStart(ctx context.Context, sessionID string) {
	if a.Work == nil {
		return
	}
	hosted, err := a.Work.SelfHosted(ctx, sessionID)
	if err == nil && hosted {
		_, err = a.Work.OfferSession(ctx, sessionID)
	}
	if err != nil && a.Logger != nil {
		a.Logger.WarnContext(ctx, "cannot offer the session's work at its turn's start", "session_id", sessionID, "error", err)
	}
}

// DefaultWorkerTimeout is Activities.WorkerTimeout's default.
const DefaultWorkerTimeout = 10 * time.Minute

func (a *Activities) workerTimeout() time.Duration {
	if a.WorkerTimeout > 0 {
		return a.WorkerTimeout
	}
	return DefaultWorkerTimeout
}

// delegates reports whether the session's sandbox calls among calls go to its environment's
// worker: there are some, and the environment is self-hosted.
func (a *Activities) delegates(ctx context.Context, sessionID string, calls []agent.ToolCall) (bool, error) {
	if a.Work == nil || !slices.ContainsFunc(calls, agent.ToolCall.NeedsSandbox) {
		return false, nil
	}
	return a.Work.SelfHosted(ctx, sessionID)
}

// runnableSince is when the delegated calls could first run: their call's time, or the latest
// resume of the turn (a confirmation that allowed them, an answer that woke a parked turn),
// whichever is later. A worker's wait counts from there, not from a call a user confirmed an
// hour after the model made it.
func runnableSince(call time.Time, history []wire.Event) time.Time {
	since := call
	for _, ev := range history {
		if ev.ProcessedAt == nil || (ev.Type != wire.EventSessionStatusRunning && ev.Type != wire.EventUserToolConfirmation) {
			continue
		}
		if ev.ProcessedAt.After(since) {
			since = *ev.ProcessedAt
		}
	}
	return since
}

// maxHeldWait bounds how long a worker that keeps its lease may take over delegated calls
// (several long calls in a row): past it the turn ends even though the worker heartbeats.
const maxHeldWait = time.Hour

// callTime is when a call entered the log: its wait for a worker counts from there.
func callTime(ev wire.Event) time.Time {
	if ev.ProcessedAt != nil {
		return *ev.ProcessedAt
	}
	return ev.CreatedAt
}

// OfferWork makes sure a self-hosted session has a live work item (idempotent), then returns
// the plan after an Advance: a step like any other, so a result that came in before it ran is
// seen, and the workflow waits only while the calls are still unanswered.
func (a *Activities) OfferWork(ctx context.Context, sessionID string) (Plan, error) {
	if a.Work == nil {
		return Plan{}, temporal.NewNonRetryableApplicationError("no work queue configured for delegated calls", errTypePermanent, nil)
	}
	held, err := a.Work.OfferSession(ctx, sessionID)
	if err != nil {
		return Plan{}, activityError(err)
	}
	plan, err := a.next(ctx, sessionID)
	if err != nil || !held || len(plan.Delegated) == 0 {
		return plan, err
	}
	// A worker holds the session's work and heartbeats: it is running the calls (the SDK's
	// runs one at a time, each up to its tool timeout), so the wait goes on, within
	// maxHeldWait of the plan's own deadline.
	extended := time.Now().Add(a.workerTimeout())
	if limit := plan.WorkerDeadline.Add(maxHeldWait); extended.After(limit) {
		extended = limit
	}
	if extended.After(plan.WorkerDeadline) {
		plan.WorkerDeadline = extended
	}
	return plan, nil
}

// hasSandbox reports whether the session has a ready sandbox binding (a pending one still
// needs AcquireSandbox to finish it).
func (a *Activities) hasSandbox(ctx context.Context, sessionID string) (bool, error) {
	return a.Sandboxes.Bound(ctx, sessionID)
}

// ModelTurn makes one model call and returns the plan after it. Model errors come back as
// non-retryable ModelError application errors carrying a ModelFailure: the workflow owns
// their retries.
func (a *Activities) ModelTurn(ctx context.Context, in ModelTurnInput) (Plan, error) {
	ctx, done := a.interruptible(ctx, in.SessionID)
	plan, err := a.modelTurn(ctx, in)
	return done(plan, err)
}

func (a *Activities) modelTurn(ctx context.Context, in ModelTurnInput) (Plan, error) {
	stop := heartbeat(ctx)
	defer stop()
	turn, err := a.Turns.LoadConversation(ctx, in.SessionID)
	if err != nil {
		return Plan{}, activityError(err)
	}
	markTurn(ctx, turn)
	if turn.Step.Kind == agent.StepModel && len(turn.Agent.MCPServers) > 0 && !turn.MCPListed {
		turn.MCPTools, err = a.listMCP(ctx, in.SessionID, turn)
		if errors.Is(err, turns.ErrTurnMoved) {
			return a.next(ctx, in.SessionID) // nothing of this attempt's history is current
		}
		if err != nil {
			return Plan{}, activityError(err)
		}
	}
	rin := a.input(in.SessionID, turn)
	if rin.Harness, err = a.harness(ctx, in.SessionID, turn); err != nil {
		return Plan{}, activityError(err)
	}
	// The response is committed with the Advance that follows it: one transaction, one
	// wake-up of the session's streams.
	rin.HoldResponse = true
	var sink *previewSink
	if a.Previews != nil {
		sink = newPreviewSink(ctx, a.Previews, a.Logger, in.SessionID, turn.History)
		rin.Previews, rin.Emitter = sink, observingEmitter{next: rin.Emitter, sink: sink}
	}
	res, err := a.Core.ModelTurn(model.WithAttempt(ctx, in.Attempt), rin)
	var me *model.Error
	if errors.As(err, &me) {
		f := ModelFailure{Kind: string(me.Kind), Status: me.Status, Message: me.Message, Retryable: me.Retryable(), RetryAfter: me.RetryAfter}
		return Plan{}, temporal.NewApplicationErrorWithOptions(me.Error(), errTypeModel, temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{f}})
	}
	if err != nil {
		return Plan{}, activityError(err)
	}
	if len(res.Held) == 0 {
		return a.next(ctx, in.SessionID)
	}
	if sink != nil {
		// Every preview ends before its event is in the log (previewSink.endAll).
		sink.endAll()
	}
	next, committed, err := a.commitHeld(ctx, in.SessionID, res.Held)
	if err != nil {
		return Plan{}, activityError(err)
	}
	// Custom tools run at the client: the model's asking is all the worker sees of them.
	for _, ev := range committed {
		if ev.Type == wire.EventAgentCustomToolUse {
			a.observer().ToolCallUnrun(ToolCustom, OutcomeDelegated)
		}
	}
	return a.planOf(ctx, in.SessionID, next)
}

// ToolCall runs one allowed built-in call, records its result and returns the plan after it.
// A sandbox the session has bound is attached here; AcquireSandbox only creates the first.
func (a *Activities) ToolCall(ctx context.Context, in ToolCallInput) (Plan, error) {
	ctx, done := a.interruptible(ctx, in.SessionID)
	plan, err := a.toolCall(ctx, in)
	return done(plan, err)
}

func (a *Activities) toolCall(ctx context.Context, in ToolCallInput) (Plan, error) {
	stop := heartbeat(ctx)
	defer stop()
	turn, err := a.Turns.LoadTurn(ctx, in.SessionID)
	if err != nil {
		return Plan{}, activityError(err)
	}
	var toolUse *wire.Event
	for i := range turn.History {
		if turn.History[i].ID == in.ToolUseID {
			toolUse = &turn.History[i]
		}
	}
	if toolUse == nil {
		return Plan{}, temporal.NewNonRetryableApplicationError("tool call "+in.ToolUseID+" is not in the log", errTypeUnknownToolCall, nil)
	}
	markTurn(ctx, turn)
	tctx, tool := a.startTool(ctx, *toolUse)
	start, outcome := time.Now(), ""
	seen := func(evs []wire.Event) {
		for _, ev := range evs {
			if id, isError, ok := resultOf(ev); ok && id == in.ToolUseID {
				outcome = OutcomeOK
				if isError {
					outcome = OutcomeError
				}
			}
		}
		tool.saw(evs)
	}
	tin := a.input(in.SessionID, turn)
	// A sandbox tool's result is committed with the Advance that follows it: one transaction,
	// one wake-up of the session's streams. A retry after that transaction failed runs the
	// call again, which the sandbox's at-most-once records answer with the recorded result.
	// Other calls' results are appended on their own: a web tool has no such record (a retry
	// would fetch again), and an MCP call's result that another attempt appended first
	// (ErrCallAnswered) must lose without failing the step.
	var (
		held  []agent.NewEvent
		next  turns.Turn
		label = toolLabel(*toolUse)
	)
	if (agent.ToolCall{Event: *toolUse, Name: label}).NeedsSandbox() {
		var ev agent.NewEvent
		var ran bool
		if ev, ran, err = a.Core.RunTool(tctx, tin, *toolUse); ran {
			held = []agent.NewEvent{ev}
		}
	} else {
		tin.Emitter = committedEmitter{next: tin.Emitter, seen: seen}
		err = a.Core.ExecuteTool(tctx, tin, *toolUse)
	}
	duration := time.Since(start)
	if len(held) > 0 {
		var committed []wire.Event
		if next, committed, err = a.commitHeld(ctx, in.SessionID, held); err == nil {
			seen(committed)
		}
	}
	tool.end(err)
	if outcome == "" && err != nil && !errors.Is(err, agent.ErrNotRunnable) && !errors.Is(err, turns.ErrCallAnswered) {
		outcome = OutcomeFailed
	}
	if outcome != "" { // else nothing ran: the call was answered or may not run
		a.observer().ToolCall(label, outcome, duration)
	}
	switch {
	case errors.Is(err, agent.ErrNotRunnable):
		// The log says it may not run (anymore): nothing to do.
	case errors.Is(err, turns.ErrCallAnswered):
		// Another attempt answered it first; this attempt's answer (kept with the claim) loses.
		a.Logger.WarnContext(ctx, "MCP call answered by another attempt; this attempt's answer is dropped", "session_id", in.SessionID, "tool_use_id", in.ToolUseID)
	case err != nil:
		return Plan{}, activityError(err)
	case len(held) > 0:
		return a.planOf(ctx, in.SessionID, next)
	case toolUse.Type == wire.EventAgentMCPToolUse:
		// The answer is in the log now; the copy kept for a retry is no longer needed.
		if ferr := a.Turns.ForgetMCPResult(ctx, in.SessionID, in.ToolUseID); ferr != nil {
			a.Logger.WarnContext(ctx, "kept MCP answer not dropped", "session_id", in.SessionID, "tool_use_id", in.ToolUseID, "error", ferr)
		}
	}
	return a.next(ctx, in.SessionID)
}

// RejectTools answers denied calls with error results and returns the plan after it.
func (a *Activities) RejectTools(ctx context.Context, sessionID string) (Plan, error) {
	turn, err := a.Turns.LoadTurn(ctx, sessionID)
	if err != nil {
		return Plan{}, activityError(err)
	}
	rin := a.input(sessionID, turn)
	rin.Emitter = committedEmitter{next: rin.Emitter, seen: func(evs []wire.Event) {
		for _, ev := range evs {
			id, _, ok := resultOf(ev)
			if i := slices.IndexFunc(turn.History, func(e wire.Event) bool { return e.ID == id }); ok && i >= 0 {
				a.observer().ToolCallUnrun(toolLabel(turn.History[i]), OutcomeRejected)
			}
		}
	}}
	// ErrCallAnswered: an overlapping attempt answered the rejected MCP calls first.
	if err := a.Core.RejectTools(ctx, rin); err != nil && !errors.Is(err, turns.ErrCallAnswered) {
		return Plan{}, activityError(err)
	}
	return a.next(ctx, sessionID)
}

// StopAtCap records the round cap and returns the plan after it (the turn's end).
func (a *Activities) StopAtCap(ctx context.Context, sessionID string) (Plan, error) {
	turn, err := a.Turns.LoadTurn(ctx, sessionID)
	if err != nil {
		return Plan{}, activityError(err)
	}
	if err := a.Core.StopAtCap(ctx, a.input(sessionID, turn)); err != nil {
		return Plan{}, activityError(err)
	}
	return a.next(ctx, sessionID)
}

// Reschedule records a transient model failure that will be retried. It returns no plan: the
// workflow backs off first, and the Advance after the backoff marks the session running.
func (a *Activities) Reschedule(ctx context.Context, in RescheduleInput) error {
	return activityError(a.Turns.Reschedule(ctx, in.SessionID, in.Failure.err()))
}

// Exhaust records that the turn's model failures are final and returns the plan after it
// (the turn closes with retries_exhausted).
func (a *Activities) Exhaust(ctx context.Context, in RescheduleInput) (Plan, error) {
	if err := a.Turns.Exhaust(ctx, in.SessionID, in.Failure.err()); err != nil {
		return Plan{}, activityError(err)
	}
	return a.next(ctx, in.SessionID)
}

// FailTurnInput names a session whose turn a step failed for good, and why.
type FailTurnInput struct {
	SessionID string
	Message   string
}

// FailTurn ends the current turn after a step failed for good (session.error, retry_status
// exhausted) and returns the plan after it: the Advance closes the turn idle with
// retries_exhausted, and the session takes new messages again.
func (a *Activities) FailTurn(ctx context.Context, in FailTurnInput) (Plan, error) {
	if err := a.Turns.FailTurn(ctx, in.SessionID, errors.New(in.Message)); err != nil {
		return Plan{}, activityError(err)
	}
	return a.next(ctx, in.SessionID)
}

// AbandonInput names the delegated calls of a session that no worker answered in time.
type AbandonInput struct {
	SessionID string
	CallIDs   []string
	Message   string
}

// AbandonDelegated ends the turn of delegated calls no worker answered in time
// (turns.Service.AbandonDelegated) and returns the plan after it.
func (a *Activities) AbandonDelegated(ctx context.Context, in AbandonInput) (Plan, error) {
	if err := a.Turns.AbandonDelegated(ctx, in.SessionID, in.CallIDs, in.Message); err != nil {
		return Plan{}, activityError(err)
	}
	return a.next(ctx, in.SessionID)
}

// TerminateInput names a session to end and why.
type TerminateInput struct {
	SessionID string
	Message   string
}

// Terminate ends the session after a fatal step failure.
func (a *Activities) Terminate(ctx context.Context, in TerminateInput) error {
	return a.Turns.Terminate(ctx, in.SessionID, in.Message)
}

// AcquireSandbox makes sure the session has a sandbox: the stored binding if there is one
// (attached again after a restart; a sandbox that is gone is an error, never silently
// replaced), else a new one, bound pending in PostgreSQL before it is created. It heartbeats:
// a create may take minutes, and a retry after a lost attempt adopts what that attempt made.
func (a *Activities) AcquireSandbox(ctx context.Context, sessionID string) error {
	stop := heartbeat(ctx)
	defer stop()
	err := a.traceSandbox(ctx, "sandbox.acquire", func(ctx context.Context) error {
		_, err := a.Sandboxes.Acquire(ctx, sessionID)
		return err
	})
	return activityError(sandboxError(err))
}

// Teardown destroys the session's sandbox through the provider its binding names and
// removes the binding.
func (a *Activities) Teardown(ctx context.Context, sessionID string) error {
	stop := heartbeat(ctx)
	defer stop()
	return sandboxError(a.Sandboxes.Teardown(ctx, sessionID))
}

func (a *Activities) input(sessionID string, turn turns.Turn) agent.Input {
	in := agent.Input{
		Agent:        turn.Agent,
		History:      turn.History,
		TurnStart:    turn.TurnStartSeq,
		Conversation: turn.Conversation,
		Projection:   turn.Projection,
		Emitter:      a.Turns.Emitter(sessionID),
		Sandbox: agent.SandboxFunc(func(ctx context.Context) (sb sandbox.Sandbox, err error) {
			err = a.traceSandbox(ctx, "sandbox.attach", func(ctx context.Context) (err error) {
				sb, err = a.Sandboxes.Sandbox(ctx, sessionID)
				return err
			})
			return sb, sandboxError(err)
		}),
		MCPTools: turn.MCPTools,
	}
	if a.MCP != nil && len(turn.Agent.MCPServers) > 0 {
		in.MCP = a.MCP.Caller(sessionID, turn.Agent.MCPServers)
	}
	return in
}

// listMCP lists the tools of the session's MCP servers for the current turn, the first time
// a model call of the turn needs them, and records the listing (and a session.error for each
// server that failed) so every later step of the turn offers the same tools. An environment
// with limited networking that does not allow MCP servers fails them all without a
// connection.
func (a *Activities) listMCP(ctx context.Context, sessionID string, turn turns.Turn) ([]agent.MCPServerTools, error) {
	var listing []agent.MCPServerTools
	var failures []turns.MCPFailure
	servers := agent.MCPServersToList(turn.Agent)
	switch {
	case len(servers) == 0:
	case a.MCP != nil:
		env, err := a.Turns.Sandboxes().Environment(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		var fs []mcpsession.Failure
		listing, fs = a.MCP.List(ctx, sessionID, servers, mcpBlocked(env))
		for _, f := range fs {
			failures = append(failures, turns.MCPFailure{Server: f.Server, Auth: f.Auth, Message: f.Message})
		}
	default:
		for _, s := range servers {
			failures = append(failures, turns.MCPFailure{Server: s.Name, Message: fmt.Sprintf("MCP server %q was not contacted: this worker runs no MCP connector", s.Name)})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err // an interrupt: record nothing, the listing is not the servers' answer
	}
	return a.Turns.RecordMCPListing(ctx, sessionID, turn.TurnStartSeq, listing, failures)
}

// mcpBlocked says why an environment keeps the worker from its agent's MCP servers, or "".
func mcpBlocked(env wire.EnvironmentConfig) string {
	n := env.Networking
	if n == nil || n.Type != sandbox.NetworkLimited || (n.AllowMCPServers != nil && *n.AllowMCPServers) {
		return ""
	}
	return "the environment's networking is limited and does not allow MCP servers (set networking.allow_mcp_servers)"
}

// sandboxError makes the permanent sandbox failures non-retryable, with their message: the
// session ends with a session.error saying why, and a teardown fails instead of retrying
// forever. A quota refusal ends only the turn.
func sandboxError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandbox.ErrQuota):
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypeSandboxQuota, nil)
	case errors.Is(err, sandbox.ErrGone):
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypeSandboxGone, nil)
	case errors.Is(err, sandbox.ErrUnknownProvider), errors.Is(err, sandbox.ErrForeignRef), errors.Is(err, sandbox.ErrInvalidRef),
		errors.Is(err, sandbox.ErrSetup):
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypeSandboxProvider, nil)
	}
	return err
}

// activityError marks errors the workflow must not retry. A non-retryable application error
// wrapped on its way up (the runtime adds context to a sandbox that is gone) is surfaced again:
// Temporal only sees the type of the error an activity returns. Errors classifyError finds
// permanent become non-retryable PermanentStepFailure errors; the rest stay retryable, within
// the bounded attempts of the activity's retry policy.
func activityError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, turns.ErrSessionGone) {
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypeSessionGone, nil)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if appErr.NonRetryable() && error(appErr) != err {
			return temporal.NewNonRetryableApplicationError(err.Error(), appErr.Type(), nil)
		}
		return err
	}
	if classifyError(err) == errorPermanent {
		return temporal.NewNonRetryableApplicationError(err.Error(), errTypePermanent, err)
	}
	return err
}

// errorClass says whether retrying a failed step can help.
type errorClass int

const (
	// errorTransient: the connection, a timeout, a serialization failure or deadlock, the
	// worker or Temporal; a retry may well succeed.
	errorTransient errorClass = iota
	// errorPermanent: the step's data or code is wrong; every retry fails the same way.
	errorPermanent
)

// classifyError sorts a step's error. Permanent: database errors turns.Permanent names
// (invalid data such as a NUL in jsonb, constraint violations, statement errors) and JSON
// that does not decode (a body in the log, a model's tool input); they would fail the same way
// on every attempt. Everything else (connection errors, timeouts, context cancellation,
// serialization failures, Temporal) counts as transient, and the bounded retry policy ends
// it too if it was misjudged.
func classifyError(err error) errorClass {
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		invalid   *json.InvalidUnmarshalError
		unsup     *json.UnsupportedValueError
		unsupType *json.UnsupportedTypeError
	)
	switch {
	case err == nil:
		return errorTransient
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorTransient
	case turns.Permanent(err),
		errors.As(err, &syntaxErr), errors.As(err, &typeErr), errors.As(err, &invalid),
		errors.As(err, &unsup), errors.As(err, &unsupType):
		return errorPermanent
	}
	return errorTransient
}

var errInterrupted = errors.New("the session was interrupted")

// interruptible makes a step running as a local activity stop when its session is
// interrupted: ctx is cancelled with errInterrupted, and done turns the step's answer into
// an Interrupted error (also when the step finished anyway: its plan was made before the
// interrupt was delivered, as the workflow's own cancellation treats it). A regular activity
// learns of interrupts through its heartbeats, so it is left as it is.
func (a *Activities) interruptible(ctx context.Context, sessionID string) (context.Context, func(Plan, error) (Plan, error)) {
	if a.Interrupts == nil || !activity.IsActivity(ctx) || !activity.GetInfo(ctx).IsLocalActivity {
		return ctx, func(p Plan, err error) (Plan, error) { return p, err }
	}
	interrupted, stopWatch := a.Interrupts.Watch(sessionID)
	ctx, cancel := context.WithCancelCause(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case <-interrupted:
			cancel(errInterrupted)
		case <-ctx.Done():
		}
	}()
	return ctx, func(p Plan, err error) (Plan, error) {
		stopWatch()
		wasInterrupted := errors.Is(context.Cause(ctx), errInterrupted)
		cancel(nil)
		<-watching
		if wasInterrupted {
			return Plan{}, temporal.NewNonRetryableApplicationError(errInterrupted.Error(), errTypeInterrupted, nil)
		}
		return p, err
	}
}

// commitHeld commits a step's held events (a model response, a sandbox tool's result) with
// the Advance they lead to. The step's work is done by then, so an interrupt arriving now must
// not throw it away: the commit runs to its end (bounded by commitTimeout) although the
// interrupt cancels the step, and the Advance after the step delivers the interrupt.
func (a *Activities) commitHeld(ctx context.Context, sessionID string, held []agent.NewEvent) (turns.Turn, []wire.Event, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	return a.Turns.AdvanceAppending(ctx, sessionID, held)
}

// commitTimeout bounds commitHeld.
const commitTimeout = 30 * time.Second

// heartbeatInterval is how often a running activity records a heartbeat: a dead worker is
// noticed within the heartbeat timeout, and an interrupt reaches a step within about this
// long. Every one to two seconds keeps 1,000 concurrent steps at a few hundred RPCs a second.
const heartbeatInterval = time.Second

// heartbeat reports liveness while a step runs, so a dead worker is noticed within the
// heartbeat timeout and cancellation (interrupts) reaches the step.
func heartbeat(ctx context.Context) (stop func()) {
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).IsLocalActivity {
		// A local activity's heartbeats go nowhere (the SDK drops them): no ticker for it.
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
