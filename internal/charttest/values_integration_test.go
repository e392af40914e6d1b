//go:build integration

package charttest

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// helmTemplate renders the chart with the pinned helm (bin/ is first on PATH under make) and
// returns the manifest, or helm's error output.
func helmTemplate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	chart := filepath.Join(repoRoot(t), "charts", "managed-agents")
	cmd := exec.Command("helm", append([]string{"template", "ma", chart, "--kube-version", kubeVersion}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &helmError{err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

// TestValuesRefused: values the chart cannot deploy fail at render time with a message that
// names the value to fix, before anything reaches a cluster.
func TestValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--set", "replicas=2"}, "additional properties 'replicas' not allowed"},
		{"unknown nested key", []string{"--set", "api.port=9090"}, "additional properties 'port' not allowed"},
		{"unknown model", []string{"--set", "model.provider=openai"}, "at '/model/provider': value must be one of 'fake', 'anthropic'"},
		{"unknown sandbox", []string{"--set", "sandbox.provider=firecracker"}, "at '/sandbox/provider': value must be one of 'local', 'docker', 'kubernetes'"},
		{"kubernetes without an image", []string{"--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image="}, "sandbox.provider=kubernetes needs sandbox.kubernetes.image"},
		{"kubernetes without the controller", []string{"--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13", "--set", "controller.enabled=false"}, "sandbox.provider=kubernetes needs controller.enabled=true"},
		{"bad duration", []string{"--set", "worker.stopTimeout=soon"}, "at '/worker/stopTimeout': 'soon' does not match pattern"},
		{"temporal address without port", []string{"--set", "temporal.devServer.enabled=false", "--set", "temporal.address=temporal"}, "at '/temporal/address': 'temporal' does not match pattern"},
		{"no database", []string{"--set", "postgresql.enabled=false"}, "postgresql.enabled=false needs externalDatabase.url"},
		{"two databases", []string{"--set", "externalDatabase.url=postgres://u:p@db:5432/x"}, "set postgresql.enabled=false"},
		{"no temporal", []string{"--set", "temporal.devServer.enabled=false"}, "temporal.devServer.enabled=false needs temporal.address"},
		{"two temporals", []string{"--set", "temporal.address=t:7233"}, "set temporal.devServer.enabled=false"},
		{"anthropic without a key", []string{"--set", "model.provider=anthropic", "--set", "sandbox.allowUnsafeLocal=true"}, "model.provider=anthropic needs model.anthropic.apiKey"},
		{"unknown search backend", []string{"--set", "worker.webSearch.backend=bing"}, "at '/worker/webSearch/backend': value must be one of '', 'searxng'"},
		{"search backend without a URL", []string{"--set", "worker.webSearch.backend=searxng"}, "worker.webSearch.backend needs worker.webSearch.url"},
		{"short admin key", []string{"--set", "auth.adminKey=short"}, "at '/auth/adminKey': 'short' does not match pattern"},
		{"unknown trace exporter", []string{"--set", "tracing.exporter=zipkin"}, "at '/tracing/exporter': value must be one of 'none', 'otlp-http', 'otlp-grpc'"},
		{"trace endpoint without a scheme", []string{"--set", "tracing.exporter=otlp-grpc", "--set", "tracing.endpoint=collector:4317"}, "at '/tracing/endpoint': 'collector:4317' does not match pattern"},
		{"anthropic with the local sandbox", []string{"--set", "model.provider=anthropic", "--set", "model.anthropic.apiKey=k", "--set", "sandbox.provider=local"}, "needs sandbox.allowUnsafeLocal=true"},
		{"sandbox CPU that is no quantity", []string{"--set", "sandbox.kubernetes.defaultResources.cpu=lots"}, "at '/sandbox/kubernetes/defaultResources/cpu': 'lots' does not match pattern"},
		{"no sandbox CPU", []string{"--set", "sandbox.kubernetes.defaultResources.cpu=0"}, "at '/sandbox/kubernetes/defaultResources/cpu': exclusiveMinimum"},
		{"sandbox memory that is no quantity", []string{"--set", "sandbox.kubernetes.defaultResources.memory=much"}, "at '/sandbox/kubernetes/defaultResources/memory': 'much' does not match pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmTemplate(t, tc.args...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestValuesRendered: what the values turn into, for the settings that cross templates.
func TestValuesRendered(t *testing.T) {
	t.Run("the API key and the model key stay out of the pod specs", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "auth.apiKey=sk-ma-visible-in-secret-only",
			"--set", "model.provider=anthropic", "--set", "model.anthropic.apiKey=sk-ant-secret",
			"--set", "sandbox.provider=docker")
		require.NoError(t, err)
		for _, doc := range strings.Split(out, "\n---\n") {
			if strings.Contains(doc, "\nkind: Secret\n") {
				continue
			}
			require.NotContains(t, doc, "sk-ma-visible-in-secret-only")
			require.NotContains(t, doc, "sk-ant-secret")
		}
	})
	t.Run("the admin key reaches the API from the Secret only when set", func(t *testing.T) {
		out, err := helmTemplate(t)
		require.NoError(t, err)
		require.NotContains(t, out, "admin-key:", "no admin key in the Secret by default")
		out, err = helmTemplate(t, "--set", "auth.adminKey=admin-key-0123456789abcdefghij")
		require.NoError(t, err)
		var secret, api string
		for _, doc := range strings.Split(out, "\n---\n") {
			switch {
			case strings.Contains(doc, "\nkind: Secret\n"):
				secret = doc
			case strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, "args: [\"serve\"]"):
				api = doc
			}
		}
		require.Contains(t, secret, "admin-key: ")
		require.Contains(t, api, "- name: MANAGED_AGENT_ADMIN_KEY")
		require.NotContains(t, api, "admin-key-0123456789abcdefghij", "the key itself stays in the Secret")
	})
	t.Run("the worker's own tools: MCP and web_fetch address guards, the search backend", func(t *testing.T) {
		out, err := helmTemplate(t)
		require.NoError(t, err)
		require.Contains(t, out, "MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS\n              value: \"false\"")
		require.NotContains(t, out, "MANAGED_AGENT_WEB_SEARCH_BACKEND")
		out, err = helmTemplate(t, "--set", "worker.mcp.allowPrivateNetworks=true", "--set", "worker.webSearch.backend=searxng",
			"--set", "worker.webSearch.url=http://searxng.search:8080")
		require.NoError(t, err)
		for _, want := range []string{"MANAGED_AGENT_MCP_ALLOW_PRIVATE_NETWORKS\n              value: \"true\"",
			"MANAGED_AGENT_WEB_SEARCH_BACKEND\n              value: \"searxng\"", "MANAGED_AGENT_WEB_SEARCH_URL\n              value: \"http://searxng.search:8080\""} {
			require.Contains(t, out, want)
		}
	})
	t.Run("tracing reaches the API and the workers, and only when it is on", func(t *testing.T) {
		out, err := helmTemplate(t)
		require.NoError(t, err)
		require.NotContains(t, out, "MANAGED_AGENT_OTEL_EXPORTER")
		require.NotContains(t, out, "OTEL_EXPORTER_OTLP_ENDPOINT")
		out, err = helmTemplate(t, "--set", "tracing.exporter=otlp-grpc", "--set", "tracing.endpoint=http://otel-collector.observability:4317",
			"--set", "tracing.serviceName=ma-prod")
		require.NoError(t, err)
		for _, args := range []string{`args: ["serve"]`, `args: ["worker"]`} {
			var doc string
			for _, d := range strings.Split(out, "\n---\n") {
				if strings.Contains(d, "\nkind: Deployment\n") && strings.Contains(d, args) {
					doc = d
				}
			}
			for _, want := range []string{"MANAGED_AGENT_OTEL_EXPORTER\n              value: \"otlp-grpc\"",
				"OTEL_EXPORTER_OTLP_ENDPOINT\n              value: \"http://otel-collector.observability:4317\"", "OTEL_SERVICE_NAME\n              value: \"ma-prod\""} {
				require.Contains(t, doc, want, args)
			}
		}
	})
	t.Run("every role serves /metrics on a port of its own; the ServiceMonitor only when asked", func(t *testing.T) {
		out, err := helmTemplate(t)
		require.NoError(t, err)
		deployments := map[string]string{}
		for _, doc := range strings.Split(out, "\n---\n") {
			for _, role := range []string{"api", "worker", "controller"} {
				if strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, "app.kubernetes.io/component: "+role+"\n") {
					deployments[role] = doc
				}
			}
		}
		require.Len(t, deployments, 3)
		for _, role := range []string{"api", "worker"} {
			require.Contains(t, deployments[role], "- name: MANAGED_AGENT_METRICS_ADDR\n              value: \":9090\"", role)
			require.Contains(t, deployments[role], "- name: metrics\n              containerPort: 9090\n", role)
		}
		require.Contains(t, deployments["controller"], "--metrics-bind-address=:8081")
		require.Contains(t, deployments["controller"], "- name: metrics\n              containerPort: 8081\n")
		require.NotContains(t, out, "kind: ServiceMonitor", "off by default: its CRD may not be installed")
		require.NotContains(t, out, "-metrics\n")

		out, err = helmTemplate(t, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom",
			"--set", "metrics.port=9100")
		require.NoError(t, err)
		var monitor string
		services := map[string]string{}
		for _, doc := range strings.Split(out, "\n---\n") {
			switch {
			case strings.Contains(doc, "\nkind: ServiceMonitor\n"):
				monitor = doc
			case strings.Contains(doc, "\nkind: Service\n") && strings.Contains(doc, "managed-agents.io/metrics: \"true\""):
				for _, role := range []string{"api", "worker", "controller"} {
					if strings.Contains(doc, "name: ma-managed-agents-"+role+"-metrics\n") {
						services[role] = doc
					}
				}
			}
		}
		require.Contains(t, monitor, "apiVersion: monitoring.coreos.com/v1")
		require.Contains(t, monitor, "release: prom")
		require.Contains(t, monitor, "- port: metrics\n      path: /metrics\n      interval: 30s")
		require.Len(t, services, 3)
		require.Contains(t, services["api"], "port: 9100")
		require.Contains(t, services["worker"], "app.kubernetes.io/component: worker")
		require.Contains(t, services["controller"], "port: 8081")
		require.Contains(t, out, "value: \":9100\"")

		out, err = helmTemplate(t, "--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true")
		require.NoError(t, err)
		require.Contains(t, out, "- name: MANAGED_AGENT_METRICS_ADDR\n              value: \"off\"")
		require.Contains(t, out, "--metrics-bind-address=0")
		require.NotContains(t, out, "name: metrics")
		require.NotContains(t, out, "kind: ServiceMonitor", "nothing to scrape")

		_, err = helmTemplate(t, "--set", "metrics.serviceMonitor.interval=often")
		require.Error(t, err, "the schema refuses an interval that is no duration")
	})
	t.Run("without the controller nothing of it renders", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "controller.enabled=false", "--set", "sandbox.provider=local")
		require.NoError(t, err)
		require.NotContains(t, out, "managed-agents-controller")
		require.NotContains(t, out, "kind: ClusterRole")
	})
	t.Run("the kubernetes provider gives the worker a Role in the sandbox namespace", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13",
			"--set", "sandbox.kubernetes.namespace=sandboxes", "--set", "sandbox.kubernetes.runtimeClassName=gvisor")
		require.NoError(t, err)
		var role, worker string
		for _, doc := range strings.Split(out, "\n---\n") {
			switch {
			case strings.Contains(doc, "\nkind: Role\n") && strings.Contains(doc, "-worker-sandboxes"):
				role = doc
			case strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, `args: ["worker"]`):
				worker = doc
			}
		}
		require.Contains(t, role, "namespace: sandboxes")
		require.Contains(t, role, "sandboxbindings")
		require.Contains(t, worker, "automountServiceAccountToken: true")
		for _, want := range []string{"MANAGED_AGENT_KUBERNETES_NAMESPACE\n              value: \"sandboxes\"", "MANAGED_AGENT_KUBERNETES_IMAGE\n              value: \"python:3.13\"",
			"MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS\n              value: \"gvisor\""} {
			require.Contains(t, worker, want)
		}
		require.Contains(t, out, "MANAGED_AGENT_SANDBOXD_IMAGE")

		require.Contains(t, role, `"patch"`, "the worker suspends and resumes bindings")
		require.NotContains(t, worker, "MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE", "an emptyDir by default")

		out, err = helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13",
			"--set", "sandbox.kubernetes.persistentWorkspace=true", "--set", "sandbox.kubernetes.workspaceStorageClass=fast-ssd",
			"--set", "sandbox.kubernetes.workspaceSize=20Gi")
		require.NoError(t, err)
		for _, want := range []string{"MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE\n              value: \"true\"",
			"MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS\n              value: \"fast-ssd\"", "MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE\n              value: \"20Gi\""} {
			require.Contains(t, out, want)
		}
		_, err = helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13",
			"--set", "sandbox.kubernetes.workspaceSize=lots")
		require.Error(t, err, "the schema refuses a size that is no quantity")

		out, err = helmTemplate(t, "--set", "sandbox.provider=local")
		require.NoError(t, err)
		require.NotContains(t, out, "-worker-sandboxes", "only with the kubernetes provider")
	})
	t.Run("sandbox pods get the deployment's default CPU and memory from the controller", func(t *testing.T) {
		controller := func(out string) string {
			for _, doc := range strings.Split(out, "\n---\n") {
				if strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, "- controller\n") {
					return doc
				}
			}
			return ""
		}
		out, err := helmTemplate(t)
		require.NoError(t, err)
		require.Contains(t, controller(out), "MANAGED_AGENT_KUBERNETES_DEFAULT_CPU\n              value: \"1\"", "those of a docker sandbox")
		require.Contains(t, controller(out), "MANAGED_AGENT_KUBERNETES_DEFAULT_MEMORY\n              value: \"1Gi\"")
		out, err = helmTemplate(t, "--set", "sandbox.kubernetes.defaultResources.cpu=2", "--set", "sandbox.kubernetes.defaultResources.memory=4Gi")
		require.NoError(t, err)
		require.Contains(t, controller(out), "MANAGED_AGENT_KUBERNETES_DEFAULT_CPU\n              value: \"2\"", "a number is a quantity too")
		require.Contains(t, controller(out), "MANAGED_AGENT_KUBERNETES_DEFAULT_MEMORY\n              value: \"4Gi\"")
		out, err = helmTemplate(t, "--set", "sandbox.kubernetes.defaultResources.cpu=", "--set", "sandbox.kubernetes.defaultResources.memory=")
		require.NoError(t, err)
		require.NotContains(t, controller(out), "MANAGED_AGENT_KUBERNETES_DEFAULT_", "empty: the controller's own defaults")
	})
	t.Run("the controller's rights on sandbox objects are a Role in the sandbox namespace", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "sandbox.kubernetes.namespace=sandboxes")
		require.NoError(t, err)
		var clusterRole, role string
		for _, doc := range strings.Split(out, "\n---\n") {
			switch {
			case strings.Contains(doc, "\nkind: ClusterRole\n"):
				clusterRole = doc
			case strings.Contains(doc, "\nkind: Role\n") && strings.Contains(doc, "-controller-sandboxes"):
				role = doc
			}
		}
		require.Contains(t, clusterRole, "sandboxbindings")
		for _, r := range []string{"pods", "secrets", "networkpolicies"} {
			require.NotContains(t, clusterRole, "- "+r+"\n", "not cluster-wide")
			require.Contains(t, role, "- "+r+"\n")
		}
		require.Contains(t, role, "namespace: sandboxes")
	})
	t.Run("the egress proxy shares its key with the controller and is what allowlisted pods reach", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13",
			"--set", "sandbox.kubernetes.egressProxy.enabled=true", "--set-string", "sandbox.kubernetes.egressProxy.allowedPorts=443")
		require.NoError(t, err)
		var proxy, service, controller, secret string
		for _, doc := range strings.Split(out, "\n---\n") {
			switch {
			case strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, `args: ["egress-proxy"]`):
				proxy = doc
			case strings.Contains(doc, "\nkind: Service\n") && strings.Contains(doc, "-egress-proxy\n"):
				service = doc
			case strings.Contains(doc, "\nkind: Deployment\n") && strings.Contains(doc, "- controller\n"):
				controller = doc
			case strings.Contains(doc, "\nkind: Secret\n"):
				secret = doc
			}
		}
		require.Contains(t, secret, "egress-proxy-key:")
		for _, doc := range []string{proxy, controller} {
			require.Contains(t, doc, "- name: MANAGED_AGENT_EGRESS_PROXY_KEY\n              valueFrom:\n                secretKeyRef:")
			require.Contains(t, doc, "key: egress-proxy-key")
		}
		require.Contains(t, proxy, "MANAGED_AGENT_EGRESS_PROXY_PORTS\n              value: \"443\"")
		require.Contains(t, proxy, "automountServiceAccountToken: false")
		require.Contains(t, service, "app.kubernetes.io/component: egress-proxy")
		require.Contains(t, service, "port: 3128")
		require.Contains(t, controller, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_SELECTOR\n              value: \"app.kubernetes.io/instance=ma,app.kubernetes.io/component=egress-proxy\"")
		require.Contains(t, controller, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST\n              value: \"ma-managed-agents-egress-proxy.")

		out, err = helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13")
		require.NoError(t, err)
		require.NotContains(t, out, "egress-proxy", "off by default")
	})
	t.Run("a remote provider's settings and Secret reach every role", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=base",
			"--set", "sandbox.kubernetes.provider=e2b", "--set", "sandbox.remote.secretName=e2b-keys",
			"--set", "sandbox.remote.settings.MANAGED_AGENT_E2B_TEMPLATE=python")
		require.NoError(t, err)
		deployments := 0
		for _, doc := range strings.Split(out, "\n---\n") {
			if !strings.Contains(doc, "\nkind: Deployment\n") || !strings.Contains(doc, "managed-agents.env") && !strings.Contains(doc, "MANAGED_AGENT_SANDBOX\n") {
				continue
			}
			deployments++
			require.Contains(t, doc, "envFrom:\n            - secretRef:\n                name: e2b-keys")
			require.Contains(t, doc, "MANAGED_AGENT_E2B_TEMPLATE\n              value: \"python\"")
			require.Contains(t, doc, "MANAGED_AGENT_KUBERNETES_PROVIDER\n              value: \"e2b\"")
			require.Contains(t, doc, "MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS\n              value: \"e2b\"")
		}
		require.Equal(t, 3, deployments, "api, worker and controller")

		_, err = helmTemplate(t, "--set", "sandbox.remote.settings.MANAGED_AGENT_DATABASE_URL=postgres://elsewhere")
		require.Error(t, err, "only provider settings belong there")
		out, err = helmTemplate(t)
		require.NoError(t, err)
		require.NotContains(t, out, "envFrom")
		require.NotContains(t, out, "MANAGED_AGENT_KUBERNETES_PROVIDER")
	})
	t.Run("the warm pool repeats the worker's sandbox template", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13",
			"--set", "sandbox.kubernetes.namespace=sandboxes", "--set", "sandbox.kubernetes.runtimeClassName=gvisor",
			"--set", "sandbox.kubernetes.warmPool.replicas=3")
		require.NoError(t, err)
		var pool string
		for _, doc := range strings.Split(out, "\n---\n") {
			if strings.Contains(doc, "\nkind: SandboxWarmPool\n") {
				pool = doc
			}
		}
		for _, want := range []string{"name: ma-managed-agents-default\n", "namespace: sandboxes\n", "replicas: 3\n", "image: \"python:3.13\"\n",
			"port: 8090\n", "runtimeClassName: \"gvisor\"\n"} {
			require.Contains(t, pool, want)
		}
		require.NotContains(t, pool, "serviceAccountName", "the worker names none either")

		out, err = helmTemplate(t, "--set", "sandbox.provider=kubernetes", "--set", "sandbox.kubernetes.image=python:3.13")
		require.NoError(t, err)
		require.NotContains(t, out, "kind: SandboxWarmPool", "no pool by default")
		_, err = helmTemplate(t, "--set", "sandbox.kubernetes.warmPool.replicas=1000")
		require.ErrorContains(t, err, "/sandbox/kubernetes/warmPool/replicas")
	})
	t.Run("a Temporal namespace other than default is created by the dev server", func(t *testing.T) {
		out, err := helmTemplate(t, "--set", "temporal.namespace=agents")
		require.NoError(t, err)
		require.Contains(t, out, "- --namespace=agents")
		require.Contains(t, out, "value: \"agents\"")
	})
}
