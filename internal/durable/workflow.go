package durable

import (
	"errors"
	"fmt"
	"time"

	"github.com/managed-agents/managed-agents/internal/agent"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Signals a session workflow receives.
const (
	// SignalWake: client events were committed; look for work.
	SignalWake = "wake"
	// SignalInterrupt: a user.interrupt was committed; cancel what is in flight.
	SignalInterrupt = "interrupt"
)

// UpdateWake is the Workflow Update that wakes a waiting session, as SignalWake does. A
// waiting workflow takes it in a speculative workflow task, which Temporal persists once,
// together with the turn's first steps, where a signal is persisted on arrival and again when
// its workflow task starts: it saves a turn two of its three history writes. The price is
// that an update is durable only once accepted, and its caller waits until then (the end of
// the workflow task that accepts it); the waker is built for both (sessions.Waker), and the
// signal stays for interrupts, the sweep and runs started before the update.
const UpdateWake = "wake"

// WorkflowID is the id of a session's workflow: one per session, so all work on a session is
// serialized.
func WorkflowID(sessionID string) string { return "session/" + sessionID }

// SessionParams is the workflow input: ids and settings only, never conversation content.
type SessionParams struct {
	SessionID string
	Retry     ModelRetry
}

// ModelRetry is how transient model failures are retried (API.md §8.1: rescheduling).
type ModelRetry struct {
	// MaxRetries after the first attempt; then the turn is exhausted.
	MaxRetries int
	// InitialBackoff doubles per retry up to MaxBackoff; a model's retry-after wins if longer.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// DefaultModelRetry suits a real model API.
var DefaultModelRetry = ModelRetry{MaxRetries: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second}

// backoff is the wait before retry n (1-based).
func (r ModelRetry) backoff(n int, retryAfter time.Duration) time.Duration {
	d := r.InitialBackoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.MaxBackoff)
	return max(d, retryAfter)
}

// stepsBeforeContinueAsNew bounds the history of one workflow run: each step adds a few
// events, and a fresh run carries over nothing but the session id.
const stepsBeforeContinueAsNew = 500

// SessionWorkflow runs a session's turns for as long as the session lives. Every step is one
// activity that does its work, then the lifecycle bookkeeping (turns.Service.Advance), and returns
// the plan for the next step, so a turn costs one Temporal round trip per step. The
// standalone Advance runs only when the workflow has no plan: at the start, after a wait,
// after an interrupt and after a backoff. With nothing to do the workflow waits for a signal.
// All state is in the log, so the workflow holds only the plan and the model attempt counter.
func SessionWorkflow(ctx workflow.Context, p SessionParams) error {
	s := &sessionRun{
		p:         p,
		wake:      workflow.GetSignalChannel(ctx, SignalWake),
		woken:     workflow.NewBufferedChannel(ctx, 1),
		interrupt: workflow.GetSignalChannel(ctx, SignalInterrupt),
		trace:     stepTrace{SessionID: p.SessionID},
		// Runs started before steps became local activities keep running them as activities
		// until they continue as new: their histories must replay as they were written.
		localSteps: workflow.GetVersion(ctx, changeLocalSteps, workflow.DefaultVersion, 1) == 1,
	}
	// Registering the handler records nothing, so histories written before it replay as
	// they were. It must be in place before the first blocking call: the update that started
	// the run arrives with its first workflow task.
	if err := workflow.SetUpdateHandler(ctx, UpdateWake, s.wokenByUpdate); err != nil {
		return err
	}
	return s.run(ctx)
}

// changeLocalSteps is the workflow.GetVersion change id of running a turn's steps as local
// activities (version 1): a turn with no sandbox to create then runs in one workflow task,
// with no activity task, instead of one workflow task and one activity task per step.
const changeLocalSteps = "local-steps"

type sessionRun struct {
	p    SessionParams
	wake workflow.ReceiveChannel
	// woken holds an accepted UpdateWake until the workflow consumes it as it consumes a
	// wake signal. One is enough: a wake-up pending already makes an Advance run, which sees
	// everything a second one announces.
	woken        workflow.Channel
	interrupt    workflow.ReceiveChannel
	modelAttempt int
	// trace is what the steps carry to their spans (trace.go): the trace of the signal that
	// last woke the workflow from a wait, so a turn's steps stay in one trace.
	trace stepTrace
	// localSteps: the steps run as local activities (changeLocalSteps).
	localSteps bool
}

var acts *Activities // method values name the activities; the receiver is never used here

// A signal announces events committed before it was sent, so it may be consumed only right
// before an activity that ends with Advance is scheduled: that Advance sees the events. One
// that arrives while a step runs stays pending, so a wait that follows ends at once.
func (s *sessionRun) run(ctx workflow.Context) error {
	ctx = withStepTrace(workflow.WithActivityOptions(ctx, bookkeepingOptions), &s.trace)
	var plan *Plan // nil: Advance decides
	for steps := 0; ; steps++ {
		if plan == nil {
			s.drain(steps == 0)
			p, err := s.advance(ctx)
			if err != nil {
				if isSessionGone(err) {
					return nil
				}
				next, err := s.fail(ctx, err)
				if err != nil {
					return err
				}
				plan = next
				continue
			}
			plan = &p
		}
		switch {
		case plan.Kind.Waits():
			// A pending signal would be lost with this run: the wait below takes it first.
			if (steps >= stepsBeforeContinueAsNew || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) && !s.signalled() {
				return workflow.NewContinueAsNewError(ctx, SessionWorkflow, s.p)
			}
			s.modelAttempt = 0
			s.waitForSignal(ctx)
			plan = nil
		case s.interrupt.ReceiveAsync(nil):
			// Advance delivers the interrupt before any further step runs.
			plan = nil
		default:
			s.drainWakes()
			next, err := s.step(ctx, *plan)
			if err != nil {
				if isSessionGone(err) {
					return nil
				}
				if !temporal.IsCanceledError(err) {
					if next, err = s.fail(ctx, err); err != nil {
						return err
					}
				}
			}
			plan = next
		}
	}
}

// advance runs the standalone Advance. It runs as a local activity: in the worker that runs
// the workflow task, recorded in that task's completion, so it costs no round trip of its own.
func (s *sessionRun) advance(ctx workflow.Context) (Plan, error) {
	var plan Plan
	lctx := workflow.WithLocalActivityOptions(ctx, advanceOptions)
	err := workflow.ExecuteLocalActivity(lctx, acts.Advance, s.p.SessionID).Get(ctx, &plan)
	return plan, err
}

// step runs the step plan names and returns the plan after it, or nil when Advance must
// decide (after an interrupt or a backoff).
func (s *sessionRun) step(ctx workflow.Context, plan Plan) (*Plan, error) {
	switch plan.Kind {
	case agent.StepModel:
		return s.modelTurn(ctx)
	case agent.StepExecute:
		return s.executeTools(ctx, plan)
	case agent.StepReject:
		return s.bookkeeping(ctx, acts.RejectTools, s.p.SessionID)
	case agent.StepCap:
		return s.bookkeeping(ctx, acts.StopAtCap, s.p.SessionID)
	}
	return nil, temporal.NewNonRetryableApplicationError("unknown plan "+string(plan.Kind), errTypeUnknownPlan, nil)
}

// bookkeeping runs a short step activity that returns the next plan.
func (s *sessionRun) bookkeeping(ctx workflow.Context, activity any, arg any) (*Plan, error) {
	var plan Plan
	if err := s.execute(ctx, activity, arg).Get(ctx, &plan); err != nil {
		return nil, err
	}
	return &plan, nil
}

// execute runs a bookkeeping activity: local in runs with localSteps, so it costs no round
// trip through Temporal's matching of its own.
func (s *sessionRun) execute(ctx workflow.Context, activity any, arg any) workflow.Future {
	if s.localSteps {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localBookkeepingOptions), activity, arg)
	}
	return workflow.ExecuteActivity(ctx, activity, arg)
}

