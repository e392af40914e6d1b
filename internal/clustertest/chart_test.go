//go:build cluster

package clustertest

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"
)

const chart = "../../charts/managed-agents"

// imageValues are the --set flags that point the chart at the images make test-cluster built
// and loaded into the node: the cluster has no registry (docs/kubernetes.md, "Without a
// registry"). Everything else is the docs' first try.
func imageValues(t testing.TB) []string {
	t.Helper()
	// The node has 2 CPUs and the release's own pods reserve about half a CPU: sandboxes
	// reserve less than the default 1 CPU each, so that several sessions' pods fit at once.
	return append(releaseImages(t), "--set", "sandbox.kubernetes.image="+sandboxImage(t),
		"--set", "sandbox.kubernetes.defaultResources.cpu=200m",
		"--set", "sandbox.kubernetes.defaultResources.memory=256Mi")
}

func sandboxImage(t testing.TB) string {
	t.Helper()
	img := os.Getenv("SANDBOX_IMG")
	require.NotEmpty(t, img, "SANDBOX_IMG is set by make test-cluster")
	return img
}

// releaseImages are the flags that name the release's own images (every chart version has
// these values).
func releaseImages(t testing.TB) []string {
	t.Helper()
	var sets []string
	for _, v := range []struct{ env, repo, tag string }{
		{"IMG", "image.repository", "image.tag"},
		{"POSTGRES_IMG", "postgresql.image.repository", "postgresql.image.tag"},
		{"TEMPORAL_IMG", "temporal.devServer.image.repository", "temporal.devServer.image.tag"},
	} {
		img := os.Getenv(v.env)
		require.NotEmpty(t, img, "%s is set by make test-cluster", v.env)
		repo, tag, ok := strings.Cut(img, ":")
		require.True(t, ok, "%s=%s has a tag", v.env, img)
		sets = append(sets, "--set", v.repo+"="+repo, "--set-string", v.tag+"="+tag)
	}
	return sets
}

