//go:build integration

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/sandbox/opensandbox/opensandboxfake"
)

// TestTurnInAnOpenSandboxSandbox runs, through the official SDK, a turn whose tool calls run in
// a sandbox of the opensandbox provider (against the local fake OpenSandbox), restarts the
// worker, runs a second turn that reattaches to the same sandbox, and deletes the session:
// the fake sees its sandbox deleted.
func TestTurnInAnOpenSandboxSandbox(t *testing.T) {
	t.Parallel()
	fake := opensandboxfake.Start(t, opensandboxfake.Options{APIKey: "e2e-key", ExecdToken: "e2e-token"})
	e := newRunningEnv(t, func(c *app.Config) {
		c.Sandbox = "opensandbox"
		c.ProviderSettings = map[string]string{
			"MANAGED_AGENT_OPENSANDBOX_API_URL":            fake.URL(),
			"MANAGED_AGENT_OPENSANDBOX_API_KEY":            "e2e-key",
			"MANAGED_AGENT_OPENSANDBOX_EXECD_ACCESS_TOKEN": "e2e-token",
			"MANAGED_AGENT_OPENSANDBOX_USE_SERVER_PROXY":   "true",
			"MANAGED_AGENT_OPENSANDBOX_WORKSPACE":          "~/workspace",
			"MANAGED_AGENT_OPENSANDBOX_DEPLOYMENT":         "e2e",
		}
	})
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage(strings.Join([]string{
		`/tool write {"file_path":"notes/a.txt","content":"alpha\nbeta\n"}`,
		`/tool edit {"file_path":"notes/a.txt","old_string":"beta","new_string":"gamma"}`,
		`/tool read {"file_path":"notes/a.txt"}`,
		`/tool glob {"pattern":"**/*.txt"}`,
		`/tool grep {"pattern":"gam+a"}`,
		`/tool bash {"command":"cat notes/a.txt"}`,
	}, "\n")))
	answer := messageText(find(t, f.untilIdle(), "agent.message"))
	for _, want := range []string{"gamma", "notes/a.txt", "alpha"} {
		require.Contains(t, answer, want)
	}
	require.NotContains(t, answer, "error:", "no tool failed:\n%s", answer)
	boxes := fake.Sandboxes()
	require.Len(t, boxes, 1, "the session has one sandbox")
	require.Equal(t, f.sessionID, boxes[0].Metadata["managed-agents/session-id"])

	e.restartWorker()
	f.send(userMessage(`/tool bash {"command":"cat notes/a.txt"}`))
	second := messageText(find(t, f.untilIdle(), "agent.message"))
	require.Contains(t, second, "alpha gamma", "the restarted worker reattached to the same sandbox")
	require.Len(t, fake.Sandboxes(), 1, "and made no other")

	_, err := e.client.Beta.Sessions.Delete(context.Background(), f.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(fake.Sandboxes()) == 0 }, 30*time.Second, 50*time.Millisecond, "deleting the session deleted its sandbox")
	require.GreaterOrEqual(t, fake.Count("DELETE /sandboxes/{id}"), 1, "through the lifecycle API")
}
