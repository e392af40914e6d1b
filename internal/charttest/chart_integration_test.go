//go:build integration

package charttest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/managed-agents/managed-agents/internal/app"
)

// kubeVersion is the version the chart is rendered for offline; it is that of the envtest
// assets the Makefile pins (ENVTEST_K8S_VERSION).
const kubeVersion = "v1.37.2"

// cluster is one envtest control plane and what a user has to talk to it.
type cluster struct {
	kubeconfig string
	kube       kubernetes.Interface
	crds       apiextensions.Interface
	root       string // the repository
	helmHome   string
}

// startCluster starts kube-apiserver and etcd from KUBEBUILDER_ASSETS (the Makefile sets it
// from hack/envtest-assets.sh) and writes a kubeconfig for an admin user, as `kind` would.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	require.NotEmpty(t, assets, "KUBEBUILDER_ASSETS is not set: run `make test`, or set it to the last line of `make envtest-assets`")
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	require.NoError(t, err, "start envtest from %s", assets)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })

	admin, err := env.AddUser(envtest.User{Name: "chart-test-admin", Groups: []string{"system:masters"}}, cfg)
	require.NoError(t, err)
	kc, err := admin.KubeConfig()
	require.NoError(t, err)
	c := &cluster{kubeconfig: filepath.Join(t.TempDir(), "kubeconfig"), root: repoRoot(t), helmHome: t.TempDir()}
	require.NoError(t, os.WriteFile(c.kubeconfig, kc, 0o600))
	c.kube, err = kubernetes.NewForConfig(admin.Config())
	require.NoError(t, err)
	c.crds, err = apiextensions.NewForConfig(admin.Config())
	require.NoError(t, err)
	return c
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

func (c *cluster) chart() string { return filepath.Join(c.root, "charts", "managed-agents") }

