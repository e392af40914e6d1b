package durable_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/managed-agents/managed-agents/internal/durable"
)

// historiesDir holds workflow histories recorded from real sessions (TestRecordHistories,
// integration build). Replaying them against today's workflow code catches changes that would
// break workflows already running in production.
const historiesDir = "testdata/histories"

// recordedScenarios names the histories that must be checked in, one per file
// <name>.json. TestRecordHistories writes them all.
var recordedScenarios = []string{
	"plain_turn",
	"builtin_tool",
	"confirmation_allow",
	"custom_tool",
	"interrupt_sleep",
	"rescheduling_recovers",
	"rescheduling_exhausted",
	"round_cap",
	"deleted_session",
	"teardown",
}

func historyPath(name string) string { return filepath.Join(historiesDir, name+".json") }

func quietTemporalLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}

// newReplayer registers the workflows as the worker does (durable.NewWorker), with
// sessionWorkflow under SessionWorkflow's name.
func newReplayer(sessionWorkflow any) worker.WorkflowReplayer {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(sessionWorkflow, sdkworkflow.RegisterOptions{Name: "SessionWorkflow"})
	r.RegisterWorkflow(durable.TeardownWorkflow)
	return r
}

func loadHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, h.Events, path)
	return h
}

// sessionHistories are the recorded histories of SessionWorkflow.
func sessionHistories(t *testing.T) map[string]*historypb.History {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	out := map[string]*historypb.History{}
	for _, path := range files {
		h := loadHistory(t, path)
		if h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() == "SessionWorkflow" {
			out[path] = h
		}
	}
	require.NotEmpty(t, out)
	return out
}

func countEvents(h *historypb.History, typ enumspb.EventType) int {
	n := 0
	for _, ev := range h.Events {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}

func TestRecordedHistoriesAreCheckedIn(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	for _, want := range recordedScenarios {
		require.Contains(t, names, want, "record it: MANAGED_AGENT_RECORD_HISTORIES=1 go test -tags integration -run Record ./internal/durable/")
	}
}

// TestRecordedHistoriesWakeByUpdate: the histories under the scenarios' names are today's
// (woken by the wake update, durable.UpdateWake); those of runs woken by the signal, which
// still run wherever they started before the update, keep their own files (signal_wake_*).
func TestRecordedHistoriesWakeByUpdate(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"plain_turn", "builtin_tool"} {
		h := loadHistory(t, historyPath(name))
		require.Positive(t, countEvents(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), name)
		require.Zero(t, countEvents(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), name)
		old := loadHistory(t, historyPath("signal_wake_"+name))
		require.Positive(t, countEvents(old, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), "signal_wake_"+name)
	}
}

func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			err := newReplayer(durable.SessionWorkflow).ReplayWorkflowHistoryFromJSONFile(quietTemporalLogger(), path)
			require.NoError(t, err, "the workflow code no longer replays %s: a change is not backward compatible "+
				"(version it with durable.GetVersion) or the history must be re-recorded", path)
		})
	}
}

// Changed copies of SessionWorkflow: each would break running workflows if deployed as is.
func extraActivityFirst(ctx sdkworkflow.Context, p durable.SessionParams) error {
	actx := sdkworkflow.WithActivityOptions(ctx, sdkworkflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := sdkworkflow.ExecuteActivity(actx, "AcquireSandbox", p.SessionID).Get(ctx, nil); err != nil {
		return err
	}
	return durable.SessionWorkflow(ctx, p)
}

func extraTimerFirst(ctx sdkworkflow.Context, p durable.SessionParams) error {
	if err := sdkworkflow.Sleep(ctx, time.Second); err != nil {
		return err
	}
	return durable.SessionWorkflow(ctx, p)
}

func TestReplayDetectsChangedWorkflow(t *testing.T) {
	t.Parallel()
	changes := []struct {
		name string
		fn   any
	}{
		{name: "extra activity first", fn: extraActivityFirst},
		{name: "extra timer first", fn: extraTimerFirst},
	}
	histories := sessionHistories(t)
	for _, change := range changes {
		for path := range histories {
			t.Run(change.name+"/"+filepath.Base(path), func(t *testing.T) {
				t.Parallel()
				err := newReplayer(change.fn).ReplayWorkflowHistoryFromJSONFile(quietTemporalLogger(), path)
				require.Error(t, err)
				// TMPRL1100 is the SDK's code for every kind of non-determinism it detects.
				require.Contains(t, err.Error(), "[TMPRL1100]")
			})
		}
	}
}

func TestReplayRejectsForeignHistory(t *testing.T) {
	t.Parallel()
	// A history of a workflow type this worker does not register cannot be replayed: the
	// replay test fails loudly instead of passing vacuously.
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(durable.TeardownWorkflow)
	err := r.ReplayWorkflowHistoryFromJSONFile(quietTemporalLogger(), historyPath("plain_turn"))
	require.Error(t, err)
}

// skipTimers makes a changed build of the workflows: every timer fires at once without being
// scheduled, as if the rescheduling backoff had been removed. Only histories that reached a
// backoff can tell.
type skipTimers struct {
	interceptor.WorkerInterceptorBase
}

func (skipTimers) InterceptWorkflow(_ sdkworkflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &skipTimersInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type skipTimersInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *skipTimersInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&skipTimersOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type skipTimersOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *skipTimersOutbound) NewTimer(ctx sdkworkflow.Context, _ time.Duration) sdkworkflow.Future {
	f, settable := sdkworkflow.NewFuture(ctx)
	settable.Set(nil, nil)
	return f
}

func TestReplayDetectsDroppedBackoff(t *testing.T) {
	t.Parallel()
	histories := sessionHistories(t)
	withTimers := 0
	for path, h := range histories {
		timers := countEvents(h, enumspb.EVENT_TYPE_TIMER_STARTED)
		if timers > 0 {
			withTimers++
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{&skipTimers{}}})
			require.NoError(t, err)
			r.RegisterWorkflow(durable.SessionWorkflow)
			err = r.ReplayWorkflowHistoryFromJSONFile(quietTemporalLogger(), path)
			if timers == 0 {
				require.NoError(t, err, "no backoff in this history: the change is invisible to it")
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "[TMPRL1100]")
		})
	}
	require.Positive(t, withTimers, "some recorded history must reach a rescheduling backoff")
}