// TestChartFirstTry follows docs/kubernetes.md's first try on the real cluster: helm install,
// the sample resources, the REST API through port-forward, the README's Go quickstart, and a
// bash tool call that runs in a real sandbox pod.
func TestChartFirstTry(t *testing.T) {
	r := &release{ns: "agents", name: "ma"}
	start := time.Now()
	helm(t, append([]string{"install", r.name, chart, "--namespace", r.ns, "--create-namespace",
		"--wait", "--timeout", "6m"}, imageValues(t)...)...)
	t.Cleanup(func() { uninstall(t, r) })
	ready := time.Since(start)
	t.Logf("figure: helm install to every pod Ready: %s", ready.Round(time.Second))
	pods := kubectl(t, "-n", r.ns, "get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].restartCount}{\"\\n\"}{end}")
	t.Logf("pods and their restarts after install:\n%s", pods)
	// The roles wait for PostgreSQL, the migrations and Temporal instead of crash-looping.
	for _, line := range strings.Split(strings.TrimSpace(pods), "\n") {
		require.True(t, strings.HasSuffix(line, " 0"), "no pod restarted during the install: %s", line)
	}

	t.Run("samples", func(t *testing.T) {
		// kubectl apply -f config/samples/ ; kubectl get sessions -w
		kubectl(t, "apply", "-f", "../../config/samples/")
		t.Cleanup(func() {
			_, _ = tryRun(tools.kubectl, "delete", "-f", "../../config/samples/", "--wait=true", "--timeout=2m")
		})
		eventually(t, 3*time.Minute, "the sample Session answers", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "get", "session", "hello", "-o", "jsonpath={.status.status}|{.status.lastAgentMessage}")
			return err == nil && strings.HasPrefix(out, "idle|echo: Hello!"), out
		})
		t.Logf("figure: helm install to the sample session's first session.status_idle: %s", time.Since(start).Round(time.Second))
		table := kubectl(t, "get", "sessions")
		require.Regexp(t, regexp.MustCompile(`(?m)^hello\s+sesn_\S+\s+idle\s+end_turn\s+echo: Hello! What can you do\?`), table)
	})

	r.connect(t)

	t.Run("rest", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, r.api+"/v1/sessions", nil)
		require.NoError(t, err)
		req.Header.Set("x-api-key", r.key)
		req.Header.Set("anthropic-beta", "managed-agents-2026-04-01")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &page), string(body))
	})

	t.Run("go quickstart", func(t *testing.T) {
		exe := buildQuickstart(t)
		for run := range 2 {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), "API="+r.api, "KEY="+r.key)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "run %d:\n%s", run+1, out)
			require.Contains(t, string(out), "agent.message\n   echo: hello\n", "run %d", run+1)
		}
	})

	t.Run("network policy enforced", func(t *testing.T) { testNetworkPolicy(t, r) })

	t.Run("bash in a sandbox pod", func(t *testing.T) {
		s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
		begin := time.Now()
		answer := s.say(`/tool bash {"command":"id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; touch /probe 2>&1; echo done"}`)
		t.Logf("figure: first tool call of a new session (cold sandbox pod on the node): %s", time.Since(begin).Round(100*time.Millisecond))
		require.Contains(t, answer, "done", answer)
		require.NotContains(t, answer, "bash: 0\n", "not root:\n%s", answer)
		require.Regexp(t, `CapEff:\s+0000000000000000`, answer, "no capabilities")
		require.Regexp(t, `NoNewPrivs:\s+1`, answer)
		require.Regexp(t, `Seccomp:\s+2`, answer, "a seccomp filter")
		require.Contains(t, answer, "Read-only file system", "a read-only root")

		pod := sandboxPod(t, r, s.id)
		var spec struct {
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot *bool `json:"runAsNonRoot"`
				} `json:"securityContext"`
				InitContainers []podContainer `json:"initContainers"`
				Containers     []podContainer `json:"containers"`
			} `json:"spec"`
		}
		require.NoError(t, json.Unmarshal([]byte(kubectl(t, "-n", r.ns, "get", "pod", pod, "-o", "json")), &spec))
		require.NotNil(t, spec.Spec.SecurityContext.RunAsNonRoot)
		require.True(t, *spec.Spec.SecurityContext.RunAsNonRoot)
		require.Len(t, spec.Spec.Containers, 1)
		sandbox := spec.Spec.Containers[0]
		// The environment names no resources: the deployment's defaults, as the chart set them.
		require.Equal(t, map[string]string{"cpu": "200m", "memory": "256Mi"}, pick(sandbox.Resources.Limits, "cpu", "memory"))
		require.Equal(t, pick(sandbox.Resources.Limits, "cpu", "memory"), pick(sandbox.Resources.Requests, "cpu", "memory"), "requests = limits")
		for _, c := range spec.Spec.InitContainers {
			for _, res := range []string{"cpu", "memory"} {
				require.NotEmpty(t, c.Resources.Limits[res], "init container %s has a %s limit", c.Name, res)
			}
		}
	})
}

// probeScript prints, for each host:port, "reached ADDR" when a TCP connection opens within
// 5 seconds, "blocked ADDR" when it times out or is refused or unreachable (what a
// NetworkPolicy's drop or reject looks like), and "error ADDR" for anything else, so that a
// broken probe never passes for a policy.
func probeScript(addrs ...string) string {
	return `for a in ` + strings.Join(addrs, " ") + `; do ` +
		`err=$(timeout 5 bash -c "exec 3<>/dev/tcp/${a%:*}/${a#*:}" 2>&1); rc=$?; ` +
		`if [ $rc = 0 ]; then echo "reached $a"; ` +
		`elif [ $rc = 124 ] || echo "$err" | grep -qiE 'refused|unreachable'; then echo "blocked $a"; ` +
		`else echo "error $a rc=$rc $err"; fi; done`
}