// fail handles a step (or Advance) that failed for good: a permanent error, or a transient
// one that outlasted its bounded retries. Leaving the session "running" would strand it: no
// step would run again, and delete and archive refuse a running session. A failure of the
// session itself (its sandbox is gone, the workflow and the log disagree) terminates it
// (API.md §8.1: fatal error → terminated). Any other failure belongs to one turn — a tool
// result, a model answer, the data of one step — so only the turn ends: session.error with
// retry_status exhausted, then idle with retries_exhausted (API.md §5.5), and the session
// takes the next message. If even that bookkeeping fails, the session is terminated. It
// returns the plan after the turn ended, nil with nil when the session is gone, or the cause
// when the session was terminated (the run then fails, as it did).
func (s *sessionRun) fail(ctx workflow.Context, cause error) (*Plan, error) {
	s.modelAttempt = 0
	if terminal(cause) {
		return nil, s.terminate(ctx, cause)
	}
	workflow.GetLogger(ctx).Warn("a step failed for good; ending the turn", "session_id", s.p.SessionID, "error", cause)
	plan, err := s.bookkeeping(ctx, acts.FailTurn, FailTurnInput{SessionID: s.p.SessionID, Message: failureMessage(cause)})
	if err == nil {
		return plan, nil
	}
	if isSessionGone(err) {
		// Nothing left to run: the next Advance sees it and ends the run.
		return nil, nil
	}
	return nil, s.terminate(ctx, errors.Join(cause, err))
}

