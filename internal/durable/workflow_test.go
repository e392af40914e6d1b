package durable

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/turns"
)

const testSession = "sesn_test"

// nilActs names activities for the mocks, as the workflow does.
var nilActs *Activities

// fixture runs SessionWorkflow in the SDK's test environment with every activity mocked.
// Advance and every step that succeeds answer with the next of plans, in order, and report the
// session gone once they run out, which ends the workflow. Every activity call is logged in
// order, e.g. "ModelTurn#2" or "ToolCall:a".
type fixture struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	// modelTurn and toolCall run before the default (succeed at once) when set; an error
	// they return is the step's.
	modelTurn func(ctx context.Context, in ModelTurnInput) error
	toolCall  func(ctx context.Context, in ToolCallInput) error
	// onAdvance runs inside Advance when set.
	onAdvance func()
	// stepErr, when set, is asked first by every activity mock with the activity's name
	// ("Advance", "ModelTurn", "ToolCall", "RejectTools", "StopAtCap", "AcquireSandbox", ...);
	// an error it returns is that attempt's.
	stepErr func(activity string) error

	mu            sync.Mutex
	plans         []Plan
	calls         []string
	advanceAt     []time.Time
	timers        []time.Duration
	failures      map[string][]ModelFailure
	canceledTypes []string
	// started and canceled are activity ids.
	started  map[string]bool
	canceled []string
}

func newFixture(t *testing.T, plans ...Plan) *fixture {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger())
	f := &fixture{t: t, env: suite.NewTestWorkflowEnvironment(), plans: plans, failures: map[string][]ModelFailure{}, started: map[string]bool{}}
	f.env.SetTestTimeout(time.Minute)
	f.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.timers = append(f.timers, d)
	})
	f.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.canceledTypes = append(f.canceledTypes, info.ActivityType.Name)
		f.canceled = append(f.canceled, info.ActivityID)
	})
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.started[info.ActivityID] = true
	})
	// The steps run as local activities (changeLocalSteps), which have listeners of their own.
	f.env.SetOnLocalActivityCanceledListener(func(info *activity.Info) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.canceledTypes = append(f.canceledTypes, info.ActivityType.Name)
		f.canceled = append(f.canceled, info.ActivityID)
	})
	f.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.started[info.ActivityID] = true
	})
	f.env.OnActivity(nilActs.Advance, mock.Anything, mock.Anything).Return(f.advance)
	f.env.OnActivity(nilActs.ModelTurn, mock.Anything, mock.Anything).Return(func(ctx context.Context, in ModelTurnInput) (Plan, error) {
		f.log(fmt.Sprintf("ModelTurn#%d", in.Attempt))
		if err := f.injected("ModelTurn"); err != nil {
			return Plan{}, err
		}
		if f.modelTurn != nil {
			if err := f.modelTurn(ctx, in); err != nil {
				return Plan{}, err
			}
		}
		return f.next()
	})
	f.env.OnActivity(nilActs.ToolCall, mock.Anything, mock.Anything).Return(func(ctx context.Context, in ToolCallInput) (Plan, error) {
		f.log("ToolCall:" + in.ToolUseID)
		if err := f.injected("ToolCall"); err != nil {
			return Plan{}, err
		}
		if f.toolCall != nil {
			if err := f.toolCall(ctx, in); err != nil {
				return Plan{}, err
			}
		}
		return f.next()
	})
	f.env.OnActivity(nilActs.AcquireSandbox, mock.Anything, mock.Anything).Return(func(context.Context, string) error {
		f.log("AcquireSandbox")
		return f.injected("AcquireSandbox")
	})
	f.env.OnActivity(nilActs.RejectTools, mock.Anything, mock.Anything).Return(func(context.Context, string) (Plan, error) {
		f.log("RejectTools")
		if err := f.injected("RejectTools"); err != nil {
			return Plan{}, err
		}
		return f.next()
	})
	f.env.OnActivity(nilActs.StopAtCap, mock.Anything, mock.Anything).Return(func(context.Context, string) (Plan, error) {
		f.log("StopAtCap")
		if err := f.injected("StopAtCap"); err != nil {
			return Plan{}, err
		}
		return f.next()
	})
	f.env.OnActivity(nilActs.Reschedule, mock.Anything, mock.Anything).Return(func(_ context.Context, in RescheduleInput) error {
		f.logFailure("Reschedule", in.Failure)
		return nil
	})
	f.env.OnActivity(nilActs.Exhaust, mock.Anything, mock.Anything).Return(func(_ context.Context, in RescheduleInput) (Plan, error) {
		f.logFailure("Exhaust", in.Failure)
		return f.next()
	})
	f.env.OnActivity(nilActs.FailTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in FailTurnInput) (Plan, error) {
		require.Equal(f.t, testSession, in.SessionID)
		f.log("FailTurn: " + in.Message)
		if err := f.injected("FailTurn"); err != nil {
			return Plan{}, err
		}
		return f.next()
	})
	f.env.OnActivity(nilActs.Terminate, mock.Anything, mock.Anything).Return(func(_ context.Context, in TerminateInput) error {
		require.Equal(f.t, testSession, in.SessionID)
		f.log("Terminate: " + in.Message)
		return nil
	})
	return f
}

