//go:build integration

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
)

// composeFile is the quickstart's compose file, relative to the repository's root (where the
// README's commands run).
const composeFile = "build/compose/compose.yaml"

// composeKey is the API key the compose file gives the API unless MANAGED_AGENT_API_KEY is set.
const composeKey = "sk-ma-quickstart"

// TestComposeQuickstart runs the README's "Quickstart with Docker Compose" as written, twice
// in a row under one project name of its own (so the second `up` finds what the first teardown
// left): `docker-compose up` brings up PostgreSQL, Temporal, the API and a docker-sandbox
// worker from the images make builds; the README's Go SDK and curl quickstarts run unchanged
// against it; a bash tool call runs in a sandbox container the worker started (its hostname is
// that container's); no sandbox, with no network or with `limited` networking behind the
// egress proxy, reaches PostgreSQL, Temporal or the API, which the API's own network namespace
// reaches with the same probe; and the README's teardown leaves no container, network or volume
// of the project or its sandboxes, only the worker binary's runner volume, which no container
// uses. Only the project name and the API's port differ from the README (several runs share an
// engine).
func TestComposeQuickstart(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"docker", "docker-compose", "curl", "jq", "bash", "xargs"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the compose quickstart needs %s (Debian: apt-get install docker.io docker-compose curl jq)", tool)
			}
			t.Skipf("no %s on this machine (Debian: apt-get install docker-compose)", tool)
		}
	}
	root := "../.."
	images := composeImages(t, root)
	for name, img := range images {
		if out, err := exec.Command("docker", "image", "inspect", img).CombinedOutput(); err != nil {
			t.Fatalf("the image %s (%s) is missing: run make docker-build sandbox-image egress-image postgres-image temporal-image (%v: %s)",
				img, name, err, out)
		}
	}
	runnerVolume := runnerVolumeOf(t, images["IMG"])

	project := fmt.Sprintf("ma-e2e-compose-%d", os.Getpid())
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	env := composeEnv(project, port)

	blocks := readmeBlocks(t, "Quickstart with Docker Compose")
	require.Len(t, blocks, 2, "bring it up, tear it down")
	up := blocks[0]
	for _, s := range []string{"COMPOSE_PROJECT_NAME=managed-agents", "127.0.0.1:8080", "docker-compose up -d"} {
		require.Contains(t, up, s)
	}
	// make has built the images (checked above); the rest runs as written.
	up = regexp.MustCompile(`(?m)^make .*\n`).ReplaceAllString(up, "")
	up = strings.ReplaceAll(up, "COMPOSE_PROJECT_NAME=managed-agents", "COMPOSE_PROJECT_NAME="+project)
	up = strings.ReplaceAll(up, "127.0.0.1:8080", addr)
	teardown := blocks[1]
	require.Contains(t, teardown, "docker-compose down -v")
	up, teardown = "set -e\n"+up, "set -e\n"+teardown

	// bash runs a script as pasting it into bash would (the compose blocks get set -e on top,
	// so that a failed command fails the test).
	bash := func(script, dir string, extra ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = dir, append(append([]string{}, env...), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := bash("docker-compose logs --no-color --tail=200", root)
			t.Logf("docker-compose logs:\n%s", logs)
		}
		// Whatever the README's teardown did or did not get to.
		if out, err := bash("docker-compose down -v --remove-orphans", root); err != nil {
			t.Logf("docker-compose down: %v: %s", err, out)
		}
		removeLabelled(t, "managed-agents.deployment="+project)
		removeLabelled(t, "com.docker.compose.project="+project)
		_ = exec.Command("docker", "volume", "rm", runnerVolume).Run()
	})

	goQuickstart := buildReadmeGoQuickstart(t)
	curlBlocks := readmeBlocks(t, "Quickstart with curl")
	require.Len(t, curlBlocks, 2)
	curlScript := regexp.MustCompile(`(?m)^export KEY=.*\n`).ReplaceAllString(curlBlocks[0], "")
	quickstartEnv := []string{"KEY=" + composeKey, "API=http://" + addr}

	for run := 1; run <= 2; run++ {
		start := time.Now()
		out, err := bash(up, root)
		require.NoError(t, err, "run %d: up:\n%s", run, out)
		t.Logf("run %d: up and ready in %s", run, time.Since(start).Round(time.Second))

		cmd := exec.Command(goQuickstart)
		cmd.Env = append(os.Environ(), quickstartEnv...)
		goOut, err := cmd.CombinedOutput()
		require.NoError(t, err, "run %d: the Go quickstart:\n%s", run, goOut)
		require.Contains(t, string(goOut), "agent.message\n   echo: hello\n", "run %d", run)

		curlOut, err := bash(curlScript, t.TempDir(), quickstartEnv...)
		require.NoError(t, err, "run %d: the curl quickstart:\n%s", run, curlOut)
		require.Equal(t, curlBlocks[1], curlOut, "run %d: the curl quickstart prints what the README shows", run)

		checkComposeSandboxes(t, project, addr, images["SANDBOX_IMG"])

		out, err = bash(teardown, root)
		require.NoError(t, err, "run %d: teardown:\n%s", run, out)
		for _, label := range []string{"com.docker.compose.project=" + project, "managed-agents.deployment=" + project} {
			require.Empty(t, dockerLines(t, "ps", "-aq", "--filter", "label="+label), "run %d: containers labelled %s", run, label)
			require.Empty(t, dockerLines(t, "network", "ls", "-q", "--filter", "label="+label), "run %d: networks labelled %s", run, label)
			require.Empty(t, dockerLines(t, "volume", "ls", "-q", "--filter", "label="+label), "run %d: volumes labelled %s", run, label)
		}
		require.Empty(t, dockerLines(t, "ps", "-aq", "--filter", "name="+project), "run %d: containers named after the project", run)
		require.Empty(t, dockerLines(t, "network", "ls", "-q", "--filter", "name="+project), "run %d: networks named after the project", run)
		require.Empty(t, dockerLines(t, "volume", "ls", "-q", "--filter", "name="+project), "run %d: volumes named after the project", run)
		// What stays, as docs/compose.md says: the runner volume (the worker's binary, shared by
		// every worker of that binary), which nothing uses any more.
		require.NoError(t, exec.Command("docker", "volume", "inspect", runnerVolume).Run(), "run %d: the runner volume %s", run, runnerVolume)
		require.Empty(t, dockerLines(t, "ps", "-aq", "--filter", "volume="+runnerVolume), "run %d: no container uses the runner volume", run)
		t.Logf("run %d: done in %s", run, time.Since(start).Round(time.Second))
	}
}