// run runs a command (helm or kubectl, found on PATH: the Makefile puts bin/ first; kubectl
// is the assets' one) against the cluster and returns its stdout and stderr.
func (c *cluster) run(t *testing.T, stdin string, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := name
	if name == "kubectl" {
		path = filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig,
		// Helm keeps its repositories, cache and plugins here, not in the user's home.
		"HELM_CACHE_HOME="+filepath.Join(c.helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(c.helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(c.helmHome, "data"))
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

// mustRun is run that fails the test on an error or on any warning the apiserver sent back
// (kubectl and helm print them as "Warning: ..."), such as a PodSecurity violation or a
// deprecated API.
func (c *cluster) mustRun(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.run(t, stdin, name, args...)
	require.NoError(t, err)
	require.NotContains(t, stderr, "Warning:", "%s %s", name, strings.Join(args, " "))
	require.NotContains(t, stderr, "would violate PodSecurity")
	return stdout
}

// restrictedNamespace creates a namespace that enforces the Pod Security Standards'
// restricted profile and warns about workloads that would violate it.
func (c *cluster) restrictedNamespace(t *testing.T, name string) {
	t.Helper()
	c.mustRun(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/audit: restricted
`, name), "kubectl", "apply", "-f", "-")
}

// TestChartOnAPIServer installs the chart twice on one apiserver: with the default values by
// `helm install` (the first try on an empty cluster) and with the production values by `helm
// template | kubectl apply --server-side` (the GitOps way), and checks what the apiserver
// holds afterwards.
func TestChartOnAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()

	t.Run("defaults by helm install", func(t *testing.T) {
		const ns, release = "first-try", "ma"
		c.restrictedNamespace(t, ns)
		c.mustRun(t, "", "helm", "install", release, c.chart(), "--namespace", ns)

		checkCRDsEstablished(t, c)
		workloads := checkWorkloads(t, ctx, c, ns, release)
		require.ElementsMatch(t, []string{"ma-managed-agents-api", "ma-managed-agents-worker", "ma-managed-agents-controller",
			"ma-managed-agents-temporal", "ma-managed-agents-postgresql"}, names(workloads))
		checkPodsAdmitted(t, ctx, c, ns, workloads)
		checkService(t, ctx, c, ns, "ma-managed-agents", "api", workloads)
		checkService(t, ctx, c, ns, "ma-managed-agents-temporal", "temporal", workloads)
		checkService(t, ctx, c, ns, "ma-managed-agents-postgresql", "postgresql", workloads)
		checkSecretRefs(t, ctx, c, ns, workloads)

		// The default sandbox provider is kubernetes: the worker reads its sandboxes' token Secrets.
		checkControllerAccess(t, ctx, c, ns, "ma-managed-agents", true)
		checkServerConfig(t, ctx, c, ns, workloads)

		api := workloadNamed(t, workloads, "ma-managed-agents-api")
		require.Equal(t, "ma-managed-agents-temporal:7233", envValue(t, api.template.Spec.Containers[0], "MANAGED_AGENT_TEMPORAL_ADDRESS"))
		secret, err := c.kube.CoreV1().Secrets(ns).Get(ctx, "ma-managed-agents", metav1.GetOptions{})
		require.NoError(t, err)
		apiKey, password := string(secret.Data["api-key"]), string(secret.Data["postgres-password"])
		require.True(t, strings.HasPrefix(apiKey, "sk-ma-"), "generated API key %q", apiKey)
		dbURL, err := url.Parse(string(secret.Data["database-url"]))
		require.NoError(t, err)
		require.Equal(t, "ma-managed-agents-postgresql:5432", dbURL.Host)
		require.Equal(t, "/managed_agents", dbURL.Path)
		urlPassword, _ := dbURL.User.Password()
		require.Equal(t, password, urlPassword, "the API's URL carries the password PostgreSQL is initialised with")
		require.Len(t, password, 32)

		// An upgrade reads the generated credentials back instead of making new ones: a new
		// password would lock the API out of the initialised database.
		c.mustRun(t, "", "helm", "upgrade", release, c.chart(), "--namespace", ns, "--set", "api.replicas=2")
		secret, err = c.kube.CoreV1().Secrets(ns).Get(ctx, "ma-managed-agents", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, apiKey, string(secret.Data["api-key"]))
		require.Equal(t, password, string(secret.Data["postgres-password"]))
		deploy, err := c.kube.AppsV1().Deployments(ns).Get(ctx, "ma-managed-agents-api", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 2, *deploy.Spec.Replicas)
	})

	t.Run("production values by kubectl apply", func(t *testing.T) {
		const ns, release = "prod", "agents"
		c.restrictedNamespace(t, ns)
		// The operator's own Secret, which existingSecret names.
		c.mustRun(t, `apiVersion: v1
kind: Secret
metadata:
  name: managed-agents-credentials
stringData:
  database-url: postgres://agents:secret@db.example.com:5432/agents?sslmode=require
  anthropic-api-key: sk-ant-test
`, "kubectl", "apply", "--namespace", ns, "-f", "-")
		manifest := c.mustRun(t, "", "helm", "template", release, c.chart(), "--namespace", ns,
			"--kube-version", kubeVersion, "--include-crds", "-f", filepath.Join(c.chart(), "ci", "production-values.yaml"))
		c.mustRun(t, manifest, "kubectl", "apply", "--server-side", "--field-manager", "chart-test", "--namespace", ns, "-f", "-")

		checkCRDsEstablished(t, c)
		workloads := checkWorkloads(t, ctx, c, ns, release)
		require.ElementsMatch(t, []string{"agents-managed-agents-api", "agents-managed-agents-worker", "agents-managed-agents-controller"},
			names(workloads), "no bundled PostgreSQL or Temporal")
		checkPodsAdmitted(t, ctx, c, ns, workloads)
		checkService(t, ctx, c, ns, "agents-managed-agents", "api", workloads)
		checkSecretRefs(t, ctx, c, ns, workloads)
		checkControllerAccess(t, ctx, c, ns, "agents-managed-agents", false)
		checkServerConfig(t, ctx, c, ns, workloads)

		_, err := c.kube.CoreV1().Secrets(ns).Get(ctx, "agents-managed-agents", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "with existingSecret the chart makes no Secret of its own: %v", err)
		for _, w := range workloads {
			main := w.template.Spec.Containers[0]
			require.Equal(t, "temporal-frontend.temporal.svc.cluster.local:7233", envValue(t, main, "MANAGED_AGENT_TEMPORAL_ADDRESS"), w.name)
			require.Equal(t, "managed-agents", envValue(t, main, "MANAGED_AGENT_TEMPORAL_NAMESPACE"), w.name)
			require.Equal(t, "anthropic", envValue(t, main, "MANAGED_AGENT_MODEL"), w.name)
			require.Equal(t, "docker", envValue(t, main, "MANAGED_AGENT_SANDBOX"), w.name)
			require.Equal(t, "managed-agents-credentials", envSecret(t, main, "MANAGED_AGENT_DATABASE_URL").Name, w.name)
		}
		deploy, err := c.kube.AppsV1().Deployments(ns).Get(ctx, "agents-managed-agents-worker", metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 3, *deploy.Spec.Replicas)
	})
}

// TestEnvironmentWorkerOnAPIServer installs the chart with the environment worker on, its key in
// a Secret the operator made: the apiserver admits its pod in a restricted namespace, and its
// ServiceAccount may run kubernetes sandboxes in the sandbox namespace and nothing else.
func TestEnvironmentWorkerOnAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	const ns, release = "selfhosted", "sh"
	c.restrictedNamespace(t, ns)
	c.mustRun(t, `apiVersion: v1
kind: Secret
metadata:
  name: rack-1-key
stringData:
  key: sk-ma-environment
`, "kubectl", "apply", "--namespace", ns, "-f", "-")
	c.mustRun(t, "", "helm", "install", release, c.chart(), "--namespace", ns, "--set", "environmentWorker.enabled=true",
		"--set", "environmentWorker.environmentID=env_01rack", "--set", "environmentWorker.existingSecret=rack-1-key",
		"--set", "environmentWorker.existingSecretKey=key")

	workloads := checkWorkloads(t, ctx, c, ns, release)
	require.ElementsMatch(t, []string{"sh-managed-agents-api", "sh-managed-agents-worker", "sh-managed-agents-controller",
		"sh-managed-agents-temporal", "sh-managed-agents-postgresql", "sh-managed-agents-environment-worker"}, names(workloads))
	checkPodsAdmitted(t, ctx, c, ns, workloads)
	checkService(t, ctx, c, ns, "sh-managed-agents", "api", workloads)
	checkSecretRefs(t, ctx, c, ns, workloads)
	checkServerConfig(t, ctx, c, ns, workloads)
	ew := workloadNamed(t, workloads, "sh-managed-agents-environment-worker")
	require.Equal(t, "http://sh-managed-agents.selfhosted.svc:8080", envValue(t, ew.template.Spec.Containers[0], "MANAGED_AGENT_SERVER_URL"))

	for _, tc := range []struct {
		verb, group, resource, namespace string
		allowed                          bool
	}{
		{"create", "agents.managed-agents.io", "sandboxbindings", ns, true},
		{"patch", "agents.managed-agents.io", "sandboxbindings", ns, true},
		{"get", "", "secrets", ns, true},
		{"list", "", "secrets", ns, false},
		{"get", "", "secrets", "team-a", false},
		{"create", "", "pods", ns, false},
		{"list", "agents.managed-agents.io", "sessions", ns, false},
	} {
		user := fmt.Sprintf("system:serviceaccount:%s:sh-managed-agents-environment-worker", ns)
		review, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               user,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Group: tc.group, Resource: tc.resource, Namespace: tc.namespace},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, tc.allowed, review.Status.Allowed, "%s may %s %s %s in namespace %q: %s", user, tc.verb, tc.resource, tc.group, tc.namespace, review.Status.Reason)
	}
}

// workload is a Deployment's or StatefulSet's pod template, with the volumes its controller
// would add (a StatefulSet's claims).
type workload struct {
	name        string
	component   string
	template    corev1.PodTemplateSpec
	claimVolume []corev1.Volume
}

func names(ws []workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.name)
	}
	return out
}

