package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/tracing"
)

// Runner starts and signals session workflows; it is the sessions service's Runner.
type Runner struct {
	Client client.Client
	// TaskQueue defaults to TaskQueue; deployments (and test suites) that share one Temporal
	// namespace between databases need one queue each.
	TaskQueue string
	Retry     ModelRetry
	Logger    *slog.Logger
	// Tracer traces wake-ups; the signal carries the span's context to the turn's steps
	// (trace.go). nil traces nothing.
	Tracer trace.TracerProvider
}

// Wake wakes the session's workflow, starting it if it is not running. A wake-up is a
// Workflow Update (UpdateWake, UpdateWithStart), which costs Temporal one history write per
// turn instead of three, and returns once the workflow has taken it: at the end of the
// workflow task that takes it, which runs the turn's first local steps, so the call may last
// as long as they do (a few seconds with a real model, bounded by the workflow task's
// heartbeat). An interrupt is a signal (SignalWithStart): it is durable on arrival and never
// waits behind a step. Either way the wake-up carries the trace context of ctx's span (the
// request that committed the events), so the steps it starts continue that trace.
func (r *Runner) Wake(ctx context.Context, sessionID string, interrupt bool) (err error) {
	ctx, span := tracing.Start(tracing.WithSession(ctx, sessionID), tracing.Tracer(r.Tracer), "wake session",
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attribute.Bool("managed_agents.interrupt", interrupt)))
	defer func() { tracing.End(span, err) }()
	if interrupt {
		return r.signal(ctx, sessionID, SignalInterrupt)
	}
	start := r.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:        WorkflowID(sessionID),
		TaskQueue: r.queue(),
		// The session's run, if one is running, takes the update; else a new run starts.
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, SessionWorkflow, SessionParams{SessionID: sessionID, Retry: r.Retry})
	// Completed, not accepted: the handler completes in the workflow task that accepts it, so
	// it costs no wait, and a rejection (a worker without the handler, during a rolling
	// deploy) comes back from Get as an error, to be retried, instead of passing for a wake-up.
	h, err := r.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   WorkflowID(sessionID),
			UpdateName:   UpdateWake,
			Args:         []any{WakeSignal{Trace: tracing.Inject(ctx)}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("wake session workflow: %w", err)
	}
	return nil
}

// signal sends a wake or interrupt signal, starting the run if none is running.
func (r *Runner) signal(ctx context.Context, sessionID, signal string) error {
	_, err := r.Client.SignalWithStartWorkflow(ctx, WorkflowID(sessionID), signal, WakeSignal{Trace: tracing.Inject(ctx)},
		client.StartWorkflowOptions{ID: WorkflowID(sessionID), TaskQueue: r.queue()},
		SessionWorkflow, SessionParams{SessionID: sessionID, Retry: r.Retry})
	if err != nil {
		return fmt.Errorf("signal session workflow: %w", err)
	}
	return nil
}

// Signaller wakes sessions with the wake signal rather than the update: durable on arrival
// and never waiting for the workflow, for callers that wake many sessions one after another
// (the workers' sweep, turns.WakeStale).
type Signaller struct{ Runner *Runner }

// Wake signals the session's workflow, starting it if it is not running.
func (s Signaller) Wake(ctx context.Context, sessionID string, interrupt bool) error {
	signal := SignalWake
	if interrupt {
		signal = SignalInterrupt
	}
	return s.Runner.signal(ctx, sessionID, signal)
}

// StartTeardown starts the session's teardown workflow (TeardownWorkflow: destroy the sandbox,
// then remove the session) and returns without waiting for it. A teardown already running is
// joined, not started twice: the workflow id is the session's.
func (r *Runner) StartTeardown(ctx context.Context, sessionID string) error {
	_, err := r.startTeardown(ctx, sessionID)
	return err
}

// Teardown runs the teardown workflow and waits for it.
func (r *Runner) Teardown(ctx context.Context, sessionID string) error {
	run, err := r.startTeardown(ctx, sessionID)
	if err != nil {
		return err
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	return nil
}

func (r *Runner) startTeardown(ctx context.Context, sessionID string) (client.WorkflowRun, error) {
	// ExecuteWorkflow returns the running teardown of the same id instead of failing.
	run, err := r.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: TeardownWorkflowID(sessionID), TaskQueue: r.queue()},
		TeardownWorkflow, sessionID)
	if err != nil {
		return nil, fmt.Errorf("start teardown: %w", err)
	}
	return run, nil
}

// TeardownWorkflowID is the id of a session's teardown workflow.
func TeardownWorkflowID(sessionID string) string { return "teardown/" + sessionID }

// Forget wakes the session's workflow, if one runs, so it sees the session is gone and ends.
func (r *Runner) Forget(ctx context.Context, sessionID string) {
	err := r.Client.SignalWorkflow(ctx, WorkflowID(sessionID), "", SignalWake, nil)
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		r.Logger.WarnContext(ctx, "could not signal the workflow of a deleted session", "session_id", sessionID, "error", err)
	}
}

func (r *Runner) queue() string {
	if r.TaskQueue == "" {
		return TaskQueue
	}
	return r.TaskQueue
}
