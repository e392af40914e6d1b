//go:build cluster

package clustertest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"
)

// binding is the part of a SandboxBinding the lifecycle test reads.
type binding struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		SessionID string `json:"sessionID"`
	} `json:"spec"`
	Status struct {
		Phase    string `json:"phase"`
		PodName  string `json:"podName"`
		WarmPool string `json:"warmPool"`
	} `json:"status"`
}

func sessionBinding(t testing.TB, r *release, sessionID string) binding {
	t.Helper()
	var list struct {
		Items []binding `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(kubectl(t, "-n", r.ns, "get", "sandboxbindings", "-o", "json")), &list))
	for _, b := range list.Items {
		if b.Spec.SessionID == sessionID {
			return b
		}
	}
	require.FailNow(t, "no SandboxBinding for session "+sessionID)
	return binding{}
}

// TestSandboxLifecycle runs the kubernetes provider's two promises on the real node: the warm
// pool hands a started pod to a new session, and a persistent workspace survives its idle
// suspension (pod deleted, claim kept) and the resume on a new pod.
func TestSandboxLifecycle(t *testing.T) {
	r := &release{ns: "lifecycle", name: "lc"}
	helm(t, append([]string{"install", r.name, chart, "--namespace", r.ns, "--create-namespace",
		"--wait", "--timeout", "6m", "--set", "sandbox.kubernetes.warmPool.replicas=1"}, imageValues(t)...)...)
	t.Cleanup(func() { uninstall(t, r) })
	r.connect(t)

	t.Run("warm pool", func(t *testing.T) {
		eventually(t, 2*time.Minute, "a ready pool pod", func() (bool, string) {
			out, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pods", "-l", "agents.managed-agents.io/sandbox-warm-pool",
				"-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{end}")
			return err == nil && strings.Contains(out, "True"), out
		})
		s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
		begin := time.Now()
		answer := s.say(`/tool bash {"command":"echo warm"}`)
		t.Logf("figure: first tool call of a new session with a warm pool pod: %s", time.Since(begin).Round(100*time.Millisecond))
		require.Contains(t, answer, "bash: warm")
		b := sessionBinding(t, r, s.id)
		require.NotEmpty(t, b.Status.WarmPool, "the session's binding claimed a pool pod")
		require.NotEqual(t, b.Metadata.Name, b.Status.PodName, "its pod is the pool's, not one of its own")
	})

	t.Run("persistent workspace across suspend and resume", func(t *testing.T) {
		helm(t, append([]string{"upgrade", r.name, chart, "--namespace", r.ns, "--wait", "--timeout", "6m",
			"--set", "sandbox.kubernetes.persistentWorkspace=true", "--set", "sandbox.idleStop=1m"}, imageValues(t)...)...)
		r.connect(t)
		s := r.newSession(t, anthropic.BetaEnvironmentNewParamsConfigUnion{})
		require.Contains(t, s.say(`/tool bash {"command":"echo kept > notes.txt && echo written"}`), "bash: written")
		b := sessionBinding(t, r, s.id)
		firstPod := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", b.Status.PodName, "-o", "jsonpath={.metadata.uid}"))
		eventually(t, 4*time.Minute, "the idle sandbox is suspended and its pod deleted", func() (bool, string) {
			b := sessionBinding(t, r, s.id)
			_, err := tryRun(tools.kubectl, "-n", r.ns, "get", "pod", b.Status.PodName)
			return b.Status.Phase == "Suspended" && err != nil, b.Status.Phase
		})
		claims := kubectl(t, "-n", r.ns, "get", "pvc", "-o", "jsonpath={.items[*].metadata.name}")
		require.Contains(t, claims, b.Metadata.Name+"-workspace", "the claim is kept while suspended")
		begin := time.Now()
		answer := s.say(`/tool bash {"command":"cat notes.txt"}`)
		t.Logf("figure: first tool call after an idle suspension (a new pod on the kept claim): %s", time.Since(begin).Round(100*time.Millisecond))
		require.Contains(t, answer, "bash: kept", "the workspace survived the suspension")
		b = sessionBinding(t, r, s.id)
		secondPod := strings.TrimSpace(kubectl(t, "-n", r.ns, "get", "pod", b.Status.PodName, "-o", "jsonpath={.metadata.uid}"))
		require.NotEqual(t, firstPod, secondPod, "the resume ran on a new pod")
	})
}