func workloadNamed(t *testing.T, ws []workload, name string) workload {
	t.Helper()
	for _, w := range ws {
		if w.name == name {
			return w
		}
	}
	require.FailNow(t, "no workload "+name, "have %v", names(ws))
	return workload{}
}

// checkWorkloads returns the release's Deployments and StatefulSets and checks that every pod
// would run non-root with a read-only root filesystem, no privilege escalation, no
// capabilities, the runtime's seccomp profile and resource requests, and that the roles that
// serve HTTP have probes.
func checkWorkloads(t *testing.T, ctx context.Context, c *cluster, ns, release string) []workload {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	deploys, err := c.kube.AppsV1().Deployments(ns).List(ctx, sel)
	require.NoError(t, err)
	sets, err := c.kube.AppsV1().StatefulSets(ns).List(ctx, sel)
	require.NoError(t, err)
	var ws []workload
	for _, d := range deploys.Items {
		ws = append(ws, workload{name: d.Name, template: d.Spec.Template})
	}
	for _, s := range sets.Items {
		ws = append(ws, workload{name: s.Name, template: s.Spec.Template, claimVolume: claimVolumes(s)})
	}
	for i := range ws {
		w := &ws[i]
		w.component = w.template.Labels["app.kubernetes.io/component"]
		require.NotEmpty(t, w.component, w.name)
		pod := w.template.Spec.SecurityContext
		require.NotNil(t, pod, w.name)
		require.True(t, pod.RunAsNonRoot != nil && *pod.RunAsNonRoot, "%s: runAsNonRoot", w.name)
		require.True(t, pod.RunAsUser != nil && *pod.RunAsUser != 0, "%s: a non-zero runAsUser", w.name)
		require.True(t, pod.SeccompProfile != nil && pod.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "%s: seccomp RuntimeDefault", w.name)
		for _, ctr := range slices.Concat(w.template.Spec.InitContainers, w.template.Spec.Containers) {
			sc := ctr.SecurityContext
			require.NotNil(t, sc, "%s/%s", w.name, ctr.Name)
			require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s/%s: read-only root filesystem", w.name, ctr.Name)
			require.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s/%s: no privilege escalation", w.name, ctr.Name)
			require.True(t, sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0,
				"%s/%s: capabilities drop ALL, add none", w.name, ctr.Name)
			require.NotEmpty(t, ctr.Resources.Requests, "%s/%s: resource requests", w.name, ctr.Name)
			require.NotEmpty(t, ctr.Resources.Limits.Memory(), "%s/%s: a memory limit", w.name, ctr.Name)
			if w.component != "worker" && w.component != "environment-worker" {
				require.NotNil(t, ctr.ReadinessProbe, "%s/%s: readiness probe", w.name, ctr.Name)
				require.NotNil(t, ctr.LivenessProbe, "%s/%s: liveness probe", w.name, ctr.Name)
			}
		}
	}
	return ws
}