// checkComposeSandboxes runs tool calls through the SDK against the compose API at addr: one in
// a session of an unrestricted environment (no network under the compose file's allowlist
// ceiling without a list) and one of a `limited` environment (a session network and the
// egress proxy). Each runs in a container of the project's deployment, off the project's
// network, and reaches none of the services, which the same probe reaches from the API's
// network namespace.
func checkComposeSandboxes(t *testing.T, project, addr, sandboxImage string) {
	t.Helper()
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL("http://"+addr), option.WithAPIKey(composeKey))
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "compose", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow")}})
	require.NoError(t, err)

	service := func(name string) (id, ip string) {
		ids := dockerLines(t, "ps", "-q", "--no-trunc", "--filter", "label=com.docker.compose.project="+project,
			"--filter", "label=com.docker.compose.service="+name)
		require.Len(t, ids, 1, "one %s container", name)
		ips := strings.Fields(dockerCLI(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", ids[0]))
		require.Len(t, ips, 1, "%s is on the project's network only", name)
		return ids[0], ips[0]
	}
	_, postgresIP := service("postgres")
	_, temporalIP := service("temporal")
	apiID, apiIP := service("api")
	targets := []string{"postgres:5432", postgresIP + ":5432", "temporal:7233", temporalIP + ":7233", apiIP + ":8080"}
	probe := fmt.Sprintf(`for t in %s; do if timeout 5 bash -c "</dev/tcp/${t%%:*}/${t##*:}" 2>/dev/null; then echo "$t reached"; else echo "$t blocked"; fi; done`,
		strings.Join(targets, " "))
	verdicts := func(word string) string {
		var b strings.Builder
		for _, target := range targets {
			fmt.Fprintf(&b, "%s %s\n", target, word)
		}
		return b.String()
	}

	// The control: the API's network namespace reaches every target with the same probe.
	control := dockerCLI(t, "run", "--rm", "--label", "managed-agents.deployment="+project, "--network", "container:"+apiID,
		"--entrypoint", "bash", sandboxImage, "-c", probe)
	require.Equal(t, strings.TrimSpace(verdicts("reached")), control, "the probe reaches the services from the API's network")

	for _, tc := range []struct {
		name       string
		networking anthropic.BetaCloudConfigParamsNetworkingUnion
		extra      string // another command, and what its output must contain
		want       string
	}{
		{name: "unrestricted"},
		{name: "limited",
			networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{
				AllowedHosts: []string{"example.com"}}},
			// Through the proxy, the service's name is refused.
			extra: "curl -sS --max-time 20 http://postgres:5432/ 2>&1 || true",
			want:  "egress to postgres:5432 refused by the sandbox allowlist"},
	} {
		envr, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "compose-" + tc.name,
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{Networking: tc.networking}}})
		require.NoError(t, err)
		sess, err := newSession(t, c, agent.ID, envr.ID)
		require.NoError(t, err)
		turn := composeTurns(t, c, sess.ID)

		answer := turn(`/tool bash {"command":"id -u; echo hi; echo $HOSTNAME"}`)
		m := regexp.MustCompile(`^1000\s+hi\s+([0-9a-f]{12})\s*$`).FindStringSubmatch(answer)
		require.NotNil(t, m, "%s: the command's output: %q", tc.name, answer)
		ids := dockerLines(t, "ps", "-q", "--no-trunc", "--filter", "label=managed-agents.session="+sess.ID)
		require.Len(t, ids, 1, "%s: the session has a sandbox container", tc.name)
		require.True(t, strings.HasPrefix(ids[0], m[1]), "%s: the command ran in the session's container %s (hostname %s)", tc.name, ids[0], m[1])
		var info struct {
			Config struct {
				Image  string
				Labels map[string]string
			}
			HostConfig      struct{ NetworkMode string }
			NetworkSettings struct{ Networks map[string]json.RawMessage }
		}
		require.NoError(t, json.Unmarshal([]byte(dockerCLI(t, "inspect", "-f", "{{json .}}", ids[0])), &info))
		require.Equal(t, project, info.Config.Labels["managed-agents.deployment"], "%s: the worker labels it with the project", tc.name)
		require.Empty(t, info.Config.Labels["com.docker.compose.project"], "%s: the sandbox is the worker's, not a compose service", tc.name)
		for network := range info.NetworkSettings.Networks {
			require.False(t, strings.HasPrefix(network, project+"_"), "%s: the sandbox is on the project's network %s", tc.name, network)
		}
		if tc.name == "unrestricted" {
			require.Equal(t, "none", info.HostConfig.NetworkMode, "no network at all")
		} else {
			require.Len(t, info.NetworkSettings.Networks, 1, "one network")
			for network := range info.NetworkSettings.Networks {
				require.Regexp(t, `^ma-.*-net$`, network, "a session network of its own")
			}
		}

		cmd := probe
		if tc.extra != "" {
			cmd += "; " + tc.extra
		}
		call, err := json.Marshal(map[string]string{"command": cmd})
		require.NoError(t, err)
		out := turn("/tool bash " + string(call))
		require.True(t, strings.HasPrefix(out, strings.TrimSpace(verdicts("blocked"))), "%s: the sandbox reaches no service:\n%s", tc.name, out)
		require.Contains(t, out, tc.want, tc.name)
	}
}

