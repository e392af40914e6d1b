package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/metrics"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	return m, reg
}

func TestRecordsWithBoundedLabels(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	m.Request("GET /v1/agents", 200, 10*time.Millisecond)
	m.Request("GET /v1/agents", 200, 20*time.Millisecond)
	m.Request("", 404, time.Millisecond)
	m.StreamOpened()
	m.StreamOpened()
	m.StreamClosed()
	m.TurnStarted()
	m.TurnFinished("end_turn")
	m.ModelRequest(time.Second, "")
	m.ModelRequest(time.Second, "overloaded")
	m.ToolCall("bash", "ok", 50*time.Millisecond)
	m.ToolCallUnrun("custom", "delegated")
	m.ActivityAttempt("ModelTurn", 1, false)
	m.ActivityAttempt("ToolCall", 2, true)
	m.SandboxAcquired("local", metrics.ModeCold, time.Second, nil)
	m.SandboxAcquired("docker", metrics.ModeWarm, time.Second, errors.New("gone"))
	m.EventsAppended([]string{"user.message", "agent.message", "user.message"})
	m.ListenerReconnecting("managed_agents_events")

	want := `
# HELP managed_agents_http_requests_total HTTP requests answered, by route (the matched pattern, or unmatched) and status code.
# TYPE managed_agents_http_requests_total counter
managed_agents_http_requests_total{code="200",route="GET /v1/agents"} 2
managed_agents_http_requests_total{code="404",route="unmatched"} 1
# HELP managed_agents_http_sse_streams Event streams (SSE) open now.
# TYPE managed_agents_http_sse_streams gauge
managed_agents_http_sse_streams 1
# HELP managed_agents_turns_started_total Turns opened (a session went running on delivered client events).
# TYPE managed_agents_turns_started_total counter
managed_agents_turns_started_total 1
# HELP managed_agents_turns_finished_total Turns closed (the session went idle), by stop reason.
# TYPE managed_agents_turns_finished_total counter
managed_agents_turns_finished_total{stop_reason="end_turn"} 1
# HELP managed_agents_model_requests_total Model requests made, by outcome (ok or error).
# TYPE managed_agents_model_requests_total counter
managed_agents_model_requests_total{outcome="error"} 1
managed_agents_model_requests_total{outcome="ok"} 1
# HELP managed_agents_model_request_errors_total Failed model requests, by kind (overloaded, rate_limited, server, invalid, canceled, other).
# TYPE managed_agents_model_request_errors_total counter
managed_agents_model_request_errors_total{kind="overloaded"} 1
# HELP managed_agents_tool_calls_total Tool calls, by tool (a built-in name, mcp, custom or other) and outcome (ok, error, failed, rejected, delegated).
# TYPE managed_agents_tool_calls_total counter
managed_agents_tool_calls_total{outcome="delegated",tool="custom"} 1
managed_agents_tool_calls_total{outcome="ok",tool="bash"} 1
# HELP managed_agents_activity_failures_total Temporal activity attempts that returned an error, by activity type.
# TYPE managed_agents_activity_failures_total counter
managed_agents_activity_failures_total{activity="ToolCall"} 1
# HELP managed_agents_activity_retries_total Temporal activity attempts after the first (retries), by activity type.
# TYPE managed_agents_activity_retries_total counter
managed_agents_activity_retries_total{activity="ToolCall"} 1
# HELP managed_agents_sandbox_acquisitions_total Sandbox acquisitions, by provider, mode (cold: created; warm: an existing one attached) and outcome.
# TYPE managed_agents_sandbox_acquisitions_total counter
managed_agents_sandbox_acquisitions_total{mode="cold",outcome="ok",provider="local"} 1
managed_agents_sandbox_acquisitions_total{mode="warm",outcome="error",provider="docker"} 1
# HELP managed_agents_events_appended_total Events committed to session logs, by event type.
# TYPE managed_agents_events_appended_total counter
managed_agents_events_appended_total{type="agent.message"} 1
managed_agents_events_appended_total{type="user.message"} 2
# HELP managed_agents_listener_reconnects_total Times a LISTEN connection was lost and is being re-established, by topic.
# TYPE managed_agents_listener_reconnects_total counter
managed_agents_listener_reconnects_total{topic="managed_agents_events"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"managed_agents_http_requests_total", "managed_agents_http_sse_streams", "managed_agents_turns_started_total",
		"managed_agents_turns_finished_total", "managed_agents_model_requests_total", "managed_agents_model_request_errors_total",
		"managed_agents_tool_calls_total", "managed_agents_activity_failures_total", "managed_agents_activity_retries_total",
		"managed_agents_sandbox_acquisitions_total", "managed_agents_events_appended_total", "managed_agents_listener_reconnects_total"))

	// Histograms: one observation per recorded latency; a failed acquisition keeps none.
	for name, n := range map[string]int{
		"managed_agents_http_request_duration_seconds":        2,
		"managed_agents_model_request_duration_seconds":       2,
		"managed_agents_tool_call_duration_seconds":           1,
		"managed_agents_sandbox_acquisition_duration_seconds": 1,
	} {
		got, err := testutil.GatherAndCount(reg, name)
		require.NoError(t, err)
		require.Equal(t, n, got, name)
	}
}

func TestNamesFollowConventions(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	// Every vector needs one child to be gathered and linted.
	m.Request("GET /healthz", 200, time.Millisecond)
	m.TurnFinished("end_turn")
	m.ModelRequest(time.Second, "server")
	m.ToolCall("bash", "ok", time.Second)
	m.ActivityAttempt("Advance", 2, true)
	m.SandboxAcquired("local", metrics.ModeCold, time.Second, nil)
	m.EventsAppended([]string{"user.message"})
	m.ListenerReconnecting("t")
	reg.MustRegister(metrics.NewPoolCollector(func() metrics.PoolStats { return metrics.PoolStats{} }))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		require.True(t, strings.HasPrefix(f.GetName(), "managed_agents_"), f.GetName())
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				require.NotContains(t, []string{"session_id", "path", "id"}, l.GetName(), "%s: no unbounded labels", f.GetName())
			}
		}
	}
}

func TestRegisteringTwiceFails(t *testing.T) {
	t.Parallel()
	_, reg := newMetrics(t)
	_, err := metrics.New(reg)
	require.Error(t, err, "one set of collectors per registry")
}

func TestPoolCollector(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPoolCollector(func() metrics.PoolStats {
		return metrics.PoolStats{Acquired: 2, Idle: 3, Constructing: 1, Max: 10, Acquires: 42, EmptyAcquires: 5, CanceledAcquires: 1,
			AcquireWait: 1500 * time.Millisecond}
	}))
	want := `
# HELP managed_agents_db_pool_connections Database pool connections now, by state (acquired, idle, constructing).
# TYPE managed_agents_db_pool_connections gauge
managed_agents_db_pool_connections{state="acquired"} 2
managed_agents_db_pool_connections{state="constructing"} 1
managed_agents_db_pool_connections{state="idle"} 3
# HELP managed_agents_db_pool_max_connections The database pool's maximum size.
# TYPE managed_agents_db_pool_max_connections gauge
managed_agents_db_pool_max_connections 10
# HELP managed_agents_db_pool_acquires_total Connections acquired from the database pool.
# TYPE managed_agents_db_pool_acquires_total counter
managed_agents_db_pool_acquires_total 42
# HELP managed_agents_db_pool_empty_acquires_total Acquisitions that found no idle connection and waited for one to be made or released.
# TYPE managed_agents_db_pool_empty_acquires_total counter
managed_agents_db_pool_empty_acquires_total 5
# HELP managed_agents_db_pool_canceled_acquires_total Acquisitions cancelled by their context while waiting.
# TYPE managed_agents_db_pool_canceled_acquires_total counter
managed_agents_db_pool_canceled_acquires_total 1
# HELP managed_agents_db_pool_acquire_wait_seconds_total Time spent waiting for a connection from the database pool.
# TYPE managed_agents_db_pool_acquire_wait_seconds_total counter
managed_agents_db_pool_acquire_wait_seconds_total 1.5
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}

func TestHandlerServesTheExpositionFormat(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	m.TurnStarted()
	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "managed_agents_turns_started_total 1\n")
	require.Contains(t, string(body), "go_goroutines ", "the Go runtime collector is registered")
	require.Contains(t, string(body), "process_", "the process collector is registered")
}