func claimVolumes(s appsv1.StatefulSet) []corev1.Volume {
	var vs []corev1.Volume
	for _, claim := range s.Spec.VolumeClaimTemplates {
		vs = append(vs, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + s.Name + "-0"}}})
	}
	return vs
}

// checkPodsAdmitted creates, from each workload's template, the pod its controller would
// create (there is no controller-manager in envtest): the apiserver's PodSecurity admission
// must admit it in the namespace that enforces the restricted profile. A template stripped of
// its security contexts must be refused, so the check cannot pass by accident.
func checkPodsAdmitted(t *testing.T, ctx context.Context, c *cluster, ns string, ws []workload) {
	t.Helper()
	for _, w := range ws {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: w.name + "-admitted", Namespace: ns, Labels: w.template.Labels},
			Spec:       *w.template.Spec.DeepCopy(),
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, w.claimVolume...)
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err, "the pod of %s", w.name)
		require.NoError(t, c.kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-security-context", Namespace: ns}, Spec: *ws[0].template.Spec.DeepCopy()}
	bare.Spec.SecurityContext = nil
	for i := range bare.Spec.Containers {
		bare.Spec.Containers[i].SecurityContext = nil
	}
	_, err := c.kube.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{})
	require.Error(t, err, "the namespace enforces the restricted profile")
	require.Contains(t, err.Error(), "violates PodSecurity")
}

