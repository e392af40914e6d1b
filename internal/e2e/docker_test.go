//go:build integration

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// TestTurnWithEveryBuiltinInADockerSandbox runs, through the official SDK, turns whose tool
// calls run in a docker sandbox (the image `make sandbox-image` builds): bash, write, read,
// edit, glob and grep, and a second turn that sees the first one's files. Deleting the session
// removes its container.
func TestTurnWithEveryBuiltinInADockerSandbox(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("docker", "image", "inspect", "managed-agents-sandbox:dev").CombinedOutput(); err != nil {
		t.Fatalf("the docker sandbox image is missing: run make sandbox-image (%v: %s)", err, out)
	}
	runner := managedAgentsBinary(t) // what the containers run (the test's own binary is not it)
	e := newRunningEnv(t, func(c *app.Config) {
		c.Sandbox = "docker"
		c.DockerRunner = runner
		c.DockerDeployment = "test" // the label the docker package's tests and cleanups use
	})
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage(strings.Join([]string{
		`/tool bash {"command":"id -u; pwd"}`,
		`/tool write {"file_path":"notes/a.txt","content":"alpha\nbeta\n"}`,
		`/tool edit {"file_path":"notes/a.txt","old_string":"beta","new_string":"gamma"}`,
		`/tool read {"file_path":"notes/a.txt"}`,
		`/tool glob {"pattern":"**/*.txt"}`,
		`/tool grep {"pattern":"gam+a"}`,
	}, "\n")))
	evs := f.untilIdle()
	answer := messageText(find(t, evs, "agent.message"))
	for _, want := range []string{"bash: 1000 /workspace", "read: ", "gamma", "glob: ", "notes/a.txt", "grep: "} {
		require.Contains(t, answer, want)
	}
	require.NotContains(t, answer, "error:", "no tool failed:\n%s", answer)

	f.send(userMessage(`/tool bash {"command":"cat notes/a.txt; ls /proc/net/dev >/dev/null && grep -c : /proc/net/dev"}`))
	evs = f.untilIdle()
	second := messageText(find(t, evs, "agent.message"))
	require.Contains(t, second, "alpha gamma", "the second turn sees the first one's files")
	require.Contains(t, second, " 1", "only the loopback interface")

	ctx := context.Background()
	containers := func() string {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=managed-agents.session="+f.sessionID).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	require.NotEmpty(t, containers(), "the session has a container")
	_, err := e.client.Beta.Sessions.Delete(ctx, f.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Empty(t, containers(), "deleting the session removed its container")
}
