//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// dockerCLI runs the docker CLI and returns its trimmed output.
func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(t, err, "docker %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// TestLimitedNetworkingInADockerSandbox runs, through the official SDK, a turn in a docker
// sandbox of a limited environment under the allowlist ceiling: curl reaches the allowed
// host through the worker's egress proxy and gets the proxy's refusal for another. Both hosts
// are containers on a network this test made; nothing else is contacted. Deleting the
// session removes the sandbox's network.
func TestLimitedNetworkingInADockerSandbox(t *testing.T) {
	t.Parallel()
	for _, img := range []string{"managed-agents-sandbox:dev", "managed-agents-egress:dev"} {
		if out, err := exec.Command("docker", "image", "inspect", img).CombinedOutput(); err != nil {
			t.Fatalf("the image %s is missing: run make sandbox-image egress-image (%v: %s)", img, err, out)
		}
	}
	prefix := fmt.Sprintf("ma-e2e-%d", os.Getpid())
	outside := prefix + "-outside"
	deployment := fmt.Sprintf("e2e-net-%d", os.Getpid())
	dockerCLI(t, "network", "create", "--label", "managed-agents.deployment=test", outside)
	t.Cleanup(func() { dockerCLI(t, "network", "rm", outside) })
	for alias, body := range map[string]string{"allowed.test": "allowed-ok", "refused.test": "refused-reached"} {
		name := prefix + "-" + strings.TrimSuffix(alias, ".test")
		dockerCLI(t, "run", "-d", "--name", name, "--label", "managed-agents.deployment=test", "--user", "1000:1000",
			"--network", outside, "--network-alias", alias, "--entrypoint", "/bin/sh", "managed-agents-sandbox:dev", "-c",
			"mkdir -p /tmp/www && echo "+body+" > /tmp/www/index.html && cd /tmp/www && exec /usr/bin/python3 -m http.server 8080")
		t.Cleanup(func() { dockerCLI(t, "rm", "-f", name) })
	}
	// The worker starts the proxy; the test removes it before the outside network.
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", "ma-egress-"+deployment).Run() })

	runner := managedAgentsBinary(t) // what the containers run (the test's own binary is not it)
	e := newRunningEnv(t, func(c *app.Config) {
		c.Sandbox = "docker"
		c.DockerRunner = runner
		c.DockerDeployment = deployment
		c.Network = app.NetworkConfig{Ceiling: "allowlist", DockerNetwork: outside, EgressPorts: "8080",
			EgressKey: "e2e-egress-key-0123456789abcdef0123456789"}
	})
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "net", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow")}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "limited",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{
				AllowedHosts: []string{"allowed.test"}}}}}})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)
	f := &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}

	f.send(userMessage(`/tool bash {"command":"curl -sS --max-time 20 --retry 10 --retry-connrefused --retry-delay 1 http://allowed.test:8080/; curl -sS http://refused.test:8080/"}`))
	answer := messageText(find(t, f.untilIdle(), "agent.message"))
	require.Contains(t, answer, "allowed-ok", "the allowed host, through the proxy")
	require.Contains(t, answer, "egress to refused.test:8080 refused by the sandbox allowlist: refused.test is not an allowed host (allowed hosts: allowed.test)",
		"the refusal an agent sees")
	require.NotContains(t, answer, "refused-reached")

	networks := func() string {
		return dockerCLI(t, "network", "ls", "-q", "--filter", "label=managed-agents.session="+f.sessionID)
	}
	require.NotEmpty(t, networks(), "the session has a network of its own")
	_, err = e.client.Beta.Sessions.Delete(ctx, f.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Empty(t, networks(), "deleting the session removed its network")
}
