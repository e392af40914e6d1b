//go:build integration

package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/metrics"
)

// scrape reads url's /metrics in the text exposition format, as Prometheus does.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// sample is the value of the series of family name whose labels include labels; -1 when there
// is none.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// A turn with one tool call, driven through the official SDK, moves the counters of every
// part it passes: the API's requests and streams, the turn, the model, the tool, the sandbox,
// the log and the database pool.
func TestMetricsCountATurnWithAToolCall(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	e := newRunningEnv(t, func(c *app.Config) { c.Metrics, c.MetricsRegistry = m, reg })
	srv := httptest.NewServer(metrics.Handler(reg))
	t.Cleanup(srv.Close)

	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage("/tool bash {\"command\":\"echo counted\"}"))
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"managed_agents_http_requests_total", map[string]string{"route": "POST /v1/sessions/{id}/events", "code": "200"}, 1},
		{"managed_agents_http_requests_total", map[string]string{"route": "POST /v1/sessions", "code": "200"}, 1},
		{"managed_agents_http_request_duration_seconds", map[string]string{"route": "POST /v1/agents"}, 1},
		{"managed_agents_http_sse_streams", nil, 1},
		{"managed_agents_turns_started_total", nil, 1},
		{"managed_agents_turns_finished_total", map[string]string{"stop_reason": "end_turn"}, 1},
		{"managed_agents_model_requests_total", map[string]string{"outcome": "ok"}, 2},
		{"managed_agents_model_request_duration_seconds", map[string]string{"outcome": "ok"}, 2},
		{"managed_agents_tool_calls_total", map[string]string{"tool": "bash", "outcome": "ok"}, 1},
		{"managed_agents_tool_call_duration_seconds", map[string]string{"tool": "bash"}, 1},
		{"managed_agents_sandbox_acquisitions_total", map[string]string{"provider": "local", "mode": "cold", "outcome": "ok"}, 1},
		{"managed_agents_events_appended_total", map[string]string{"type": "user.message"}, 1},
		{"managed_agents_events_appended_total", map[string]string{"type": "agent.tool_use"}, 1},
		{"managed_agents_events_appended_total", map[string]string{"type": "agent.tool_result"}, 1},
		{"managed_agents_events_appended_total", map[string]string{"type": "session.status_idle"}, 1},
	}
	// The client sees the idle once it is committed; the counters move right after.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams := scrape(t, srv.URL)
		for _, w := range want {
			assert.Equal(c, w.value, sample(fams, w.name, w.labels), "%s %v", w.name, w.labels)
		}
	}, 10*time.Second, 20*time.Millisecond)

	fams := scrape(t, srv.URL)
	require.Positive(t, sample(fams, "managed_agents_db_pool_max_connections", nil), "the pool's collector is registered")
	require.Positive(t, sample(fams, "managed_agents_db_pool_acquires_total", nil))
	require.Equal(t, float64(-1), sample(fams, "managed_agents_model_request_errors_total", nil), "no model request failed")
	for _, m := range fams["managed_agents_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			require.NotContains(t, l.GetValue(), f.sessionID, "no session id in a label")
		}
	}
}

// A denied call counts as rejected and a custom tool as delegated to the client; a parked
// turn counts as finished with requires_action, and its resumption is no new turn.
func TestMetricsCountRejectedAndDelegatedToolCalls(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	e := newRunningEnv(t, func(c *app.Config) { c.Metrics, c.MetricsRegistry = m, reg })
	srv := httptest.NewServer(metrics.Handler(reg))
	t.Cleanup(srv.Close)
	f := newTurnFixtureIn(t, e, builtinTools("always_ask"), anthropic.BetaAgentNewParamsToolUnion{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
		Name: "get_weather", Description: "weather of a city",
		InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}})

	f.send(userMessage("/tool bash {\"command\":\"touch denied\"}"))
	use := find(t, f.untilIdle(), "agent.tool_use")
	f.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
		ToolUseID: use.ID, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny}})
	require.Equal(t, "end_turn", last(f.untilIdle()).StopReason.Type)
	f.send(userMessage("/tool get_weather {\"city\":\"Paris\"}"))
	require.Equal(t, "requires_action", last(f.untilIdle()).StopReason.Type)

	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"managed_agents_tool_calls_total", map[string]string{"tool": "bash", "outcome": "rejected"}, 1},
		{"managed_agents_tool_calls_total", map[string]string{"tool": "custom", "outcome": "delegated"}, 1},
		{"managed_agents_tool_calls_total", map[string]string{"tool": "bash", "outcome": "ok"}, -1},
		{"managed_agents_turns_started_total", nil, 2},
		{"managed_agents_turns_finished_total", map[string]string{"stop_reason": "requires_action"}, 2},
		{"managed_agents_turns_finished_total", map[string]string{"stop_reason": "end_turn"}, 1},
		{"managed_agents_sandbox_acquisitions_total", nil, -1},
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams := scrape(t, srv.URL)
		for _, w := range want {
			assert.Equal(c, w.value, sample(fams, w.name, w.labels), "%s %v", w.name, w.labels)
		}
	}, 10*time.Second, 20*time.Millisecond)
}