func (f *fixture) advance(_ context.Context, sessionID string) (Plan, error) {
	require.Equal(f.t, testSession, sessionID)
	f.mu.Lock()
	f.calls = append(f.calls, "Advance")
	f.advanceAt = append(f.advanceAt, f.env.Now())
	f.mu.Unlock()
	if f.onAdvance != nil {
		f.onAdvance()
	}
	if err := f.injected("Advance"); err != nil {
		return Plan{}, err
	}
	return f.next()
}

func (f *fixture) injected(activity string) error {
	if f.stepErr == nil {
		return nil
	}
	return f.stepErr(activity)
}

// next is the plan Advance or a step answers with: the next of plans, or the session is gone.
func (f *fixture) next() (Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.plans) == 0 {
		return Plan{}, activityError(turns.ErrSessionGone)
	}
	p := f.plans[0]
	f.plans = f.plans[1:]
	return p, nil
}

func (f *fixture) log(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fixture) logFailure(call string, failure ModelFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	f.failures[call] = append(f.failures[call], failure)
}

// run executes the workflow to its end and returns its error.
func (f *fixture) run(retry ModelRetry) error {
	f.t.Helper()
	f.env.ExecuteWorkflow(SessionWorkflow, SessionParams{SessionID: testSession, Retry: retry})
	require.True(f.t, f.env.IsWorkflowCompleted(), "the workflow is still blocked")
	return f.env.GetWorkflowError()
}

// wakeUpdate names the wake update (UpdateWake) among signal names in these tests.
const wakeUpdate = "update:" + UpdateWake

// wakeByUpdate wakes the run with the wake update (UpdateWake) and checks it is accepted.
// The test environment takes an update only on its own goroutine (not from an activity's, as
// it takes a signal), so the tests send it from a delayed callback.
func (f *fixture) wakeByUpdate() {
	f.env.UpdateWorkflow(UpdateWake, "", &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { f.t.Errorf("wake update rejected: %v", err) },
		OnComplete: func(_ any, err error) {
			if err != nil {
				f.t.Errorf("wake update failed: %v", err)
			}
		},
	}, WakeSignal{})
}

// wakeAfter sends a wake signal d after the start (test clock).
func (f *fixture) wakeAfter(d time.Duration) {
	f.env.RegisterDelayedCallback(func() { f.env.SignalWorkflow(SignalWake, nil) }, d)
}

func (f *fixture) snapshot() (calls []string, timers []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...), append([]time.Duration(nil), f.timers...)
}

// modelError is the error ModelTurn returns for a model failure (activities.go).
func modelError(f ModelFailure) error {
	return temporal.NewApplicationErrorWithOptions(f.Message, errTypeModel, temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{f}})
}