// terminal reports whether a step's failure ends the session rather than the turn: the
// session's sandbox is gone or unusable, which no later turn can mend, or the workflow's plan
// names a call or a step the log does not have.
func terminal(err error) bool {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return false
	}
	switch appErr.Type() {
	case errTypeSandboxGone, errTypeSandboxProvider, errTypeUnknownToolCall, errTypeUnknownPlan:
		return true
	}
	return false
}

// failureMessage is what session.error says about a failed step: the application error's own
// message without Temporal's wrapping.
func failureMessage(cause error) string {
	var appErr *temporal.ApplicationError
	if errors.As(cause, &appErr) {
		return appErr.Message()
	}
	var actErr *temporal.ActivityError
	if errors.As(cause, &actErr) && errors.Unwrap(actErr) != nil {
		return errors.Unwrap(actErr).Error()
	}
	return cause.Error()
}

// terminate ends the session after a failure of the session itself, or of the bookkeeping
// that would end only the turn. Terminated tells the client why it stopped.
func (s *sessionRun) terminate(ctx workflow.Context, cause error) error {
	if err := s.execute(ctx, acts.Terminate, TerminateInput{SessionID: s.p.SessionID, Message: failureMessage(cause)}).Get(ctx, nil); err != nil {
		return err
	}
	return cause
}

// wokenByUpdate is UpdateWake's handler: it hands the wake-up to the workflow's loop, which
// consumes it as it does a wake signal.
func (s *sessionRun) wokenByUpdate(_ workflow.Context, sig WakeSignal) error {
	s.woken.SendAsync(sig) // false when one is pending already: that one does
	return nil
}

// drain consumes pending signals and wake updates: the Advance that follows sees everything
// they announced. At the start of a run (first) they woke it, so the steps take their trace.
func (s *sessionRun) drain(first bool) {
	for first {
		var sig WakeSignal
		if !s.woken.ReceiveAsync(&sig) && !s.wake.ReceiveAsync(&sig) && !s.interrupt.ReceiveAsync(&sig) {
			break
		}
		s.trace.adopt(sig)
	}
	s.drainWakes()
	for s.interrupt.ReceiveAsync(nil) {
	}
}

