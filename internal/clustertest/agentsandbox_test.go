//go:build cluster

package clustertest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandboxtoken"
)

// agentSandboxBinding is the part of a SandboxBinding this test reads beyond binding's.
type agentSandboxBinding struct {
	Status struct {
		Substrate   string `json:"substrate"`
		TokenSecret string `json:"tokenSecret"`
		ExternalID  string `json:"externalID"`
	} `json:"status"`
}

func readAgentSandboxBinding(t testing.TB, r *release, name string) agentSandboxBinding {
	t.Helper()
	var b agentSandboxBinding
	require.NoError(t, json.Unmarshal([]byte(kubectl(t, "-n", r.ns, "get", "sandboxbinding", name, "-o", "json")), &b))
	return b
}

// podController is "Kind/name" of pod's controller.
func podController(t testing.TB, r *release, pod string) string {
	t.Helper()
	return strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", pod, "-o",
		`jsonpath={.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].name}`))
}

// TestAgentSandboxSubstrate runs the chart with sandbox.kubernetes.substrate=agent-sandbox on a
// cluster that runs kubernetes-sigs/agent-sandbox's controller (make test-cluster starts it):
// the warm pool is an agent-sandbox SandboxWarmPool whose started sandbox a session claims
// with a SandboxClaim, a cold session gets a Sandbox of its own, the sandbox's NetworkPolicy
// holds on both, and a persistent workspace survives an idle suspension done through the
// Sandbox's operating mode.
func TestAgentSandboxSubstrate(t *testing.T) {
	r := &release{ns: "substrate", name: "as"}
	begin := time.Now()
	helm(t, append([]string{"install", r.name, chart, "--namespace", r.ns, "--create-namespace",
		"--wait", "--timeout", "6m", "--set", "sandbox.kubernetes.substrate=agent-sandbox",
		"--set", "sandbox.kubernetes.warmPool.replicas=1"}, imageValues(t)...)...)
	t.Logf("figure: helm install on the agent-sandbox substrate to every pod Ready: %s", time.Since(begin).Round(time.Second))
	t.Cleanup(func() { uninstall(t, r) })
	r.connect(t)

	t.Run("warm pool through a SandboxClaim", func(t *testing.T) {
		pool := r.fullname() + "-default" // the chart's SandboxWarmPool
		eventually(t, 3*time.Minute, "agent-sandbox's warm pool has a ready sandbox", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "sandboxwarmpools.extensions.agents.x-k8s.io", pool, "-o", "jsonpath={.status.readyReplicas}")
			return err == nil && out == "1", out
		})
		tmpl := kubectl(t, "-n", r.ns, "get", "sandboxtemplates.extensions.agents.x-k8s.io", pool, "-o", "jsonpath={.metadata.ownerReferences[0].kind}")
		require.Equal(t, "SandboxWarmPool", tmpl, "the template is the chart's pool's")

		s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
		begin := time.Now()
		answer := s.say(`/tool bash {"command":"echo warm; id -u"}`)
		t.Logf("figure: first tool call of a new session claiming an agent-sandbox warm sandbox: %s", time.Since(begin).Round(100*time.Millisecond))
		require.Contains(t, answer, "bash: warm")
		require.NotContains(t, answer, "\n0\n", "not root")

		b := sessionBinding(t, r, s.id)
		ab := readAgentSandboxBinding(t, r, b.Metadata.Name)
		require.Equal(t, "agent-sandbox", ab.Status.Substrate)
		require.Equal(t, pool, b.Status.WarmPool, "claimed from the chart's pool")
		require.Equal(t, b.Metadata.Name+"-token", ab.Status.TokenSecret, "a Secret of the binding's own")
		claimed := kubectl(t, "-n", r.ns, "get", "sandboxclaims.extensions.agents.x-k8s.io", b.Metadata.Name, "-o",
			"jsonpath={.spec.warmPoolRef.name}|{.status.sandbox.name}|{.metadata.ownerReferences[0].kind}")
		require.Equal(t, pool+"|"+b.Status.PodName+"|SandboxBinding", claimed, "the binding's SandboxClaim names the pool and the pod's sandbox")
		require.Equal(t, "Sandbox/"+b.Status.PodName, podController(t, r, b.Status.PodName), "agent-sandbox made the pod")
		uid := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", b.Status.PodName, "-o", "jsonpath={.metadata.uid}"))
		require.Equal(t, uid, ab.Status.ExternalID)
		// The pool's pods share one key; the claimed pod's token is derived for its UID, and
		// the answer above shows its sandboxd accepted it.
		key, err := decodeBase64(kubectl(t, "-n", r.ns, "get", "secret", pool+"-token", "-o", "jsonpath={.data.token}"))
		require.NoError(t, err)
		token, err := decodeBase64(kubectl(t, "-n", r.ns, "get", "secret", ab.Status.TokenSecret, "-o", "jsonpath={.data.token}"))
		require.NoError(t, err)
		require.Equal(t, sandboxtoken.Derive(key, uid), token)
		require.NotEqual(t, key, token)

		eventually(t, 3*time.Minute, "the pool starts a replacement", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "sandboxwarmpools.extensions.agents.x-k8s.io", pool, "-o", "jsonpath={.status.readyReplicas}")
			return err == nil && out == "1", out
		})
	})

	// With the pool's ready sandbox claimed or not, the probe's session runs on an agent-sandbox
	// pod: fenced by its binding's policy either way.
	t.Run("network policy enforced", func(t *testing.T) { testNetworkPolicy(t, r) })

	t.Run("own Sandbox, persistent workspace across suspend and resume", func(t *testing.T) {
		helm(t, append([]string{"upgrade", r.name, chart, "--namespace", r.ns, "--wait", "--timeout", "6m",
			"--set", "sandbox.kubernetes.substrate=agent-sandbox", "--set", "sandbox.kubernetes.warmPool.replicas=1",
			"--set", "sandbox.kubernetes.persistentWorkspace=true", "--set", "sandbox.idleStop=1m"}, imageValues(t)...)...)
		r.connect(t)
		s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
		begin := time.Now()
		require.Contains(t, s.say(`/tool bash {"command":"echo kept > notes.txt && echo written"}`), "bash: written")
		t.Logf("figure: first tool call of a new session on a cold agent-sandbox Sandbox with a persistent workspace: %s", time.Since(begin).Round(100*time.Millisecond))
		b := sessionBinding(t, r, s.id)
		require.Empty(t, b.Status.WarmPool, "a persistent workspace never claims (the pool's pods have none)")
		require.Equal(t, "agent-sandbox", readAgentSandboxBinding(t, r, b.Metadata.Name).Status.Substrate)
		require.Equal(t, b.Metadata.Name, b.Status.PodName)
		require.Equal(t, "Sandbox/"+b.Metadata.Name, podController(t, r, b.Status.PodName))
		require.Equal(t, "SandboxBinding/"+b.Metadata.Name, strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "sandboxes.agents.x-k8s.io", b.Metadata.Name, "-o",
			`jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}`)))
		firstPod := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", b.Status.PodName, "-o", "jsonpath={.metadata.uid}"))

		eventually(t, 4*time.Minute, "the idle sandbox is suspended through its Sandbox and its pod deleted", func() (bool, string) {
			b := sessionBinding(t, r, s.id)
			mode, _ := tryRun(tools.kubectl, "-n", r.ns, "get", "sandboxes.agents.x-k8s.io", b.Metadata.Name, "-o", "jsonpath={.spec.operatingMode}")
			_, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pod", b.Status.PodName)
			return b.Status.Phase == "Suspended" && mode == "Suspended" && err != nil, b.Status.Phase + " " + mode
		})
		claims := kubectl(t, "-n", r.ns, "get", "pvc", "-o", "jsonpath={.items[*].metadata.name}")
		require.Contains(t, claims, b.Metadata.Name+"-workspace", "the claim is kept while suspended")

		begin = time.Now()
		answer := s.say(`/tool bash {"command":"cat notes.txt"}`)
		t.Logf("figure: first tool call after an idle suspension on agent-sandbox (the Sandbox running again): %s", time.Since(begin).Round(100*time.Millisecond))
		require.Contains(t, answer, "bash: kept", "the workspace survived the suspension")
		require.Equal(t, "Running", strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "sandboxes.agents.x-k8s.io", b.Metadata.Name, "-o", "jsonpath={.spec.operatingMode}")))
		secondPod := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", b.Status.PodName, "-o", "jsonpath={.metadata.uid}"))
		require.NotEqual(t, firstPod, secondPod, "the resume ran on a new pod")

		// Deleting the session deletes its binding, and the binding its Sandbox and claim.
		_, err := r.client.Beta.Sessions.Delete(t.Context(), s.id, anthropic.BetaSessionDeleteParams{})
		require.NoError(t, err)
		eventually(t, 2*time.Minute, "the Sandbox goes with its binding", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "sandboxes.agents.x-k8s.io", b.Metadata.Name)
			if err != nil {
				return strings.Contains(err.Error(), "NotFound"), err.Error()
			}
			return false, out
		})
		eventually(t, time.Minute, "the binding, its pod and its policy go", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "sandboxbindings,pods,networkpolicies", "-l", "agents.managed-agents.io/sandbox-binding="+b.Metadata.Name, "-o", "name")
			return err == nil && strings.TrimSpace(out) == "", out
		})
	})

	// sandbox.kubernetes.runtimeClassName reaches the pod through the Sandbox's template: the
	// test cluster's RuntimeClass gvisor runs it under runsc (hack/cluster/gvisor-assets.sh).
	t.Run("gVisor", func(t *testing.T) {
		if _, err := tryRun(tools.kubectl, "get", "runtimeclass", "gvisor"); err != nil {
			if os.Getenv("CI") == "true" {
				require.NoError(t, err, "the test cluster has no RuntimeClass gvisor: up.sh says why gVisor did not build or run")
			}
			t.Skipf("the cluster has no RuntimeClass gvisor: %v", err)
		}
		helm(t, append([]string{"upgrade", r.name, chart, "--namespace", r.ns, "--wait", "--timeout", "6m",
			"--set", "sandbox.kubernetes.substrate=agent-sandbox", "--set", "sandbox.kubernetes.runtimeClassName=gvisor"}, imageValues(t)...)...)
		r.connect(t)
		s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
		begin := time.Now()
		answer := s.say(`/tool bash {"command":"cat /proc/version; id -u; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; touch /probe 2>&1; echo done"}`)
		t.Logf("figure: first tool call of a new session on a cold agent-sandbox Sandbox under gVisor: %s", time.Since(begin).Round(100*time.Millisecond))
		require.Contains(t, answer, "gvisor", "the sandbox's kernel is gVisor's:\n%s", answer)
		require.Contains(t, answer, "65532")
		require.Regexp(t, `CapEff:\s+0000000000000000`, answer)
		require.Regexp(t, `NoNewPrivs:\s+1`, answer)
		// gVisor checks permissions before the read-only mount, Linux the other way round:
		// either way the root is not writable.
		require.Regexp(t, `Read-only file system|Permission denied`, answer)
		b := sessionBinding(t, r, s.id)
		require.Equal(t, "gvisor", strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", b.Status.PodName, "-o", "jsonpath={.spec.runtimeClassName}")))
	})
}
