package app

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/metrics"
)

func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		env                  map[string]string
		wantErr              string
		wantAddr, controller string
	}{
		{name: "default", wantAddr: ":9090", controller: ":9090"},
		{name: "an address", env: map[string]string{"MANAGED_AGENT_METRICS_ADDR": "127.0.0.1:9100"}, wantAddr: "127.0.0.1:9100", controller: "127.0.0.1:9100"},
		{name: "off", env: map[string]string{"MANAGED_AGENT_METRICS_ADDR": "off"}, wantAddr: "", controller: "0"},
		{name: "zero", env: map[string]string{"MANAGED_AGENT_METRICS_ADDR": "0"}, wantAddr: "", controller: "0"},
		{name: "the controller's own variable wins for the controller",
			env:      map[string]string{"MANAGED_AGENT_METRICS_ADDR": ":9100", "MANAGED_AGENT_CONTROLLER_METRICS_ADDR": ":8080"},
			wantAddr: ":9100", controller: ":8080"},
		{name: "not an address", env: map[string]string{"MANAGED_AGENT_METRICS_ADDR": "9090"},
			wantErr: `MANAGED_AGENT_METRICS_ADDR="9090": must be host:port, such as :9090, or off (0) for none`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := FromLookup(Config{}, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			err := c.Validate()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantAddr, c.metricsAddr())
			require.Equal(t, tt.controller, c.controllerMetricsAddr())
		})
	}
}

// serve and worker build their collectors and serve them on their own listener; with the
// listener off they build none.
func TestServeMetricsOnItsOwnListener(t *testing.T) {
	t.Parallel()
	cfg, reg, err := withMetrics(Config{MetricsAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	require.NotNil(t, reg)
	require.NotNil(t, cfg.Metrics)
	cfg.Metrics.TurnStarted()

	// Bind a port first so the test knows it: serveMetrics listens on cfg's address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.MetricsAddr = ln.Addr().String()
	require.NoError(t, ln.Close())
	stop, err := serveMetrics(t.Context(), cfg, reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer stop()
	body := get(t, "http://"+cfg.MetricsAddr+"/metrics")
	require.Contains(t, body, "managed_agents_turns_started_total 1\n")
	require.Contains(t, body, "go_goroutines")

	off, offReg, err := withMetrics(Config{MetricsAddr: "off"})
	require.NoError(t, err)
	require.Nil(t, offReg)
	require.Nil(t, off.Metrics)
	stopOff, err := serveMetrics(t.Context(), off, offReg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	stopOff()
}

// dev answers /metrics on the API's listener, and everything else goes to the API.
func TestDevAnswersMetricsOnTheAPIListener(t *testing.T) {
	t.Parallel()
	cfg, reg, err := newMetrics(Config{})
	require.NoError(t, err)
	cfg.Metrics.TurnStarted()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api") })
	addr := serveTest(t, withMetricsEndpoint{api: api, metrics: metrics.Handler(reg)}, DefaultServerLimits)
	require.Contains(t, get(t, "http://"+addr+"/metrics"), "managed_agents_turns_started_total 1\n")
	require.Equal(t, "api", get(t, "http://"+addr+"/v1/agents"))
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