func (s *sessionRun) drainWakes() {
	for s.wake.ReceiveAsync(nil) {
	}
	for s.woken.ReceiveAsync(nil) {
	}
}

func (s *sessionRun) signalled() bool {
	return s.wake.Len() > 0 || s.woken.Len() > 0 || s.interrupt.Len() > 0
}

// waitForSignal waits for the signal that starts (or resumes) a turn, and takes its trace.
func (s *sessionRun) waitForSignal(ctx workflow.Context) {
	s.signals(ctx).Select(ctx)
}

// signals is a selector that takes the next wake signal, wake update or interrupt, and its
// trace; a caller may add more to wait for.
func (s *sessionRun) signals(ctx workflow.Context) workflow.Selector {
	receive := func(c workflow.ReceiveChannel, _ bool) {
		var sig WakeSignal
		c.Receive(ctx, &sig)
		s.trace.adopt(sig)
	}
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(s.wake, receive)
	sel.AddReceive(s.woken, receive)
	sel.AddReceive(s.interrupt, receive)
	return sel
}

// cancellable runs one step activity and cancels it if an interrupt arrives first. It returns
// the activity's plan, or nil with the activity's error (a canceled error after an
// interrupt). A step that finished although it was interrupted returns no plan either: it
// was made before the interrupt was delivered. A local step learns of an interrupt from the
// worker (InterruptWatch) before the workflow does, and says so with an Interrupted error:
// nil, nil, so Advance delivers it.
//
// When this cancel stops a local step, its future resolves at once: the SDK answers a
// cancelled local activity with ErrCanceled as soon as the activity's context is done,
// without waiting for the function to return, and a local activity has no
// WaitForCancellation. So the step may still be writing when the Advance after it delivers the
// interrupt. Waiting for it here is not possible; the log takes care of it instead: that
// Advance closes the model request in flight before it delivers the interrupt, and the step's
// own late close is dropped (turns.turnTx.closeRequest).
func (s *sessionRun) cancellable(ctx workflow.Context, activity any, arg any) (*Plan, error) {
	actx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	var fut workflow.Future
	if s.localSteps {
		fut = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(actx, localStepOptions), activity, arg)
	} else {
		fut = workflow.ExecuteActivity(workflow.WithActivityOptions(actx, stepOptions), activity, arg)
	}
	var (
		plan        Plan
		err         error
		done        bool
		interrupted bool
	)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(fut, func(f workflow.Future) { err, done = f.Get(ctx, &plan), true })
	sel.AddReceive(s.interrupt, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		interrupted = true
		cancel()
	})
	for !done {
		sel.Select(ctx)
	}
	if isInterrupted(err) {
		return nil, nil
	}
	if err != nil || interrupted {
		return nil, err
	}
	return &plan, nil
}

// modelTurn runs one model call. Transient model failures reschedule the session and back
// off; the Advance after the backoff marks it running again and the call is retried with the
// next attempt number. Permanent failures, or too many retries, exhaust the turn.
func (s *sessionRun) modelTurn(ctx workflow.Context) (*Plan, error) {
	s.modelAttempt++
	plan, err := s.cancellable(ctx, acts.ModelTurn, ModelTurnInput{SessionID: s.p.SessionID, Attempt: s.modelAttempt})
	if err == nil {
		s.modelAttempt = 0
		return plan, nil
	}
	failure, ok := modelFailureOf(err)
	if !ok {
		// Interrupted (or failed for good): the next model call belongs to a new turn.
		s.modelAttempt = 0
		return nil, err
	}
	if failure.Retryable && s.modelAttempt <= s.p.Retry.MaxRetries {
		if err := s.execute(ctx, acts.Reschedule, RescheduleInput{SessionID: s.p.SessionID, Failure: failure}).Get(ctx, nil); err != nil {
			return nil, err
		}
		wait := s.p.Retry.backoff(s.modelAttempt, failure.RetryAfter)
		if s.sleepUnlessInterrupted(ctx, wait) {
			s.modelAttempt = 0
		}
		return nil, nil
	}
	s.modelAttempt = 0
	return s.bookkeeping(ctx, acts.Exhaust, RescheduleInput{SessionID: s.p.SessionID, Failure: failure})
}

