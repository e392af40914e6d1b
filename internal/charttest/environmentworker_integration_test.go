//go:build integration

package charttest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/managed-agents/managed-agents/internal/app"
)

// environmentWorker is the values that turn the environment worker on, its key in a Secret
// the operator manages.
var environmentWorker = []string{"--set", "environmentWorker.enabled=true", "--set", "environmentWorker.environmentID=env_01rack",
	"--set", "environmentWorker.existingSecret=rack-1-key", "--set", "environmentWorker.existingSecretKey=key"}

// TestEnvironmentWorkerRefused: an environment worker the chart cannot deploy fails at render
// time with a message that names the value to set.
func TestEnvironmentWorkerRefused(t *testing.T) {
	on := []string{"--set", "environmentWorker.enabled=true"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no environment id", []string{"--set", "environmentWorker.existingSecret=k"}, "at '/environmentWorker/environmentID': minLength"},
		{"no environment id, schema skipped", []string{"--skip-schema-validation", "--set", "environmentWorker.existingSecret=k"},
			"environmentWorker.enabled=true needs environmentWorker.environmentID"},
		{"an id that is no environment's", []string{"--set", "environmentWorker.environmentID=sesn_1", "--set", "environmentWorker.existingSecret=k"},
			"at '/environmentWorker/environmentID': 'sesn_1' does not match pattern"},
		{"no key", []string{"--set", "environmentWorker.environmentID=env_1"}, "environmentWorker.enabled=true needs the environment's key"},
		{"two keys", []string{"--set", "environmentWorker.environmentID=env_1", "--set", "environmentWorker.existingSecret=k",
			"--set", "environmentWorker.environmentKey=sk-ma-k"}, "environmentWorker.environmentKey and environmentWorker.existingSecret are both set"},
		{"a key the chart's Secret would not hold", []string{"--set", "environmentWorker.environmentID=env_1", "--set", "environmentWorker.environmentKey=sk-ma-k",
			"--set", "existingSecret=creds"}, "environmentWorker.environmentKey is not used with existingSecret"},
		{"a server URL without a scheme", []string{"--set", "environmentWorker.environmentID=env_1", "--set", "environmentWorker.existingSecret=k",
			"--set", "environmentWorker.serverURL=agents.example.com"}, "at '/environmentWorker/serverURL': 'agents.example.com' does not match pattern"},
		{"no concurrency", []string{"--set", "environmentWorker.environmentID=env_1", "--set", "environmentWorker.existingSecret=k",
			"--set", "environmentWorker.concurrency=0"}, "at '/environmentWorker/concurrency'"},
		{"a max idle that is no duration", []string{"--set", "environmentWorker.environmentID=env_1", "--set", "environmentWorker.existingSecret=k",
			"--set", "environmentWorker.maxIdle=long"}, "at '/environmentWorker/maxIdle': 'long' does not match pattern"},
		{"kubernetes sandboxes without the controller", []string{"--set", "environmentWorker.environmentID=env_1", "--set", "environmentWorker.existingSecret=k",
			"--set", "sandbox.provider=local", "--set", "controller.enabled=false", "--set", "environmentWorker.sandboxProvider=kubernetes"},
			"environmentWorker.sandboxProvider=kubernetes needs controller.enabled=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmTemplate(t, append(on, tc.args...)...)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestEnvironmentWorkerRendered: off, nothing of the environment worker renders; on, its
// Deployment runs `environment-worker` from the chart's image with the server, the environment
// and the key by reference, and the worker's sandbox wiring.
func TestEnvironmentWorkerRendered(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		out, err := helmTemplate(t)
		require.NoError(t, err)
		for _, absent := range []string{"environment-worker", "MANAGED_AGENT_ENVIRONMENT_", "MANAGED_AGENT_SERVER_URL", "environment-key", "sandbox-client"} {
			require.NotContains(t, out, absent)
		}
		off, err := helmTemplate(t, "--set", "environmentWorker.enabled=false", "--set", "environmentWorker.environmentID=env_1",
			"--set", "vault.keys=k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "--set", "auth.apiKey=sk-ma-1", "--set", "postgresql.password=p")
		require.NoError(t, err)
		def, err := helmTemplate(t, "--set", "vault.keys=k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "--set", "auth.apiKey=sk-ma-1", "--set", "postgresql.password=p")
		require.NoError(t, err)
		require.Equal(t, def, off, "disabled, its other values change nothing")
	})

	t.Run("on: the Deployment, its key by reference, the worker's sandbox wiring", func(t *testing.T) {
		args := append([]string{"--set", "sandbox.kubernetes.namespace=sandboxes", "--set", "sandbox.kubernetes.runtimeClassName=gvisor",
			"--set", "environmentWorker.concurrency=8", "--set", "environmentWorker.maxIdle=5m", "--set", "extraEnv[0].name=MANAGED_AGENT_SANDBOX_NETWORK", "--set", "extraEnv[0].value=allowlist"},
			environmentWorker...)
		r := renderChart(t, args...)
		var ew, worker, controller appsv1.Deployment
		r.get(t, "Deployment", "ma-managed-agents-environment-worker", &ew)
		r.get(t, "Deployment", "ma-managed-agents-worker", &worker)
		r.get(t, "Deployment", "ma-managed-agents-controller", &controller)
		pod := ew.Spec.Template.Spec
		require.Len(t, pod.Containers, 1)
		c := pod.Containers[0]
		w := worker.Spec.Template.Spec.Containers[0]
		require.Equal(t, []string{"environment-worker"}, c.Args)
		require.Equal(t, w.Image, c.Image, "the chart's image")
		require.Equal(t, w.SecurityContext, c.SecurityContext)
		require.Equal(t, worker.Spec.Template.Spec.SecurityContext, pod.SecurityContext)
		require.Equal(t, "environment-worker", ew.Spec.Selector.MatchLabels["app.kubernetes.io/component"])
		require.Equal(t, "ma-managed-agents-environment-worker", pod.ServiceAccountName)
		require.True(t, pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken, "the kubernetes provider talks to the apiserver")

		require.Equal(t, "http://ma-managed-agents.default.svc:8080", envValue(t, c, "MANAGED_AGENT_SERVER_URL"), "this release's API by default")
		require.Equal(t, "env_01rack", envValue(t, c, "MANAGED_AGENT_ENVIRONMENT_ID"))
		require.Equal(t, "8", envValue(t, c, "MANAGED_AGENT_ENVIRONMENT_WORKER_CONCURRENCY"))
		require.Equal(t, "5m", envValue(t, c, "MANAGED_AGENT_ENVIRONMENT_WORKER_MAX_IDLE"))
		ref := envSecret(t, c, "MANAGED_AGENT_ENVIRONMENT_KEY")
		require.Equal(t, "rack-1-key", ref.Name)
		require.Equal(t, "key", ref.Key)
		require.True(t, ref.Optional == nil || !*ref.Optional, "without its key the pod must not start")
		// The worker's sandbox settings, the same values.
		for _, name := range []string{"MANAGED_AGENT_SANDBOX", "MANAGED_AGENT_KUBERNETES_NAMESPACE", "MANAGED_AGENT_KUBERNETES_IMAGE",
			"MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS", "MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT", "MANAGED_AGENT_SANDBOX_NETWORK", "MANAGED_AGENT_SANDBOX_DIR"} {
			require.Equal(t, envValue(t, w, name), envValue(t, c, name), name)
		}
		for _, e := range c.Env {
			require.NotContains(t, []string{"MANAGED_AGENT_DATABASE_URL", "MANAGED_AGENT_TEMPORAL_ADDRESS", "MANAGED_AGENT_VAULT_KEYS",
				"MANAGED_AGENT_API_KEY", "MANAGED_AGENT_MODEL"}, e.Name, "no database, no Temporal, no credential but its key")
		}
		require.Empty(t, c.Ports, "it serves nothing")

		// The server accepts the environment the chart gives it.
		env := map[string]string{"MANAGED_AGENT_ENVIRONMENT_KEY": "sk-ma-environment"}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
		cfg := app.FromLookup(app.Config{}, func(name string) (string, bool) {
			v, ok := env[name]
			return v, ok
		})
		require.NoError(t, cfg.Validate())
		require.Equal(t, "env_01rack", cfg.EnvironmentID)
		require.Equal(t, 8, cfg.EnvironmentWorkerConcurrency)
		require.Equal(t, 5*time.Minute, cfg.EnvironmentWorkerMaxIdle)

		// Its own Role in the sandbox namespace, the worker's rules.
		var role, workerRole rbacv1.Role
		var binding rbacv1.RoleBinding
		r.get(t, "Role", "ma-managed-agents-environment-worker-sandboxes", &role)
		r.get(t, "Role", "ma-managed-agents-worker-sandboxes", &workerRole)
		r.get(t, "RoleBinding", "ma-managed-agents-environment-worker-sandboxes", &binding)
		require.Equal(t, "sandboxes", role.Namespace)
		require.Equal(t, workerRole.Rules, role.Rules)
		require.Equal(t, "ma-managed-agents-environment-worker-sandboxes", binding.RoleRef.Name)
		require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ma-managed-agents-environment-worker", Namespace: "default"}}, binding.Subjects)
		var sa corev1.ServiceAccount
		r.get(t, "ServiceAccount", "ma-managed-agents-environment-worker", &sa)

		// Sandbox pods let both the worker and the environment worker reach sandboxd.
		require.Equal(t, "app.kubernetes.io/instance=ma,managed-agents.io/sandbox-client=true",
			envValue(t, controller.Spec.Template.Spec.Containers[0], "MANAGED_AGENT_SANDBOX_WORKER_SELECTOR"))
		require.Equal(t, "true", ew.Spec.Template.Labels["managed-agents.io/sandbox-client"])
		require.Equal(t, "true", worker.Spec.Template.Labels["managed-agents.io/sandbox-client"])
		require.NotContains(t, worker.Spec.Selector.MatchLabels, "managed-agents.io/sandbox-client", "a Deployment's selector never changes")
	})

	t.Run("the key in the chart's Secret, another server, another provider", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "environmentWorker.enabled=true", "--set", "environmentWorker.environmentID=env_01rack",
			"--set", "environmentWorker.environmentKey=sk-ma-environment-secret", "--set", "environmentWorker.serverURL=https://agents.example.com",
			"--set", "environmentWorker.sandboxProvider=docker", "--set", "sandbox.docker.host=tcp://docker.sandboxes:2375")
		require.NoError(t, err)
		for _, doc := range strings.Split(out, "\n---\n") {
			if strings.Contains(doc, "\nkind: Secret\n") {
				require.Contains(t, doc, "environment-key: ")
				continue
			}
			require.NotContains(t, doc, "sk-ma-environment-secret", "the key stays in the Secret")
		}
		r := renderChart(t, "--set", "environmentWorker.enabled=true", "--set", "environmentWorker.environmentID=env_01rack",
			"--set", "environmentWorker.environmentKey=sk-ma-environment-secret", "--set", "environmentWorker.serverURL=https://agents.example.com",
			"--set", "environmentWorker.sandboxProvider=docker", "--set", "sandbox.docker.host=tcp://docker.sandboxes:2375")
		var ew, worker, controller appsv1.Deployment
		r.get(t, "Deployment", "ma-managed-agents-environment-worker", &ew)
		r.get(t, "Deployment", "ma-managed-agents-worker", &worker)
		r.get(t, "Deployment", "ma-managed-agents-controller", &controller)
		c := ew.Spec.Template.Spec.Containers[0]
		ref := envSecret(t, c, "MANAGED_AGENT_ENVIRONMENT_KEY")
		require.Equal(t, "ma-managed-agents", ref.Name)
		require.Equal(t, "environment-key", ref.Key)
		require.Equal(t, "https://agents.example.com", envValue(t, c, "MANAGED_AGENT_SERVER_URL"))
		require.Equal(t, "docker", envValue(t, c, "MANAGED_AGENT_SANDBOX"))
		for _, e := range c.Env {
			require.NotEqual(t, "MANAGED_AGENT_ENVIRONMENT_WORKER_MAX_IDLE", e.Name, "empty: the server's default")
		}
		require.Equal(t, "tcp://docker.sandboxes:2375", envValue(t, c, "DOCKER_HOST"))
		require.Equal(t, "kubernetes", envValue(t, worker.Spec.Template.Spec.Containers[0], "MANAGED_AGENT_SANDBOX"), "the worker keeps sandbox.provider")
		require.False(t, *ew.Spec.Template.Spec.AutomountServiceAccountToken, "docker needs no Kubernetes credentials")
		_, ok := r["Role/ma-managed-agents-environment-worker-sandboxes"]
		require.False(t, ok, "a Role only with the kubernetes provider")
		require.Equal(t, "app.kubernetes.io/instance=ma,app.kubernetes.io/component=worker",
			envValue(t, controller.Spec.Template.Spec.Containers[0], "MANAGED_AGENT_SANDBOX_WORKER_SELECTOR"))
		require.NotContains(t, worker.Spec.Template.Labels, "managed-agents.io/sandbox-client")

		// With the top-level existingSecret the key is that Secret's environment-key.
		r = renderChart(t, "-f", filepath.Join(repoRoot(t), "charts", "managed-agents", "ci", "production-values.yaml"),
			"--set", "environmentWorker.enabled=true", "--set", "environmentWorker.environmentID=env_01rack")
		r.get(t, "Deployment", "ma-managed-agents-environment-worker", &ew)
		ref = envSecret(t, ew.Spec.Template.Spec.Containers[0], "MANAGED_AGENT_ENVIRONMENT_KEY")
		require.Equal(t, "managed-agents-credentials", ref.Name)
		require.Equal(t, "environment-key", ref.Key)
	})
}