var (
	overloaded = ModelFailure{Kind: "overloaded", Status: 529, Message: "overloaded", Retryable: true}
	invalid    = ModelFailure{Kind: "invalid", Status: 400, Message: "bad request", Retryable: false}
	testRetry  = ModelRetry{MaxRetries: 3, InitialBackoff: time.Second, MaxBackoff: 3 * time.Second}
)

func TestSessionWorkflowRunsEachPlan(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plans []Plan
		want  []string
	}{
		{name: "session gone at once", want: []string{"Advance"}},
		{name: "model turn", plans: []Plan{{Kind: agent.StepModel}},
			want: []string{"Advance", "ModelTurn#1"}},
		{name: "a step's plan runs without another Advance", plans: []Plan{{Kind: agent.StepModel}, {Kind: agent.StepModel}},
			want: []string{"Advance", "ModelTurn#1", "ModelTurn#1"}},
		{name: "tools with a new sandbox", plans: []Plan{
			{Kind: agent.StepExecute, ToolUseIDs: []string{"a", "b", "c"}, NeedsSandbox: true},
			{Kind: agent.StepExecute, ToolUseIDs: []string{"b", "c"}},
			{Kind: agent.StepExecute, ToolUseIDs: []string{"c"}},
		}, want: []string{"Advance", "AcquireSandbox", "ToolCall:a", "ToolCall:b", "ToolCall:c"}},
		{name: "tools without a new sandbox", plans: []Plan{
			{Kind: agent.StepExecute, ToolUseIDs: []string{"b", "a"}},
			{Kind: agent.StepExecute, ToolUseIDs: []string{"a"}},
		}, want: []string{"Advance", "ToolCall:b", "ToolCall:a"}},
		{name: "sandbox acquired only when the plan says so", plans: []Plan{
			{Kind: agent.StepExecute, ToolUseIDs: []string{"a"}, NeedsSandbox: true},
			{Kind: agent.StepModel},
			{Kind: agent.StepExecute, ToolUseIDs: []string{"b"}},
		}, want: []string{"Advance", "AcquireSandbox", "ToolCall:a", "ModelTurn#1", "ToolCall:b"}},
		{name: "reject", plans: []Plan{{Kind: agent.StepReject}, {Kind: agent.StepModel}},
			want: []string{"Advance", "RejectTools", "ModelTurn#1"}},
		{name: "round cap", plans: []Plan{{Kind: agent.StepCap}}, want: []string{"Advance", "StopAtCap"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.plans...)
			require.NoError(t, f.run(testRetry))
			calls, timers := f.snapshot()
			require.Equal(t, tc.want, calls)
			require.Empty(t, timers)
		})
	}
}

func TestSessionWorkflowWaitsForSignal(t *testing.T) {
	t.Parallel()
	for _, signal := range []string{SignalWake, SignalInterrupt} {
		t.Run(signal, func(t *testing.T) {
			t.Parallel()
			// The model turn's plan says wait.
			f := newFixture(t, Plan{Kind: agent.StepModel}, Plan{Kind: agent.StepEnd})
			start := f.env.Now()
			f.env.RegisterDelayedCallback(func() { f.env.SignalWorkflow(signal, nil) }, time.Hour)
			require.NoError(t, f.run(testRetry))
			calls, _ := f.snapshot()
			require.Equal(t, []string{"Advance", "ModelTurn#1", "Advance"}, calls)
			// Only the signal made it look again.
			require.False(t, f.advanceAt[1].Before(start.Add(time.Hour)), "advanced at %v, signal at %v", f.advanceAt[1], start.Add(time.Hour))
		})
	}
}