// composeTurns opens a session's stream and returns a function that sends a user message and
// returns the output of the turn's tool call (the whole output: the fake model's answer holds
// only a preview of it).
func composeTurns(t *testing.T, c anthropic.Client, sessionID string) func(text string) string {
	t.Helper()
	// A sandbox's first acquisition (and the egress proxy's start) can take a while on a busy
	// machine: a longer deadline than openStream's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	stream := c.Beta.Sessions.Events.StreamEvents(ctx, sessionID, anthropic.BetaSessionEventStreamParams{})
	t.Cleanup(func() {
		cancel()
		_ = stream.Close()
	})
	return func(text string) string {
		t.Helper()
		_, err := c.Beta.Sessions.Events.Send(context.Background(), sessionID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(text)}})
		require.NoError(t, err)
		var evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion
		for {
			require.True(t, stream.Next(), "stream ended before idle after %v: %v", types(evs), stream.Err())
			ev := stream.Current()
			evs = append(evs, ev)
			if ev.Type == "session.status_idle" {
				break
			}
		}
		result := find(t, evs, "agent.tool_result")
		require.NotContains(t, find(t, evs, "agent.message").RawJSON(), "bash error:", "the tool call failed: %s", result.RawJSON())
		return messageText(result)
	}
}

// composeImages returns the images the compose file runs, by variable (IMG, SANDBOX_IMG, ...):
// the variable's value when set (as `make test IMG=…` sets it), else the compose file's
// default, which must be the Makefile's, so that the images make builds are the ones used.
func composeImages(t *testing.T, root string) map[string]string {
	t.Helper()
	compose, err := os.ReadFile(root + "/" + composeFile)
	require.NoError(t, err)
	makefile, err := os.ReadFile(root + "/Makefile")
	require.NoError(t, err)
	makeVars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)\s*\?=\s*(\S+)\s*$`).FindAllStringSubmatch(string(makefile), -1) {
		makeVars[m[1]] = m[2]
	}
	images := map[string]string{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]*IMG):-([^}]+)\}`).FindAllStringSubmatch(string(compose), -1) {
		want := strings.ReplaceAll(makeVars[m[1]], "$(TEMPORAL_VERSION:v%=%)", strings.TrimPrefix(makeVars["TEMPORAL_VERSION"], "v"))
		require.Equal(t, want, m[2], "the compose file's default %s is the Makefile's", m[1])
		images[m[1]] = m[2]
		if v := os.Getenv(m[1]); v != "" {
			images[m[1]] = v
		}
	}
	require.Len(t, images, 5, "IMG, SANDBOX_IMG, EGRESS_IMG, POSTGRES_IMG, TEMPORAL_IMG: %v", images)
	return images
}