// testNetworkPolicy checks that a sandbox whose effective egress is none (the default
// ceiling) reaches nothing: not the bundled PostgreSQL by Service or pod address, not cluster
// DNS, not the API server, while a pod of the same image in the same namespace without the
// sandbox's NetworkPolicy reaches PostgreSQL (so "blocked" is the policy, not a broken network).
func testNetworkPolicy(t *testing.T, r *release) {
	pg := r.fullname() + "-postgresql"
	svcIP := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "svc", pg, "-o", "jsonpath={.spec.clusterIP}"))
	podIP := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", pg+"-0", "-o", "jsonpath={.status.podIP}"))
	targets := []string{svcIP + ":5432", podIP + ":5432", "10.96.0.10:53", "10.96.0.1:443"}

	// The control: no policy selects this pod, and it reaches every target.
	script := probeScript(targets...)
	kubectl(t, "-n", r.ns, "run", "netprobe", "--image="+os.Getenv("SANDBOX_IMG"), "--image-pull-policy=Never",
		"--restart=Never", "--command", "--", "bash", "-c", script)
	t.Cleanup(func() { _, _ = tryRun(tools.kubectl, "-n", r.ns, "delete", "pod", "netprobe", "--wait=false") })
	eventually(t, 2*time.Minute, "the control pod finishes", func() (bool, string) {
		out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pod", "netprobe", "-o", "jsonpath={.status.phase}")
		return err == nil && (out == "Succeeded" || out == "Failed"), out
	})
	control := kubectl(t, "-n", r.ns, "logs", "netprobe")
	for _, a := range targets {
		require.Contains(t, control, "reached "+a, "a pod without the sandbox's policy reaches it:\n%s", control)
	}

	s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
	answer := s.say(`/tool bash ` + mustJSON(t, map[string]string{"command": probeScript(targets...)}))
	for _, a := range targets {
		require.Contains(t, answer, "blocked "+a, "the sandbox reaches nothing:\n%s", answer)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

type podContainer struct {
	Name      string `json:"name"`
	Resources struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	} `json:"resources"`
}

func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// sandboxPod names the sandbox pod of a session (its SandboxBinding's pod).
func sandboxPod(t testing.TB, r *release, sessionID string) string {
	t.Helper()
	var name string
	eventually(t, time.Minute, "the session's sandbox pod", func() (bool, string) {
		out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pods", "-l", "agents.managed-agents.io/session-id="+sessionID,
			"-o", "jsonpath={.items[*].metadata.name}")
		name = strings.TrimSpace(out)
		return err == nil && name != "" && !strings.Contains(name, " "), out
	})
	return name
}

func uninstall(t testing.TB, r *release) {
	if t.Failed() {
		out, _ := tryRun(tools.kubectl, "get", "pods", "-A", "-o", "wide")
		t.Logf("pods at failure:\n%s", out)
		for _, role := range []string{"api", "worker", "controller"} {
			logs, _ := tryRun(tools.kubectl, "-n", r.ns, "logs", "deploy/"+r.fullname()+"-"+role, "--tail=60")
			t.Logf("%s logs:\n%s", role, logs)
		}
	}
	// docs/kubernetes.md's uninstall: sandboxes go first, while the controller that removes
	// their finalizers still runs; then the release.
	for _, step := range [][]string{
		{tools.kubectl, "-n", r.ns, "delete", "sandboxbindings", "--all", "--wait=true", "--timeout=2m"},
		{tools.helm, "uninstall", r.name, "--namespace", r.ns, "--wait", "--timeout", "3m"},
		{tools.kubectl, "delete", "namespace", r.ns, "--wait=true", "--timeout=3m"},
	} {
		begin := time.Now()
		_, err := tryRun(step[0], step[1:]...)
		t.Logf("uninstall: %s %s: %s (%v)", filepath.Base(step[0]), strings.Join(step[1:3], " "), time.Since(begin).Round(time.Second), err)
	}
}

// buildQuickstart compiles the README's Go SDK quickstart as written.
func buildQuickstart(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "\n## Quickstart with the Go SDK\n")
	require.NotEqual(t, -1, start)
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(text[start:])
	require.NotNil(t, m, "the section has a Go block")
	dir, err := os.MkdirTemp(".", "quickstart-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(m[1]), 0o644))
	exe := filepath.Join(t.TempDir(), "quickstart")
	out, err := exec.Command("go", "build", "-o", exe, "./"+dir).CombinedOutput()
	require.NoError(t, err, "the Go quickstart compiles:\n%s", out)
	return exe
}