// checkService checks that the Service selects the component's pods and no other workload's,
// and that each of its target ports names a port of the component's container.
func checkService(t *testing.T, ctx context.Context, c *cluster, ns, name, component string, ws []workload) {
	t.Helper()
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	require.False(t, sel.Empty(), "%s has a selector", name)
	var selected []workload
	for _, w := range ws {
		if sel.Matches(labels.Set(w.template.Labels)) {
			selected = append(selected, w)
		}
	}
	require.Len(t, selected, 1, "%s selects exactly one workload", name)
	require.Equal(t, component, selected[0].component, name)
	for _, p := range svc.Spec.Ports {
		found := false
		for _, ctr := range selected[0].template.Spec.Containers {
			for _, cp := range ctr.Ports {
				found = found || cp.Name == p.TargetPort.String() || int(cp.ContainerPort) == p.TargetPort.IntValue()
			}
		}
		require.True(t, found, "%s port %s targets %s, a port of %s", name, p.Name, p.TargetPort.String(), selected[0].name)
	}
}

// checkSecretRefs checks that every Secret key a container needs (a reference that is not
// optional) exists in the namespace, so no pod would wait forever in CreateContainerConfigError.
func checkSecretRefs(t *testing.T, ctx context.Context, c *cluster, ns string, ws []workload) {
	t.Helper()
	for _, w := range ws {
		for _, ctr := range slices.Concat(w.template.Spec.InitContainers, w.template.Spec.Containers) {
			for _, e := range ctr.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				s, err := c.kube.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
				require.NoError(t, err, "%s/%s %s", w.name, ctr.Name, e.Name)
				require.NotEmpty(t, s.Data[ref.Key], "%s/%s %s: key %s of Secret %s", w.name, ctr.Name, e.Name, ref.Key, ref.Name)
			}
		}
	}
}

// checkServerConfig resolves each managed-agents container's environment as the kubelet
// would (values, Secret keys, the downward API) and validates it with the server's own
// configuration check, so a value the chart renders that the binary would refuse at start
// (a malformed boolean, a database URL that does not parse) fails here.
func checkServerConfig(t *testing.T, ctx context.Context, c *cluster, ns string, ws []workload) {
	t.Helper()
	for _, w := range ws {
		if !slices.Contains([]string{"api", "worker", "controller"}, w.component) {
			continue
		}
		ctr := w.template.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range ctr.Env {
			switch {
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			case e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				s, err := c.kube.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
				require.NoError(t, err)
				if v, ok := s.Data[ref.Key]; ok {
					env[e.Name] = string(v)
				}
			case e.ValueFrom.FieldRef != nil:
				require.Equal(t, "metadata.namespace", e.ValueFrom.FieldRef.FieldPath)
				env[e.Name] = ns
			default:
				require.FailNow(t, "unexpected valueFrom", "%s/%s %s", w.name, ctr.Name, e.Name)
			}
		}
		cfg := app.FromLookup(app.Config{}, func(name string) (string, bool) {
			v, ok := env[name]
			return v, ok
		})
		require.NoError(t, cfg.Validate(), "%s: the server accepts the environment the chart gives it", w.name)
		require.NotEmpty(t, cfg.DatabaseURL, w.name)
		require.NotEmpty(t, cfg.TemporalAddress, w.name)
	}
}