// sleepUnlessInterrupted waits d or until an interrupt arrives, and reports the interrupt.
func (s *sessionRun) sleepUnlessInterrupted(ctx workflow.Context, d time.Duration) (interrupted bool) {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, d), func(workflow.Future) {})
	sel.AddReceive(s.interrupt, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		interrupted = true
	})
	sel.Select(ctx)
	return interrupted
}

// executeTools runs the first call of plan; the plan ToolCall returns lists the rest. A
// session's first sandbox is created by AcquireSandbox before the call.
func (s *sessionRun) executeTools(ctx workflow.Context, plan Plan) (*Plan, error) {
	if len(plan.ToolUseIDs) == 0 {
		if len(plan.Delegated) > 0 {
			return s.awaitWorker(ctx, plan)
		}
		return nil, nil
	}
	if plan.NeedsSandbox {
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, sandboxOptions), acts.AcquireSandbox, s.p.SessionID).Get(ctx, nil); err != nil {
			return nil, err
		}
	}
	return s.cancellable(ctx, acts.ToolCall, ToolCallInput{SessionID: s.p.SessionID, ToolUseID: plan.ToolUseIDs[0]})
}

// awaitsWorker reports whether the plan only waits for a self-hosted worker's results.
func (p *Plan) awaitsWorker() bool {
	return p.Kind == agent.StepExecute && len(p.ToolUseIDs) == 0 && len(p.Delegated) > 0
}

// workerRecheck is how often a wait for a self-hosted worker offers the session's work again:
// an item its worker stopped without answering (it crashed after its lease ran out, it was
// interrupted) is replaced within this long.
const workerRecheck = 30 * time.Second

// awaitWorker waits for the results of calls a self-hosted environment's worker runs
// (plan.Delegated). The session stays running, as on the hosted service. It offers the
// session's work (an idempotent activity), then waits for a signal (the worker's result, an
// interrupt, a message) or workerRecheck, after which Advance decides again; past the plan's
// deadline the turn ends with a session.error naming the call, never a session running
// forever.
func (s *sessionRun) awaitWorker(ctx workflow.Context, _ Plan) (*Plan, error) {
	// The offer first: it says whether a worker holds the work, which moves the deadline.
	next, err := s.bookkeeping(ctx, acts.OfferWork, s.p.SessionID)
	if err != nil {
		return nil, err
	}
	if !next.awaitsWorker() {
		return next, nil
	}
	plan := *next
	now := workflow.Now(ctx)
	if !now.Before(plan.WorkerDeadline) {
		msg := fmt.Sprintf("no environment worker answered tool call %s in time: check that a worker polls this self-hosted environment "+
			"(docs/self-hosted-environments.md)", plan.Delegated[0])
		return s.bookkeeping(ctx, acts.AbandonDelegated, AbandonInput{SessionID: s.p.SessionID, CallIDs: plan.Delegated, Message: msg})
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := s.signals(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, min(workerRecheck, plan.WorkerDeadline.Sub(now))), func(workflow.Future) {})
	sel.Select(ctx)
	return nil, nil
}

