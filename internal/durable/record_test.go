//go:build integration

package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// recordEnv enables TestRecordHistories: recording rewrites the checked-in histories, so it
// only runs when asked.
const recordEnv = "MANAGED_AGENT_RECORD_HISTORIES"

// recordRetry keeps the rescheduling scenarios quick; MaxRetries 3 means four attempts.
var recordRetry = durable.ModelRetry{MaxRetries: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

const (
	allowTools  = `[{"type":"agent_toolset_20260401"}]`
	askTools    = `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"always_ask"}}}]`
	customTools = `[{"type":"custom","name":"get_weather","description":"Weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
)

func userMessage(text string) string {
	b, _ := json.Marshal(map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": text}}})
	return string(b)
}

// scenario is one recorded session: drive runs it through the sessions service, want lists
// activities its history must have scheduled (at least that often), so a recording that
// missed the code path it is named after fails.
type scenario struct {
	name   string
	tools  string
	drive  func(s *recordedSession)
	want   map[string]int
	timers int
	cancel bool
}

var scenarios = []scenario{
	{
		name: "plain_turn", tools: `[]`,
		drive: func(s *recordedSession) {
			s.send(userMessage("hello there"))
			s.requireIdle("end_turn")
		},
		want: map[string]int{"ModelTurn": 1},
	},
	{
		name: "builtin_tool", tools: allowTools,
		drive: func(s *recordedSession) {
			s.send(userMessage(`/tool bash {"command":"echo made > f.txt && cat f.txt"}`))
			s.requireIdle("end_turn")
		},
		want: map[string]int{"AcquireSandbox": 1, "ToolCall": 1, "ModelTurn": 2},
	},
	{
		name: "confirmation_allow", tools: askTools,
		drive: func(s *recordedSession) {
			s.send(userMessage(`/tool bash {"command":"echo allowed"}`))
			use := s.requireIdle("requires_action").find(s.t, wire.EventAgentToolUse)
			s.send(fmt.Sprintf(`{"type":"user.tool_confirmation","tool_use_id":%q,"result":"allow"}`, use.ID))
			s.requireIdle("end_turn")
		},
		want: map[string]int{"AcquireSandbox": 1, "ToolCall": 1, "ModelTurn": 2},
	},
	{
		name: "custom_tool", tools: customTools,
		drive: func(s *recordedSession) {
			s.send(userMessage(`/tool get_weather {"city":"Paris"}`))
			use := s.requireIdle("requires_action").find(s.t, wire.EventAgentCustomToolUse)
			s.send(fmt.Sprintf(`{"type":"user.custom_tool_result","custom_tool_use_id":%q,"content":[{"type":"text","text":"sunny"}]}`, use.ID))
			s.requireIdle("end_turn")
		},
		want: map[string]int{"ModelTurn": 2},
	},
	{
		name: "interrupt_sleep", tools: `[]`,
		drive: func(s *recordedSession) {
			s.send(userMessage("/sleep 30000"))
			s.until("span.model_request_start")
			s.send(`{"type":"user.interrupt"}`)
			s.requireIdle("end_turn")
		},
		want:   map[string]int{"ModelTurn": 1},
		cancel: true,
	},
	{
		name: "rescheduling_recovers", tools: `[]`,
		drive: func(s *recordedSession) {
			s.send(userMessage("/fail overloaded 2\nhi"))
			s.requireIdle("end_turn")
		},
		want:   map[string]int{"ModelTurn": 3, "Reschedule": 2},
		timers: 2,
	},
	{
		name: "rescheduling_exhausted", tools: `[]`,
		drive: func(s *recordedSession) {
			s.send(userMessage("/fail overloaded 99\nhi"))
			s.requireIdle("retries_exhausted")
		},
		want:   map[string]int{"ModelTurn": 4, "Reschedule": 3, "Exhaust": 1},
		timers: 3,
	},
	{
		name: "round_cap", tools: allowTools,
		drive: func(s *recordedSession) {
			s.send(userMessage(`/loop bash {"command":"true"}`))
			s.requireIdle("retries_exhausted")
		},
		want: map[string]int{"AcquireSandbox": 1, "ToolCall": 20, "StopAtCap": 1},
	},
}

// TestRecordHistories runs real sessions (PostgreSQL, the Temporal dev server, a worker with
// the fake model and the local sandbox) and writes each session workflow's history to
// testdata/histories for TestReplayRecordedHistories.
func TestRecordHistories(t *testing.T) {
	if os.Getenv(recordEnv) == "" {
		t.Skipf("recording rewrites %s; to record: %s=1 go test -tags integration -run Record ./internal/durable/", historiesDir, recordEnv)
	}
	r := newRecorder(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := r.newSession(t, sc.tools)
			sc.drive(s)
			h := r.save(t, durable.WorkflowID(s.id), sc.name)
			acts := scheduledActivities(h)
			for _, ev := range h.Events {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					require.Equal(t, "AcquireSandbox", a.GetActivityType().GetName(), "a step ran as an activity, not a local one")
				}
			}
			for name, n := range sc.want {
				require.GreaterOrEqual(t, acts[name], n, "%s scheduled %v", name, acts)
			}
			require.Equal(t, sc.timers, countEvents(h, enumspb.EVENT_TYPE_TIMER_STARTED), "backoff timers")
			require.Positive(t, countEvents(h, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), "woken by the wake update")
			require.Equal(t, sc.cancel, stepStopped(h), "step canceled")
		})
	}
	// Deleting a session with a sandbox runs TeardownWorkflow (teardown, then the finishing
	// half of the delete); the session workflow then finds the session gone and completes.
	t.Run("deleted_session", func(t *testing.T) {
		t.Parallel()
		s := r.newSession(t, allowTools)
		s.send(userMessage(`/tool bash {"command":"true"}`))
		s.requireIdle("end_turn")
		require.NoError(t, r.api.Service.DeleteSession(t.Context(), r.workspace, s.id))
		require.NoError(t, r.temporal.GetWorkflow(t.Context(), durable.WorkflowID(s.id), "").Get(t.Context(), nil))
		h := r.save(t, durable.WorkflowID(s.id), "deleted_session")
		require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, h.Events[len(h.Events)-1].GetEventType())
		teardown := r.save(t, "teardown/"+s.id, "teardown")
		require.Equal(t, map[string]int{"Teardown": 1, "FinishDelete": 1}, scheduledActivities(teardown))
		require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, teardown.Events[len(teardown.Events)-1].GetEventType())
	})
}

// recorder is the running stack the scenarios share; each scenario has its own session and so
// its own durable.
type recorder struct {
	api       *app.API
	temporal  client.Client
	workspace string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := durable.StartDevServer(ctx, durable.DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	cfg := app.Config{DatabaseURL: pgtest.URL(t), TaskQueue: "record-" + ids.New(""), SandboxDir: t.TempDir(), ModelRetry: recordRetry}
	api, err := app.NewAPI(ctx, cfg, srv.Client(), logger)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	w, err := app.NewWorker(cfg, srv.Client(), api.Store, api.Previews, logger)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	ws, err := api.BindAPIKey(ctx, "sk-record-"+ids.New(""))
	require.NoError(t, err)
	return &recorder{api: api, temporal: srv.Client(), workspace: ws}
}

func decodeParams[T any](t *testing.T, raw string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(raw), &v))
	return v
}

func (r *recorder) newSession(t *testing.T, tools string) *recordedSession {
	t.Helper()
	ctx := t.Context()
	svc := r.api.Service
	agent, err := svc.CreateAgent(ctx, r.workspace, decodeParams[wire.AgentCreateParams](t,
		`{"name":"recorder","model":"claude-opus-5","tools":`+tools+`}`))
	require.NoError(t, err)
	env, err := svc.CreateEnvironment(ctx, r.workspace, decodeParams[wire.EnvironmentCreateParams](t, fmt.Sprintf(`{"name":%q}`, t.Name())))
	require.NoError(t, err)
	sess, err := svc.CreateSession(ctx, r.workspace, decodeParams[wire.SessionCreateParams](t,
		fmt.Sprintf(`{"agent":%q,"environment_id":%q}`, agent.ID, env.ID)))
	require.NoError(t, err)
	st, err := svc.OpenStream(ctx, r.workspace, sess.ID, "")
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return &recordedSession{t: t, r: r, id: sess.ID, stream: st}
}

// save waits until the workflow has nothing in flight, then writes its current run's history.
func (r *recorder) save(t *testing.T, workflowID, name string) *historypb.History {
	t.Helper()
	ctx := t.Context()
	// A signal may arrive between the wait and the read: read again until the history does
	// not end in a workflow task still open.
	var h *historypb.History
	for open := true; open; {
		r.waitQuiet(t, workflowID)
		iter := r.temporal.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		h = &historypb.History{}
		for iter.HasNext() {
			ev, err := iter.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
		}
		switch h.Events[len(h.Events)-1].GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
		default:
			open = false
		}
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
	require.NoError(t, err)
	path := historyPath(name)
	require.NoError(t, os.MkdirAll(historiesDir, 0o755))
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	// What was written must replay, or the checked-in file is useless.
	require.NoError(t, newReplayer(durable.SessionWorkflow).ReplayWorkflowHistoryFromJSONFile(quietTemporalLogger(), path))
	return h
}

// waitQuiet returns once the workflow is closed, or blocked with no activity or workflow task
// pending, so the recorded history ends on a completed workflow task.
func (r *recorder) waitQuiet(t *testing.T, workflowID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		d, err := r.temporal.DescribeWorkflow(ctx, workflowID, "")
		require.NoError(t, err)
		desc := d.RawResponse
		if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
			(len(desc.GetPendingActivities()) == 0 && desc.GetPendingWorkflowTask() == nil) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("workflow %s did not settle: %v", workflowID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// scheduledActivities counts the activities a history ran by type: scheduled activities and
// local activities (their markers).
func scheduledActivities(h *historypb.History) map[string]int {
	out := map[string]int{}
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			out[a.GetActivityType().GetName()]++
		}
		if m, ok := localActivityMarker(ev); ok {
			out[m.ActivityType]++
		}
	}
	return out
}

// localMarker is what the SDK records of a local activity in its marker's "data" detail.
type localMarker struct {
	ActivityType string
	// Failed: the activity failed (its failure is the marker's); Interrupted: with the
	// Interrupted application error of a step its session's interrupt stopped.
	Failed, Interrupted bool
}

func localActivityMarker(ev *historypb.HistoryEvent) (localMarker, bool) {
	a := ev.GetMarkerRecordedEventAttributes()
	if a == nil || a.GetMarkerName() != "LocalActivity" {
		return localMarker{}, false
	}
	var data struct{ ActivityType string }
	if p := a.GetDetails()["data"].GetPayloads(); len(p) > 0 {
		_ = json.Unmarshal(p[0].GetData(), &data)
	}
	f := a.GetFailure()
	return localMarker{ActivityType: data.ActivityType, Failed: f != nil,
		Interrupted: f.GetApplicationFailureInfo().GetType() == "Interrupted" || f.GetCause().GetApplicationFailureInfo().GetType() == "Interrupted"}, true
}

// stepStopped reports whether a history shows a step stopped by an interrupt: an activity's
// cancellation requested, or a local step that ended Interrupted.
func stepStopped(h *historypb.History) bool {
	if countEvents(h, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED) > 0 {
		return true
	}
	for _, ev := range h.Events {
		if m, ok := localActivityMarker(ev); ok && m.Interrupted {
			return true
		}
	}
	return false
}

// recordedSession follows one session's committed events from before its first message.
type recordedSession struct {
	t      *testing.T
	r      *recorder
	id     string
	stream *sessions.Stream
	// pending: events read past the last one a caller waited for.
	pending []wire.Event
}

func (s *recordedSession) send(events ...string) {
	s.t.Helper()
	raw := make([]json.RawMessage, len(events))
	for i, e := range events {
		raw[i] = json.RawMessage(e)
	}
	_, err := s.r.api.Service.SendEvents(s.t.Context(), s.r.workspace, s.id, raw)
	require.NoError(s.t, err)
}

// until returns the events up to and including the next one of type typ.
func (s *recordedSession) until(typ string) events {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	var out events
	for {
		for len(s.pending) > 0 {
			ev := s.pending[0]
			s.pending = s.pending[1:]
			out = append(out, ev)
			if ev.Type == typ {
				return out
			}
		}
		evs, deleted, err := s.stream.Next(ctx)
		require.NoError(s.t, err)
		require.False(s.t, deleted, "session deleted while waiting for %s", typ)
		for _, ev := range evs {
			s.pending = append(s.pending, ev.Event)
		}
		if len(evs) > 0 || s.stream.Pending() {
			continue
		}
		select {
		case <-s.stream.Wake():
		case <-ctx.Done():
			s.t.Fatalf("no %s after %v: %v", typ, out.types(), ctx.Err())
		}
	}
}

// requireIdle waits for the next session.status_idle and checks its stop reason.
func (s *recordedSession) requireIdle(stopReason string) events {
	s.t.Helper()
	evs := s.until(wire.EventSessionStatusIdle)
	var body struct {
		StopReason struct {
			Type string `json:"type"`
		} `json:"stop_reason"`
	}
	require.NoError(s.t, json.Unmarshal(evs[len(evs)-1].Body, &body))
	require.Equal(s.t, stopReason, body.StopReason.Type, "events: %v", evs.types())
	return evs
}

type events []wire.Event

func (evs events) types() []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func (evs events) find(t *testing.T, typ string) wire.Event {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("no %s in %v", typ, evs.types())
	return wire.Event{}
}
