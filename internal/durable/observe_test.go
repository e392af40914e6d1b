package durable

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestToolLabelIsBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   wire.Event
		want string
	}{
		{"built-in", wire.Event{Type: wire.EventAgentToolUse, Body: json.RawMessage(`{"name":"bash","input":{}}`)}, "bash"},
		{"made-up name", wire.Event{Type: wire.EventAgentToolUse, Body: json.RawMessage(`{"name":"sesn_123 rm -rf","input":{}}`)}, ToolOther},
		{"undecodable", wire.Event{Type: wire.EventAgentToolUse, Body: json.RawMessage(`[`)}, ToolOther},
		{"mcp", wire.Event{Type: wire.EventAgentMCPToolUse, Body: json.RawMessage(`{"name":"search","mcp_server_name":"docs"}`)}, ToolMCP},
		{"custom", wire.Event{Type: wire.EventAgentCustomToolUse, Body: json.RawMessage(`{"name":"get_weather"}`)}, ToolCustom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, toolLabel(tt.ev))
		})
	}
}

type attempt struct {
	activity string
	attempt  int32
	failed   bool
}

type attemptRecorder struct {
	nopObserver
	mu  sync.Mutex
	got []attempt
}

func (r *attemptRecorder) ActivityAttempt(activity string, n int32, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, attempt{activity, n, failed})
}

// The worker interceptor sees every attempt of an activity with its outcome.
func TestActivityObserverRecordsAttempts(t *testing.T) {
	t.Parallel()
	// A binding store that cannot be read fails the teardown.
	bindings := unreadableBindings{BindingStore: sandboxtest.NewBindings(), failFor: testSession}
	obs := &attemptRecorder{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger())
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&activityObserver{obs: obs}}})
	acts := sandboxActivities(t, bindings)
	env.RegisterActivity(acts)
	_, err := env.ExecuteActivity(acts.Teardown, testSession)
	require.ErrorContains(t, err, "binding store unavailable")
	_, err = env.ExecuteActivity(acts.Teardown, "sesn_none")
	require.NoError(t, err)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, []attempt{{"Teardown", 1, true}, {"Teardown", 1, false}}, obs.got)
}

// unreadableBindings fails every read of one session's binding.
type unreadableBindings struct {
	sandbox.BindingStore
	failFor string
}

func (u unreadableBindings) Binding(ctx context.Context, sessionID string) (sandbox.Binding, error) {
	if sessionID == u.failFor {
		return sandbox.Binding{}, errors.New("binding store unavailable")
	}
	return u.BindingStore.Binding(ctx, sessionID)
}
