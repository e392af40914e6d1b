package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/metrics"
)

// allNames records one sample of every metric and returns the names the registry exposes.
func allNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	reg.MustRegister(metrics.NewPoolCollector(func() metrics.PoolStats { return metrics.PoolStats{} }))
	m.Request("GET /healthz", 200, time.Millisecond)
	m.StreamOpened()
	m.TurnStarted()
	m.TurnFinished("end_turn")
	m.ModelRequest(time.Second, "server")
	m.ToolCall("bash", "ok", time.Second)
	m.ActivityAttempt("Advance", 2, true)
	m.SandboxAcquired("local", metrics.ModeCold, time.Second, nil)
	m.EventsAppended([]string{"user.message"})
	m.ListenerReconnecting("t")
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	return names
}

// docs/operations.md lists every metric, and lists none that does not exist.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	names := allNames(t)
	for name := range names {
		require.Contains(t, string(doc), "| `"+name+"` |", "docs/operations.md#metrics has a row for %s", name)
	}
	for _, row := range regexp.MustCompile("(?m)^\\| `(managed_agents_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		require.True(t, names[row[1]], "docs/operations.md lists %s, which is no metric", row[1])
	}
}

// The sample dashboard is valid JSON and queries only metrics that exist.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/grafana/managed-agents.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Type    string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	names := allNames(t)
	var queried int
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range regexp.MustCompile(`managed_agents_[a-z_]+`).FindAllString(target.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				require.True(t, names[base], "the dashboard queries %s, which is no metric", name)
				queried++
			}
		}
	}
	require.Positive(t, queried)
}