// composeEnv is this process's environment for the compose commands, without the variables the
// compose file reads that would change what the test sees (a developer's model or key), and
// with the project's name and the API's port.
func composeEnv(project, port string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MANAGED_AGENT_") || strings.HasPrefix(name, "COMPOSE_") || name == "API_PORT" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "COMPOSE_FILE="+composeFile, "COMPOSE_PROJECT_NAME="+project, "API_PORT="+port)
}

// runnerVolumeOf is the name of the volume the docker provider fills with the binary of img
// (sandbox/docker's runner volume: ma-runner- and the first 24 hex digits of its sha256).
func runnerVolumeOf(t *testing.T, img string) string {
	t.Helper()
	id := dockerCLI(t, "create", img)
	defer dockerCLI(t, "rm", id)
	out, err := exec.Command("docker", "cp", id+":/managed-agents", "-").Output()
	require.NoError(t, err)
	tr := tar.NewReader(bytes.NewReader(out))
	_, err = tr.Next()
	require.NoError(t, err)
	h := sha256.New()
	_, err = io.Copy(h, tr)
	require.NoError(t, err)
	return "ma-runner-" + hex.EncodeToString(h.Sum(nil))[:24]
}

// dockerLines runs the docker CLI and returns its non-empty output lines.
func dockerLines(t *testing.T, args ...string) []string {
	t.Helper()
	return strings.Fields(dockerCLI(t, args...))
}

// removeLabelled removes the containers, then the networks and volumes, with a label.
func removeLabelled(t *testing.T, label string) {
	t.Helper()
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		out, err := exec.Command("docker", append(kind, "--filter", "label="+label)...).Output()
		if err != nil || len(strings.Fields(string(out))) == 0 {
			continue
		}
		rm := map[string][]string{"ps": {"rm", "-f"}, "network": {"network", "rm"}, "volume": {"volume", "rm", "-f"}}[kind[0]]
		if out, err := exec.Command("docker", append(rm, strings.Fields(string(out))...)...).CombinedOutput(); err != nil {
			t.Logf("docker %s: %v: %s", strings.Join(rm, " "), err, out)
		}
	}
}