func TestSessionWorkflowModelFailures(t *testing.T) {
	t.Parallel()
	withRetryAfter := overloaded
	withRetryAfter.RetryAfter = 5 * time.Second
	cases := []struct {
		name    string
		failure ModelFailure
		// failCalls: how many ModelTurn calls fail; models: how many model plans Advance and
		// the steps give.
		failCalls, models int
		wantCalls         []string
		wantTimers        []time.Duration
	}{
		{
			name: "recovers after two retries", failure: overloaded, failCalls: 2, models: 3,
			wantCalls: []string{"Advance", "ModelTurn#1", "Reschedule", "Advance", "ModelTurn#2", "Reschedule",
				"Advance", "ModelTurn#3"},
			wantTimers: []time.Duration{time.Second, 2 * time.Second},
		},
		{
			name: "backoff doubles up to the maximum", failure: overloaded, failCalls: 3, models: 4,
			wantCalls: []string{"Advance", "ModelTurn#1", "Reschedule", "Advance", "ModelTurn#2", "Reschedule",
				"Advance", "ModelTurn#3", "Reschedule", "Advance", "ModelTurn#4"},
			wantTimers: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
		},
		{
			name: "a longer retry-after wins", failure: withRetryAfter, failCalls: 1, models: 2,
			wantCalls:  []string{"Advance", "ModelTurn#1", "Reschedule", "Advance", "ModelTurn#2"},
			wantTimers: []time.Duration{5 * time.Second},
		},
		{
			// MaxRetries 3: attempts 1–4, then the turn is exhausted; the next turn (Exhaust's
			// plan) starts at 1.
			name: "exhausted after the last retry", failure: overloaded, failCalls: 4, models: 5,
			wantCalls: []string{"Advance", "ModelTurn#1", "Reschedule", "Advance", "ModelTurn#2", "Reschedule",
				"Advance", "ModelTurn#3", "Reschedule", "Advance", "ModelTurn#4", "Exhaust", "ModelTurn#1"},
			wantTimers: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
		},
		{
			name: "non-retryable exhausts at once", failure: invalid, failCalls: 1, models: 2,
			wantCalls: []string{"Advance", "ModelTurn#1", "Exhaust", "ModelTurn#1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans := make([]Plan, tc.models)
			for i := range plans {
				plans[i] = Plan{Kind: agent.StepModel}
			}
			f := newFixture(t, plans...)
			var mu sync.Mutex
			calls := 0
			f.modelTurn = func(context.Context, ModelTurnInput) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if calls <= tc.failCalls {
					return modelError(tc.failure)
				}
				return nil
			}
			require.NoError(t, f.run(testRetry))
			got, timers := f.snapshot()
			require.Equal(t, tc.wantCalls, got)
			require.Equal(t, tc.wantTimers, timers)
			// The failure reaches the bookkeeping activities unchanged.
			for _, fs := range f.failures {
				for _, failure := range fs {
					require.Equal(t, tc.failure, failure)
				}
			}
		})
	}
}

func TestSessionWorkflowInterruptEndsBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Plan{Kind: agent.StepModel})
	start := f.env.Now()
	f.modelTurn = func(context.Context, ModelTurnInput) error { return modelError(overloaded) }
	f.env.RegisterDelayedCallback(func() { f.env.SignalWorkflow(SignalInterrupt, nil) }, time.Minute)
	require.NoError(t, f.run(ModelRetry{MaxRetries: 3, InitialBackoff: time.Hour, MaxBackoff: time.Hour}))
	calls, timers := f.snapshot()
	require.Equal(t, []string{"Advance", "ModelTurn#1", "Reschedule", "Advance"}, calls)
	require.Equal(t, []time.Duration{time.Hour}, timers)
	require.True(t, f.advanceAt[1].Before(start.Add(time.Hour)), "the interrupt, not the backoff timer, ended the wait (advanced at %v)", f.advanceAt[1])
}

// blockUntilCanceled is a step that runs until its context is canceled, then closes
// stopped. It interrupts itself once it runs, so the interrupt surely arrives while it is in
// flight. The test environment cancels an activity's context through its heartbeat, as a real
// worker does.
func blockUntilCanceled(f *fixture, stopped chan<- error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		f.env.SignalWorkflow(SignalInterrupt, nil)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-ctx.Done():
				stopped <- ctx.Err()
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
}