// checkControllerAccess asks the apiserver's RBAC authorizer what the ServiceAccounts may do:
// the controller reconciles the resources in every namespace, makes sandbox pods, their
// Secrets and NetworkPolicies in the sandbox namespace only, and holds its Lease in its own,
// and nothing more; the API's
// account may do nothing with them, nor the worker's unless its provider is kubernetes
// (workerSandboxes): then it reads Secrets in the sandbox namespace, and still nothing else.
func checkControllerAccess(t *testing.T, ctx context.Context, c *cluster, ns, fullname string, workerSandboxes bool) {
	t.Helper()
	for _, tc := range []struct {
		account, verb, group, resource, sub, namespace string
		allowed                                        bool
	}{
		{"controller", "list", "agents.managed-agents.io", "sessions", "", "", true},
		{"controller", "watch", "agents.managed-agents.io", "agents", "", "", true},
		{"controller", "update", "agents.managed-agents.io", "sessions", "status", "team-a", true},
		{"controller", "update", "agents.managed-agents.io", "environments", "finalizers", "team-b", true},
		{"controller", "update", "coordination.k8s.io", "leases", "", ns, true},
		{"controller", "create", "events.k8s.io", "events", "", ns, true},
		{"controller", "update", "coordination.k8s.io", "leases", "", "kube-system", false},
		// The SandboxBinding controller makes each sandbox's pod, token Secret and
		// NetworkPolicy in the sandbox namespace (the release's by default), and lists them
		// there for its orphan sweep; nowhere else (a Role, not the ClusterRole).
		{"controller", "get", "", "secrets", "", ns, true},
		{"controller", "delete", "", "pods", "", ns, true},
		{"controller", "create", "networking.k8s.io", "networkpolicies", "", ns, true},
		{"controller", "update", "", "secrets", "", ns, false},
		{"controller", "list", "", "secrets", "", ns, true},
		// A warm pool's pod is claimed by an update of its owner and labels (the pod owns its
		// token Secret, which needs no change).
		{"controller", "update", "", "pods", "", ns, true},
		{"controller", "create", "", "pods", "", "team-a", false},
		{"controller", "get", "", "secrets", "", "team-a", false},
		{"controller", "list", "", "pods", "", "", false},
		{"api", "list", "agents.managed-agents.io", "sessions", "", ns, false},
		{"worker", "get", "", "secrets", "", ns, workerSandboxes},
		{"worker", "get", "", "secrets", "", "team-a", false},
		{"worker", "create", "", "pods", "", ns, false},
	} {
		user := fmt.Sprintf("system:serviceaccount:%s:%s-%s", ns, fullname, tc.account)
		review, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.sub, Namespace: tc.namespace,
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, tc.allowed, review.Status.Allowed, "%s may %s %s/%s %s in namespace %q: %s",
			user, tc.verb, tc.resource, tc.sub, tc.group, tc.namespace, review.Status.Reason)
	}
}

// checkCRDsEstablished checks that every CRD the chart ships (crds/, copied from
// config/crd/bases) is served by the apiserver.
func checkCRDsEstablished(t *testing.T, c *cluster) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(c.chart(), "crds", "*.yaml"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Log("the chart has no CRDs yet (make chart-crds copies them from config/crd/bases)")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(raw, &crd), f)
		require.Eventually(t, func() bool {
			live, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crd.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, cond := range live.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}, 30*time.Second, 100*time.Millisecond, "CRD %s is established", crd.Name)
		// A user lists the kind with kubectl, by its plural name.
		c.mustRun(t, "", "kubectl", "get", crd.Spec.Names.Plural+"."+crd.Spec.Group, "--all-namespaces")
	}
}

func envValue(t *testing.T, ctr corev1.Container, name string) string {
	t.Helper()
	for _, e := range ctr.Env {
		if e.Name == name {
			require.Nil(t, e.ValueFrom, "%s is a plain value", name)
			return e.Value
		}
	}
	require.FailNow(t, "no variable "+name, "container %s", ctr.Name)
	return ""
}

func envSecret(t *testing.T, ctr corev1.Container, name string) *corev1.SecretKeySelector {
	t.Helper()
	for _, e := range ctr.Env {
		if e.Name == name {
			require.True(t, e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil, "%s comes from a Secret", name)
			return e.ValueFrom.SecretKeyRef
		}
	}
	require.FailNow(t, "no variable "+name, "container %s", ctr.Name)
	return nil
}
