//go:build integration

package charttest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValuesRenderLimits: the per-key rate limits reach the API's pods, the workspace quotas
// every role that enforces one, and values the server would refuse are refused at render time.
func TestValuesRenderLimits(t *testing.T) {
	deployment := func(out, args string) string {
		for _, doc := range strings.Split(out, "\n---\n") {
			if strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, args) {
				return doc
			}
		}
		t.Fatalf("no Deployment with %s", args)
		return ""
	}
	out, err := helmTemplate(t)
	require.NoError(t, err)
	api := deployment(out, `args: ["serve"]`)
	for _, want := range []string{"MANAGED_AGENT_RATE_LIMIT_RPS\n              value: \"50\"", "MANAGED_AGENT_RATE_LIMIT_BURST\n              value: \"100\"",
		"MANAGED_AGENT_MAX_STREAMS_PER_KEY\n              value: \"100\"", "MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS\n              value: \"0\""} {
		require.Contains(t, api, want)
	}

	out, err = helmTemplate(t, "--set", "api.rateLimit.requestsPerSecond=0.5", "--set", "api.rateLimit.maxStreamsPerKey=0",
		"--set", "workspaceQuotas.maxRunningSessions=20", "--set", "workspaceQuotas.maxSandboxes=10")
	require.NoError(t, err)
	api = deployment(out, `args: ["serve"]`)
	require.Contains(t, api, "MANAGED_AGENT_RATE_LIMIT_RPS\n              value: \"0.5\"")
	require.Contains(t, api, "MANAGED_AGENT_MAX_STREAMS_PER_KEY\n              value: \"0\"")
	require.Contains(t, api, "MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS\n              value: \"20\"")
	worker := deployment(out, `args: ["worker"]`)
	require.Contains(t, worker, "MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES\n              value: \"10\"")
	require.NotContains(t, worker, "MANAGED_AGENT_RATE_LIMIT_RPS", "only the API serves keys")
	require.Contains(t, deployment(out, "- controller\n"), "MANAGED_AGENT_WORKSPACE_MAX_RUNNING_SESSIONS\n              value: \"20\"")

	for _, tc := range []struct{ set, want string }{
		{"api.rateLimit.requestsPerSecond=-1", "/api/rateLimit/requestsPerSecond"},
		{"api.rateLimit.requestsPerSecond=fast", "/api/rateLimit/requestsPerSecond"},
		{"api.rateLimit.burst=1.5", "/api/rateLimit/burst"},
		{"workspaceQuotas.maxSandboxes=-3", "/workspaceQuotas/maxSandboxes"},
		{"workspaceQuotas.maxTurns=3", "additional properties 'maxTurns' not allowed"},
	} {
		_, err := helmTemplate(t, "--set", tc.set)
		require.ErrorContains(t, err, tc.want, tc.set)
	}
}