func TestSessionWorkflowInterruptCancelsStep(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		plan      Plan
		block     func(f *fixture, stopped chan<- error)
		wantCalls []string
		canceled  string
	}{
		{
			name: "model turn", plan: Plan{Kind: agent.StepModel},
			block: func(f *fixture, stopped chan<- error) {
				wait := blockUntilCanceled(f, stopped)
				f.modelTurn = func(ctx context.Context, _ ModelTurnInput) error { return wait(ctx) }
			},
			wantCalls: []string{"Advance", "ModelTurn#1", "Advance"},
			canceled:  "ModelTurn",
		},
		{
			name: "tool call", plan: Plan{Kind: agent.StepExecute, ToolUseIDs: []string{"a", "b"}},
			block: func(f *fixture, stopped chan<- error) {
				wait := blockUntilCanceled(f, stopped)
				f.toolCall = func(ctx context.Context, _ ToolCallInput) error { return wait(ctx) }
			},
			// b never starts: the turn ends and Advance decides what is next.
			wantCalls: []string{"Advance", "ToolCall:a", "Advance"},
			canceled:  "ToolCall",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.plan)
			stopped := make(chan error, 1)
			tc.block(f, stopped)
			require.NoError(t, f.run(testRetry))
			calls, _ := f.snapshot()
			require.Equal(t, tc.wantCalls, calls)
			f.mu.Lock()
			// One step was canceled; the test environment names a mocked local activity after
			// its mock function, so which one is told by the step that saw the cancellation.
			require.Len(t, f.canceledTypes, 1, "the workflow canceled the step")
			f.mu.Unlock()
			// The step itself (the blocked fake of tc.canceled) saw the cancellation (a guard,
			// not a timing assertion).
			select {
			case err := <-stopped:
				require.ErrorIs(t, err, context.Canceled)
			case <-time.After(30 * time.Second):
				t.Fatal("the step's context was never canceled")
			}
		})
	}
}

func TestSessionWorkflowEndsWhenSessionGoneInStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Plan{Kind: agent.StepModel}, Plan{Kind: agent.StepModel})
	f.modelTurn = func(context.Context, ModelTurnInput) error { return activityError(turns.ErrSessionGone) }
	require.NoError(t, f.run(testRetry))
	calls, _ := f.snapshot()
	require.Equal(t, []string{"Advance", "ModelTurn#1"}, calls, "a step that finds the session gone ends the workflow")
}

func TestSessionWorkflowFailsOnUnexpectedStepError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Plan{Kind: agent.StepExecute, ToolUseIDs: []string{"a"}})
	f.toolCall = func(context.Context, ToolCallInput) error {
		return temporal.NewNonRetryableApplicationError("tool call a is not in the log", "UnknownToolCall", nil)
	}
	err := f.run(testRetry)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, "UnknownToolCall", appErr.Type())
	calls, _ := f.snapshot()
	require.Equal(t, []string{"Advance", "ToolCall:a", "Terminate: tool call a is not in the log"}, calls,
		"a step that fails for good terminates the session before the workflow fails")
}

func TestSessionWorkflowContinuesAsNewWhenWaiting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		models int
		want   bool
	}{
		{name: "at the step limit", models: stepsBeforeContinueAsNew, want: true},
		{name: "one step before the limit", models: stepsBeforeContinueAsNew - 1, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans := make([]Plan, tc.models, tc.models+1)
			for i := range plans {
				plans[i] = Plan{Kind: agent.StepModel}
			}
			f := newFixture(t, append(plans, Plan{Kind: agent.StepEnd})...)
			if !tc.want {
				f.wakeAfter(time.Hour)
			}
			params := SessionParams{SessionID: testSession, Retry: testRetry}
			err := f.run(params.Retry)
			if !tc.want {
				// It waited, was woken, and found the session gone.
				require.NoError(t, err)
				calls, _ := f.snapshot()
				require.Equal(t, "Advance", calls[len(calls)-1])
				return
			}
			var can *workflow.ContinueAsNewError
			require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
			require.Equal(t, "SessionWorkflow", can.WorkflowType.Name)
			var carried SessionParams
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &carried))
			require.Equal(t, params, carried, "the next run carries the parameters and nothing else")
		})
	}
}