// TeardownWorkflow is the delete of a session with a sandbox after the API fenced it
// (sessions.BeginDelete): it destroys the sandbox and removes its binding, then removes the
// session (FinishDelete), then tells the session's run, if one waits for a signal, so it sees
// the session is gone and ends. Callers may wait for it or not: a controller's finalizer only
// starts it and later checks that the session is gone.
func TeardownWorkflow(ctx workflow.Context, sessionID string) error {
	ctx = withStepTrace(ctx, &stepTrace{SessionID: sessionID})
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, sandboxOptions), acts.Teardown, sessionID).Get(ctx, nil); err != nil {
		return err
	}
	ctx = workflow.WithActivityOptions(ctx, bookkeepingOptions)
	if err := workflow.ExecuteActivity(ctx, acts.FinishDelete, sessionID).Get(ctx, nil); err != nil {
		return err
	}
	// A session without a run has nothing to notify: the failed signal is expected then.
	if err := workflow.SignalExternalWorkflow(ctx, WorkflowID(sessionID), "", SignalWake, nil).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Debug("no run of the deleted session to notify", "session_id", sessionID, "error", err)
	}
	return nil
}

// Activity options. Step activities heartbeat so a dead worker is noticed within seconds and
// interrupts reach them. Every activity retries what may heal (connection, timeout, worker
// or Temporal failures; each is idempotent against the log) with backoff, but a bounded
// number of times: an error misjudged as transient must still end (the workflow then ends
// the turn, see sessionRun.fail). Permanent errors are non-retryable and fail at once.
// maxAttempts at this backoff spans about three minutes, longer than a database restart.
const maxAttempts = 25

var (
	retryBounded = &temporal.RetryPolicy{
		InitialInterval:        100 * time.Millisecond,
		BackoffCoefficient:     2,
		MaximumInterval:        10 * time.Second,
		MaximumAttempts:        maxAttempts,
		NonRetryableErrorTypes: []string{errTypeSessionGone, errTypeModel, errTypePermanent},
	}
	// stepTimeout bounds one step of a healthy worker. A model step may stream an answer of
	// the model's whole output limit (128,000 tokens on the Opus 5 family: over half an hour
	// at typical speeds), and the client cuts only a silent stream; a dead worker is noticed by
	// its heartbeats (or the workflow task's timeout), not by this bound.
	stepTimeout        = time.Hour
	bookkeepingOptions = workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retryBounded}
	// A local activity's retries end at its schedule-to-close timeout, which defaults to
	// one start-to-close: give Advance the time its maxAttempts take, as the others have.
	advanceOptions = workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 5 * time.Minute, RetryPolicy: retryBounded}
	// localBookkeepingOptions are bookkeepingOptions for a local activity.
	localBookkeepingOptions = advanceOptions
	// localStepOptions are stepOptions for a local activity. It has no heartbeat: while it
	// runs the SDK keeps the workflow task alive (it completes it and takes a new one before
	// the task's timeout), a dead worker is noticed at the task's timeout, and an interrupt
	// reaches it through InterruptWatch, or at the next such task. Its retries, with
	// retryBounded's backoff, end at the schedule-to-close timeout.
	localStepOptions = workflow.LocalActivityOptions{StartToCloseTimeout: stepTimeout, ScheduleToCloseTimeout: 2 * stepTimeout, RetryPolicy: retryBounded}
	stepOptions      = workflow.ActivityOptions{
		StartToCloseTimeout: stepTimeout,
		// A few heartbeat intervals: one late heartbeat must not fail a healthy step.
		HeartbeatTimeout:    5 * time.Second,
		WaitForCancellation: true,
		RetryPolicy:         retryBounded,
	}
	// sandboxOptions are for creating and destroying a sandbox: a provider may take minutes
	// (pulling an image, scheduling a pod), so the timeout is long and liveness comes from
	// heartbeats; a retry after a lost attempt adopts what it made (pending binding first).
	sandboxOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         retryBounded,
	}
)

func isInterrupted(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == errTypeInterrupted
}

func isSessionGone(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == errTypeSessionGone
}

func modelFailureOf(err error) (ModelFailure, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != errTypeModel {
		return ModelFailure{}, false
	}
	var f ModelFailure
	if appErr.Details(&f) != nil {
		return ModelFailure{}, false
	}
	return f, true
}
