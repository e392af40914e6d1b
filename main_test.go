package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// As a new user would try it: a bad variable makes every role fail with a message naming it,
// before it writes anything.
func TestBadConfigurationStopsEveryRole(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{"dev, unknown model", map[string]string{"MANAGED_AGENT_MODEL": "bogus"}, []string{"dev"}, `MANAGED_AGENT_MODEL="bogus": must be fake or anthropic`},
		{"dev, TLS=maybe", map[string]string{"MANAGED_AGENT_TEMPORAL_TLS": "maybe"}, []string{"dev"}, `MANAGED_AGENT_TEMPORAL_TLS="maybe": must be a boolean`},
		{"serve, unknown sandbox", map[string]string{"MANAGED_AGENT_SANDBOX": "firecracker", "MANAGED_AGENT_DATABASE_URL": "postgres://localhost:1/x"}, []string{"serve"}, "MANAGED_AGENT_SANDBOX"},
		{"worker, bad log level", map[string]string{"MANAGED_AGENT_LOG_LEVEL": "loud", "MANAGED_AGENT_DATABASE_URL": "postgres://localhost:1/x"}, []string{"worker"}, "MANAGED_AGENT_LOG_LEVEL"},
		{"migrate, bad delay", map[string]string{"MANAGED_AGENT_FAKE_MODEL_WORD_DELAY": "soon", "MANAGED_AGENT_DATABASE_URL": "postgres://localhost:1/x"}, []string{"migrate"}, "MANAGED_AGENT_FAKE_MODEL_WORD_DELAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			t.Setenv("MANAGED_AGENT_DATA_DIR", dataDir)
			cmd := rootCmd()
			cmd.SetArgs(tt.args)
			require.ErrorContains(t, cmd.ExecuteContext(t.Context()), tt.wantErr)
			require.NoDirExists(t, dataDir, "nothing was written")
		})
	}
}

// `version` and `--version` print the same line, with the version the build stamped.
func TestVersionAndFlagAgree(t *testing.T) {
	old := version
	version = "v1.2.3-test"
	t.Cleanup(func() { version = old })
	outputs := map[string]string{}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var b strings.Builder
		cmd := rootCmd()
		cmd.SetOut(&b)
		cmd.SetArgs(args)
		require.NoError(t, cmd.Execute())
		outputs[args[0]] = b.String()
	}
	require.Equal(t, "managed-agents version v1.2.3-test\n", outputs["version"])
	require.Equal(t, outputs["version"], outputs["--version"])
}

// The controller takes the flags kubebuilder managers take (the Helm chart passes them).
func TestControllerFlags(t *testing.T) {
	cmd := controllerCmd()
	require.NoError(t, cmd.ParseFlags([]string{"--leader-elect=false", "--metrics-bind-address=:9090", "--health-probe-bind-address=0", "--kubeconfig=/k"}))
	c := app.Config{ControllerLeaderElect: true}
	overrideFlags(cmd, &c)
	require.False(t, c.ControllerLeaderElect)
	require.Equal(t, ":9090", c.ControllerMetricsAddr)
	require.Equal(t, "0", c.ControllerHealthAddr)
	require.Equal(t, "/k", c.Kubeconfig)
}