func TestSessionWorkflowContinuesAsNewOnlyWithoutPendingSignals(t *testing.T) {
	t.Parallel()
	// The last model turn of the run is woken while it runs and answers wait: the wake must
	// reach an Advance of this run, not be dropped with it.
	plans := make([]Plan, stepsBeforeContinueAsNew, stepsBeforeContinueAsNew+2)
	for i := range plans {
		plans[i] = Plan{Kind: agent.StepModel}
	}
	f := newFixture(t, append(plans, Plan{Kind: agent.StepEnd}, Plan{Kind: agent.StepEnd})...)
	var mu sync.Mutex
	turns := 0
	f.modelTurn = func(context.Context, ModelTurnInput) error {
		mu.Lock()
		defer mu.Unlock()
		if turns++; turns == stepsBeforeContinueAsNew {
			f.env.SignalWorkflow(SignalWake, nil)
		}
		return nil
	}
	err := f.run(testRetry)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
	calls, _ := f.snapshot()
	require.Len(t, calls, stepsBeforeContinueAsNew+2)
	require.Equal(t, []string{"ModelTurn#1", "Advance"}, calls[len(calls)-2:], "the wake was covered by an Advance before the run ended")
}

func TestSessionWorkflowSignalsAndStepPlans(t *testing.T) {
	t.Parallel()
	// A signal announces events committed before it was sent. One consumed before a step is
	// scheduled is covered by the Advance that ends the step; one that arrives while the step
	// runs may not be, so it must make the workflow look again instead of waiting.
	cases := []struct {
		name string
		// onAdvance and onModelTurn signal the workflow from inside those activities.
		onAdvance, onModelTurn []string
		// plans: Advance's, then the model turn's.
		plans     []Plan
		wantCalls []string
		// lookedEarly: the second Advance ran before the wake an hour in.
		lookedEarly bool
		// hourWake wakes the waiting workflow an hour in: SignalWake unless set.
		hourWake string
	}{
		{
			name: "wakes before the step are covered by it", onAdvance: []string{SignalWake, SignalWake},
			plans:     []Plan{{Kind: agent.StepModel}, {Kind: agent.StepEnd}},
			wantCalls: []string{"Advance", "ModelTurn#1", "Advance"},
		},
		{
			name: "wakes during the step make it look again", onModelTurn: []string{SignalWake, SignalWake},
			plans:     []Plan{{Kind: agent.StepModel}, {Kind: agent.StepEnd}, {Kind: agent.StepEnd}},
			wantCalls: []string{"Advance", "ModelTurn#1", "Advance", "Advance"}, lookedEarly: true,
		},
		{
			// The update's form of a wake-up wakes a waiting run as the signal does. (The test
			// environment delivers an update only between steps, at a moment of its choosing;
			// updates that arrive while a step runs are tested on a real server.)
			name:  "a wake update wakes the waiting run",
			plans: []Plan{{Kind: agent.StepModel}, {Kind: agent.StepEnd}}, hourWake: wakeUpdate,
			wantCalls: []string{"Advance", "ModelTurn#1", "Advance"},
		},
		{
			// Canceled, or finished with a plan made before the interrupt was delivered: either
			// way Advance delivers it before any further step runs.
			name: "an interrupt during the step", onModelTurn: []string{SignalInterrupt},
			plans:     []Plan{{Kind: agent.StepModel}, {Kind: agent.StepModel}, {Kind: agent.StepEnd}},
			wantCalls: []string{"Advance", "ModelTurn#1", "Advance", "Advance"}, lookedEarly: true,
		},
		{
			// An interrupt pending when a step is due goes to Advance first: no step is
			// scheduled only to be canceled.
			name: "an interrupt before the step", onAdvance: []string{SignalInterrupt},
			plans:     []Plan{{Kind: agent.StepModel}, {Kind: agent.StepEnd}},
			wantCalls: []string{"Advance", "Advance", "Advance"}, lookedEarly: true,
		},
	}
	signal := func(f *fixture, signals []string) {
		for _, sig := range signals {
			f.env.SignalWorkflow(sig, nil)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.plans...)
			advanced := 0
			f.onAdvance = func() {
				if advanced++; advanced == 1 {
					signal(f, tc.onAdvance)
				}
			}
			f.modelTurn = func(context.Context, ModelTurnInput) error {
				signal(f, tc.onModelTurn)
				return nil
			}
			start := f.env.Now()
			hourWake := cmp.Or(tc.hourWake, SignalWake)
			f.env.RegisterDelayedCallback(func() {
				if hourWake == wakeUpdate {
					f.wakeByUpdate()
				} else {
					f.env.SignalWorkflow(hourWake, nil)
				}
			}, time.Hour)
			require.NoError(t, f.run(testRetry))
			calls, _ := f.snapshot()
			require.Equal(t, tc.wantCalls, calls)
			require.Equal(t, tc.lookedEarly, f.advanceAt[1].Before(start.Add(time.Hour)), "second Advance at %v", f.advanceAt[1])
			f.mu.Lock()
			for _, id := range f.canceled {
				require.True(t, f.started[id], "activity %s was scheduled only to be canceled", id)
			}
			f.mu.Unlock()
			// Whatever woke it early was consumed by one Advance: only the wake an hour in
			// made it look once more.
			last := f.advanceAt[len(f.advanceAt)-1]
			require.False(t, last.Before(start.Add(time.Hour)), "last Advance at %v", last)
		})
	}
}

