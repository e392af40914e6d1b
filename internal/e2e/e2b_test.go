//go:build integration

package e2e

import (
	"context"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b/e2bfake"
)

// newE2BEnv is a running env whose worker's sandboxes are E2B sandboxes of a local fake of
// E2B's service (MANAGED_AGENT_SANDBOX=e2b and its variables).
func newE2BEnv(t *testing.T, extra ...string) (*env, *e2bfake.Fake) {
	t.Helper()
	fake := e2bfake.New(e2bfake.Options{APIKey: "e2e-key", Dir: t.TempDir()})
	t.Cleanup(fake.Close)
	settings := map[string]string{
		"MANAGED_AGENT_E2B_API_URL":           fake.URL(),
		"MANAGED_AGENT_E2B_API_KEY":           "e2e-key",
		"MANAGED_AGENT_E2B_SANDBOX_PROXY_URL": fake.EnvdURL(),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		settings[extra[i]] = extra[i+1]
	}
	e := newRunningEnv(t, func(c *app.Config) {
		c.Sandbox = "e2b"
		c.ProviderSettings = settings
	})
	return e, fake
}

// TestTurnsInAnE2BSandboxAcrossAWorkerRestart runs, through the official SDK, a turn whose
// built-in tool calls run in an E2B sandbox, restarts the worker, runs a second turn that
// re-attaches to the same sandbox (and sees the first turn's files), then deletes the session,
// which kills the sandbox at the service.
func TestTurnsInAnE2BSandboxAcrossAWorkerRestart(t *testing.T) {
	t.Parallel()
	e, fake := newE2BEnv(t)
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage(strings.Join([]string{
		`/tool bash {"command":"echo in-e2b"}`,
		`/tool write {"file_path":"notes/a.txt","content":"alpha\nbeta\n"}`,
		`/tool edit {"file_path":"notes/a.txt","old_string":"beta","new_string":"gamma"}`,
		`/tool read {"file_path":"notes/a.txt"}`,
		`/tool glob {"pattern":"**/*.txt"}`,
		`/tool grep {"pattern":"gam+a"}`,
	}, "\n")))
	answer := messageText(find(t, f.untilIdle(), "agent.message"))
	for _, want := range []string{"bash: in-e2b", "gamma", "notes/a.txt"} {
		require.Contains(t, answer, want)
	}
	require.NotContains(t, answer, "error:", "no tool failed:\n%s", answer)
	sandboxes := fake.Sandboxes()
	require.Len(t, sandboxes, 1)
	require.Equal(t, f.sessionID, sandboxes[0].Metadata["managed-agents/session-id"])
	require.Equal(t, 1, fake.Count("POST /sandboxes"))
	connects := fake.Count("POST /sandboxes/{id}/connect")

	e.restartWorker()
	f.send(userMessage(`/tool bash {"command":"cat notes/a.txt"}`))
	second := messageText(find(t, f.untilIdle(), "agent.message"))
	require.Contains(t, second, "alpha gamma", "the second turn sees the first one's files")
	require.Equal(t, 1, fake.Count("POST /sandboxes"), "the restarted worker made no second sandbox")
	require.Greater(t, fake.Count("POST /sandboxes/{id}/connect"), connects, "it attached to the stored one")

	_, err := e.client.Beta.Sessions.Delete(context.Background(), f.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Empty(t, fake.Sandboxes(), "deleting the session killed its sandbox")
	require.Equal(t, 1, fake.Count("DELETE /sandboxes/{id}"))
}

// TestExpiredE2BSandboxTerminatesSession: a sandbox whose time ran out (without auto-pause)
// is gone at the service; the session's next tool call fails for good with a clear
// session.error, never a silent replacement.
func TestExpiredE2BSandboxTerminatesSession(t *testing.T) {
	t.Parallel()
	e, fake := newE2BEnv(t, "MANAGED_AGENT_E2B_AUTO_PAUSE", "false")
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage(`/tool bash {"command":"true"}`))
	require.Equal(t, "end_turn", last(f.untilIdle()).StopReason.Type)
	sandboxes := fake.Sandboxes()
	require.Len(t, sandboxes, 1)
	fake.Expire(sandboxes[0].ID)

	e.restartWorker()
	f.send(userMessage(`/tool bash {"command":"true"}`))
	evs := f.until("session.status_terminated")
	errEv := fieldsOf(t, find(t, evs, "session.error"))["error"].(map[string]any)
	require.Equal(t, map[string]any{"type": "terminal"}, errEv["retry_status"])
	require.Contains(t, errEv["message"], "no longer exists")
	require.Equal(t, 1, fake.Count("POST /sandboxes"), "no replacement was made")
}