func TestTeardownWorkflow(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger())
	env := suite.NewTestWorkflowEnvironment()
	var got []string
	env.OnActivity(nilActs.Teardown, mock.Anything, mock.Anything).Return(func(_ context.Context, id string) error {
		got = append(got, id)
		return nil
	})
	var steps []string
	env.OnActivity(nilActs.FinishDelete, mock.Anything, mock.Anything).Return(func(_ context.Context, id string) error {
		steps = append(steps, "finish "+id)
		return nil
	})
	env.OnSignalExternalWorkflow(mock.Anything, WorkflowID(testSession), "", SignalWake, mock.Anything).Return(func(_, _, _, _ string, _ any) error {
		steps = append(steps, "signal")
		return nil
	})
	env.ExecuteWorkflow(TeardownWorkflow, testSession)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{testSession}, got)
	require.Equal(t, []string{"finish " + testSession, "signal"}, steps, "the row goes after the sandbox, then the run is told")
}

// A step of any kind that fails for good ends the turn (FailTurn: session.error, then idle)
// instead of retrying forever: a permanent error after one attempt, an error misjudged as
// transient after maxAttempts. Before, a permanent failure of an append was retried without
// end and the session stayed running.
func TestSessionWorkflowEndsTheTurnWhenAStepFailsForGood(t *testing.T) {
	t.Parallel()
	permanent := func() error {
		return activityError(fmt.Errorf("emit model response: append events: %w",
			&pgconn.PgError{Severity: "ERROR", Code: "22P05", Message: "unsupported Unicode escape sequence"}))
	}
	const permanentMsg = "emit model response: append events: ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)"
	kinds := []struct {
		activity string
		plans    []Plan
		calls    []string // before FailTurn, with the failing activity last
	}{
		{"ModelTurn", []Plan{{Kind: agent.StepModel}}, []string{"Advance", "ModelTurn#1"}},
		{"ToolCall", []Plan{{Kind: agent.StepExecute, ToolUseIDs: []string{"a"}}}, []string{"Advance", "ToolCall:a"}},
		{"RejectTools", []Plan{{Kind: agent.StepReject}}, []string{"Advance", "RejectTools"}},
		{"StopAtCap", []Plan{{Kind: agent.StepCap}}, []string{"Advance", "StopAtCap"}},
		{"AcquireSandbox", []Plan{{Kind: agent.StepExecute, ToolUseIDs: []string{"a"}, NeedsSandbox: true}}, []string{"Advance", "AcquireSandbox"}},
		{"Advance", nil, []string{"Advance"}},
	}
	errs := []struct {
		name     string
		err      func() error
		attempts int
		msg      string
	}{
		{"permanent", permanent, 1, permanentMsg},
		{"misjudged as transient", func() error { return errors.New("flaky forever") }, maxAttempts, "flaky forever"},
	}
	for _, k := range kinds {
		for _, e := range errs {
			t.Run(k.activity+"/"+e.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, k.plans...)
				f.env.SetTestTimeout(10 * time.Minute)
				var mu sync.Mutex
				attempts := 0
				f.stepErr = func(activity string) error {
					mu.Lock()
					defer mu.Unlock()
					// The first Advance after FailTurn must see the session as it is then.
					if activity != k.activity || attempts == e.attempts {
						return nil
					}
					attempts++
					return e.err()
				}
				require.NoError(t, f.run(testRetry), "the turn ended and the session took no more work")
				calls, _ := f.snapshot()
				want := slices.Clone(k.calls[:len(k.calls)-1])
				for range e.attempts {
					want = append(want, k.calls[len(k.calls)-1])
				}
				// Retries of one activity keep its input (ModelTurn#1 each time: the model
				// attempt counter counts only the workflow's model-failure retries).
				require.Equal(t, append(want, "FailTurn: "+e.msg, "Advance"), calls)
			})
		}
	}
}

// If ending the turn fails too, the session is terminated: it never stays running.
func TestSessionWorkflowTerminatesWhenEndingTheTurnFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Plan{Kind: agent.StepReject})
	f.stepErr = func(activity string) error {
		switch activity {
		case "RejectTools":
			return activityError(&json.SyntaxError{Offset: 1})
		case "FailTurn":
			return activityError(&pgconn.PgError{Code: "23514", Message: "check"})
		}
		return nil
	}
	err := f.run(testRetry)
	require.Error(t, err)
	calls, _ := f.snapshot()
	require.Len(t, calls, 4)
	require.Equal(t, []string{"Advance", "RejectTools"}, calls[:2])
	require.True(t, strings.HasPrefix(calls[2], "FailTurn: "), calls[2])
	require.True(t, strings.HasPrefix(calls[3], "Terminate: "), calls[3])
}

func TestClassifyError(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("append events: %w", &pgconn.PgError{Code: code}) }
	cases := []struct {
		name string
		err  error
		want errorClass
	}{
		{"NUL in jsonb", pg("22P05"), errorPermanent},
		{"invalid json text", pg("22P02"), errorPermanent},
		{"not null violation", pg("23502"), errorPermanent},
		{"undefined table", pg("42P01"), errorPermanent},
		{"decode error", fmt.Errorf("decode body: %w", &json.SyntaxError{Offset: 3}), errorPermanent},
		{"type error", &json.UnmarshalTypeError{Value: "string", Type: reflect.TypeFor[int]()}, errorPermanent},
		{"serialization failure", pg("40001"), errorTransient},
		{"deadlock", pg("40P01"), errorTransient},
		{"connection", pg("08006"), errorTransient},
		{"admin shutdown", pg("57P01"), errorTransient},
		{"timeout", fmt.Errorf("x: %w", context.DeadlineExceeded), errorTransient},
		{"canceled", context.Canceled, errorTransient},
		{"unknown", errors.New("something"), errorTransient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, classifyError(tc.err))
			var appErr *temporal.ApplicationError
			got := activityError(tc.err)
			if tc.want == errorPermanent {
				require.ErrorAs(t, got, &appErr)
				require.True(t, appErr.NonRetryable())
				require.Equal(t, errTypePermanent, appErr.Type())
				return
			}
			require.False(t, errors.As(got, &appErr), "a transient error stays retryable")
		})
	}
}
