package controllers

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/egress"
)

func binding(mod ...func(*v1alpha1.SandboxBinding)) *v1alpha1.SandboxBinding {
	b := &v1alpha1.SandboxBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ma-0123", Namespace: "sandboxes"},
		Spec:       v1alpha1.SandboxBindingSpec{SessionID: "sesn_Abc", Image: "python:3.13"},
	}
	for _, m := range mod {
		m(b)
	}
	return b
}

var testPods = SandboxPods{
	SandboxdImage:   "managed-agents:v1",
	Workers:         PodPeer{Namespace: "agents", Selector: map[string]string{"app.kubernetes.io/component": "worker"}},
	EgressProxy:     PodPeer{Namespace: "agents", Selector: map[string]string{"app.kubernetes.io/component": "egress-proxy"}},
	EgressProxyPort: 3128,
}

func TestSandboxPodIsRestricted(t *testing.T) {
	b := binding(func(b *v1alpha1.SandboxBinding) {
		b.Spec.RuntimeClassName = ptr.To("gvisor")
		b.Spec.Port = 9000
		b.Spec.Env = []corev1.EnvVar{{Name: "CONTRACT", Value: "yes"}, {Name: "MANAGED_AGENT_SANDBOXD_TOKEN_FILE", Value: "/evil"},
			{Name: "STOLEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ma-other-token"}, Key: "token"}}}}
		b.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
		b.Spec.WorkspaceSize = ptr.To(resource.MustParse("2Gi"))
	})
	pod := testPods.sandboxPod(b)

	require.Equal(t, "ma-0123", pod.Name)
	require.Equal(t, "sesn_Abc", pod.Labels[v1alpha1.LabelSessionID], "the labels name the session")
	require.Equal(t, "ma-0123", pod.Labels[v1alpha1.LabelSandboxBinding])
	require.Equal(t, ptr.To("gvisor"), pod.Spec.RuntimeClassName)
	require.Equal(t, ptr.To(false), pod.Spec.AutomountServiceAccountToken)
	require.True(t, *pod.Spec.SecurityContext.RunAsNonRoot)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.Spec.SecurityContext.SeccompProfile.Type)

	require.Len(t, pod.Spec.InitContainers, 1)
	inject := pod.Spec.InitContainers[0]
	require.Equal(t, "managed-agents:v1", inject.Image, "sandboxd comes from our image")
	require.Equal(t, []string{"/managed-agents", "install-binary", sandboxdBinary}, inject.Command)

	require.Len(t, pod.Spec.Containers, 1)
	main := pod.Spec.Containers[0]
	require.Equal(t, "python:3.13", main.Image, "and runs in the user's")
	require.Equal(t, []string{sandboxdBinary, "sandboxd"}, main.Command)
	require.Equal(t, resource.MustParse("1Gi"), main.Resources.Limits[corev1.ResourceMemory])
	require.Equal(t, int32(9000), main.Ports[0].ContainerPort)
	require.Equal(t, int32(9000), main.ReadinessProbe.TCPSocket.Port.IntVal)
	for _, c := range append(pod.Spec.InitContainers, main) {
		sc := c.SecurityContext
		require.True(t, *sc.RunAsNonRoot, c.Name)
		require.True(t, *sc.ReadOnlyRootFilesystem, c.Name)
		require.False(t, *sc.AllowPrivilegeEscalation, c.Name)
		require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, c.Name)
		require.Empty(t, sc.Capabilities.Add, c.Name)
		require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, c.Name)
	}

	env := map[string]string{}
	for _, e := range main.Env {
		_, dup := env[e.Name]
		require.False(t, dup, "%s is set once", e.Name)
		env[e.Name] = e.Value
		require.Nil(t, e.ValueFrom, "%s: values only, no references the kubelet would resolve", e.Name)
	}
	require.NotContains(t, env, "STOLEN", "a reference to another Secret is dropped")
	require.Equal(t, "yes", env["CONTRACT"], "the template's variables reach the container")
	require.Equal(t, tokenDir+"/token", env["MANAGED_AGENT_SANDBOXD_TOKEN_FILE"], "but cannot move the daemon's token")
	require.Equal(t, ":9000", env["MANAGED_AGENT_SANDBOXD_ADDR"])

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range main.VolumeMounts {
		mounts[m.MountPath] = m
	}
	require.False(t, mounts["/workspace"].ReadOnly)
	require.False(t, mounts["/tmp"].ReadOnly)
	require.True(t, mounts[sandboxdDir].ReadOnly, "the injected binary cannot be replaced from inside")
	require.True(t, mounts[tokenDir].ReadOnly)
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	require.Equal(t, resource.MustParse("2Gi"), *vols["workspace"].EmptyDir.SizeLimit)
	require.NotNil(t, vols["tmp"].EmptyDir.SizeLimit)
	require.Equal(t, "ma-0123-token", vols["token"].Secret.SecretName)
	require.False(t, mounts[packagesDir].ReadOnly, "packages install as the sandbox's user")
	require.Equal(t, packagesDir, env["MANAGED_AGENT_SANDBOXD_PACKAGES_DIR"])
	require.NotNil(t, vols["packages"].EmptyDir.SizeLimit)
	require.NotContains(t, env, "HTTPS_PROXY", "full egress needs no proxy")
}

func TestSandboxPodOfAHostsBindingGetsTheProxyFromItsSecret(t *testing.T) {
	proxied := testPods
	proxied.EgressProxyHost, proxied.EgressProxyKey = "10.96.0.10", []byte("0123456789abcdef0123456789abcdef")
	hosts := func(b *v1alpha1.SandboxBinding) {
		b.Spec.Network = v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressHosts, Hosts: []string{"pypi.org"}}
		b.Spec.Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://elsewhere:8080"}, {Name: "no_proxy", Value: "*"}, {Name: "KEEP", Value: "1"}}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range proxied.sandboxPod(binding(hosts)).Spec.Containers[0].Env {
		_, dup := env[e.Name]
		require.False(t, dup, "%s is set once", e.Name)
		env[e.Name] = e
	}
	for _, name := range proxyEnvNames {
		require.Empty(t, env[name].Value, "%s: never in the pod spec", name)
		ref := env[name].ValueFrom.SecretKeyRef
		require.Equal(t, "ma-0123-token", ref.Name, name)
		require.Equal(t, v1alpha1.ProxyURLSecretKey, ref.Key, name)
	}
	require.Equal(t, "localhost,127.0.0.1,::1", env["NO_PROXY"].Value)
	require.Equal(t, "localhost,127.0.0.1,::1", env["no_proxy"].Value, "the template cannot widen it")
	require.Equal(t, "1", env["KEEP"].Value)

	// Without a key or host (the proxy not deployed), the pod gets no proxy variables and
	// the template's stay: the policy lets nothing out but to the proxy pods anyway.
	env = map[string]corev1.EnvVar{}
	for _, e := range testPods.sandboxPod(binding(hosts)).Spec.Containers[0].Env {
		env[e.Name] = e
	}
	require.Equal(t, "http://elsewhere:8080", env["HTTPS_PROXY"].Value)
	require.NotContains(t, env, "HTTP_PROXY")
}

func TestProxyURLSignsTheBindingsHosts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	pods := testPods
	pods.EgressProxyHost, pods.EgressProxyKey = "localhost", key
	b := binding(func(b *v1alpha1.SandboxBinding) {
		b.Spec.Network = v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressHosts, Hosts: []string{"*.example.com", "pypi.org"}}
	})
	raw, err := pods.proxyURL(t.Context(), b)
	require.NoError(t, err)
	u, err := url.Parse(raw)
	require.NoError(t, err)
	require.Contains(t, []string{"127.0.0.1:3128", "[::1]:3128"}, u.Host, "a name is resolved: the pod has no DNS")
	password, _ := u.User.Password()
	policy, err := egress.Verify(key, u.User.Username(), password)
	require.NoError(t, err, "the proxy's key verifies them")
	require.Equal(t, egress.Policy{Sandbox: "ma-0123", Hosts: []string{"*.example.com", "pypi.org"}}, policy)
	_, err = egress.Verify([]byte("another key of thirty-two bytes!"), u.User.Username(), password)
	require.Error(t, err)

	pods.EgressProxyHost = "no-such-proxy.invalid"
	_, err = pods.proxyURL(t.Context(), b)
	require.ErrorContains(t, err, "MANAGED_AGENT_SANDBOX_EGRESS_PROXY_HOST")
}

func TestOrphaned(t *testing.T) {
	b := binding()
	b.UID = "uid-now"
	owned := func(uid string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}
		if uid != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SandboxBinding", Name: b.Name, UID: types.UID(uid), Controller: ptr.To(true)}}
		}
		return p
	}
	sandboxPodOf := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: b.Name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: b.Name, UID: "uid-sandbox", Controller: ptr.To(true)}}}}
	}
	tests := []struct {
		name    string
		obj     *corev1.Pod
		binding *v1alpha1.SandboxBinding
		want    bool
	}{
		{"its binding is gone", owned("uid-now"), nil, true},
		{"no owner, binding gone", owned(""), nil, true},
		{"owned by its binding", owned("uid-now"), b, false},
		{"owned by an earlier binding of the name", owned("uid-before"), b, true},
		{"no owner, binding there: its reconcile reports it", owned(""), b, false},
		{"an agent-sandbox Sandbox's pod, binding gone: the Sandbox is swept, not its pod", sandboxPodOf(), nil, false},
		{"an agent-sandbox Sandbox's pod, binding there", sandboxPodOf(), b, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, orphaned(tt.obj, tt.binding))
		})
	}
}

func TestSandboxPodDefaults(t *testing.T) {
	pod := testPods.sandboxPod(binding())
	require.Nil(t, pod.Spec.RuntimeClassName, "the cluster's default runtime")
	require.Equal(t, int32(DefaultSandboxdPort), pod.Spec.Containers[0].Ports[0].ContainerPort)
	for _, v := range pod.Spec.Volumes {
		if v.Name == "workspace" {
			require.Equal(t, resource.MustParse(DefaultWorkspaceSize), *v.EmptyDir.SizeLimit)
		}
	}
}

// A sandbox container always requests and is limited to CPU and memory, requests equal to
// limits: what the binding names, else the deployment's defaults, else those of a docker
// sandbox. A pod without them took whatever its node had (issue 31).
func TestSandboxPodAlwaysHasCPUAndMemory(t *testing.T) {
	t.Parallel()
	q := resource.MustParse
	list := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(mem)}
	}
	configured := testPods
	configured.DefaultResources = list("2", "4Gi")
	tests := []struct {
		name             string
		pods             SandboxPods
		resources        corev1.ResourceRequirements
		requests, limits corev1.ResourceList
	}{
		{name: "none named: the built-in defaults, those of docker", pods: testPods,
			requests: list(DefaultSandboxCPU, DefaultSandboxMemory), limits: list(DefaultSandboxCPU, DefaultSandboxMemory)},
		{name: "none named: the deployment's defaults", pods: configured,
			requests: list("2", "4Gi"), limits: list("2", "4Gi")},
		{name: "a deployment default of memory only", pods: SandboxPods{DefaultResources: corev1.ResourceList{corev1.ResourceMemory: q("3Gi")}},
			requests: list(DefaultSandboxCPU, "3Gi"), limits: list(DefaultSandboxCPU, "3Gi")},
		{name: "both named, as the worker writes them", pods: configured,
			resources: corev1.ResourceRequirements{Limits: list("500m", "1Gi"), Requests: list("500m", "1Gi")},
			requests:  list("500m", "1Gi"), limits: list("500m", "1Gi")},
		{name: "the environment names CPU only", pods: configured,
			resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("1500m")}, Requests: corev1.ResourceList{corev1.ResourceCPU: q("1500m")}},
			requests:  list("1500m", "4Gi"), limits: list("1500m", "4Gi")},
		{name: "limits only: requests follow", pods: testPods,
			resources: corev1.ResourceRequirements{Limits: list("250m", "512Mi")},
			requests:  list("250m", "512Mi"), limits: list("250m", "512Mi")},
		{name: "requests only: limits follow", pods: testPods,
			resources: corev1.ResourceRequirements{Requests: list("250m", "512Mi")},
			requests:  list("250m", "512Mi"), limits: list("250m", "512Mi")},
		{name: "other resources are kept", pods: testPods,
			resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: q("1Gi")}},
			requests:  list(DefaultSandboxCPU, DefaultSandboxMemory),
			limits:    corev1.ResourceList{corev1.ResourceCPU: q(DefaultSandboxCPU), corev1.ResourceMemory: q(DefaultSandboxMemory), corev1.ResourceEphemeralStorage: q("1Gi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := binding(func(b *v1alpha1.SandboxBinding) { b.Spec.Resources = *tt.resources.DeepCopy() })
			got := tt.pods.sandboxPod(b).Spec.Containers[0].Resources
			requireResources(t, tt.requests, got.Requests, "requests")
			requireResources(t, tt.limits, got.Limits, "limits")
			require.Equal(t, tt.resources, b.Spec.Resources, "the binding is not changed")
		})
	}
}

// requireResources compares quantities by value, not by spelling ("1" and "1000m").
func requireResources(t *testing.T, want, got corev1.ResourceList, what string) {
	t.Helper()
	require.Len(t, got, len(want), "%s: %v", what, got)
	for name, w := range want {
		g, ok := got[name]
		require.True(t, ok, "%s: no %s", what, name)
		require.Zero(t, w.Cmp(g), "%s %s: want %s, got %s", what, name, w.String(), g.String())
	}
}

func TestAPersistentWorkspaceIsTheBindingsClaim(t *testing.T) {
	b := binding(func(b *v1alpha1.SandboxBinding) {
		b.Spec.Workspace = v1alpha1.SandboxWorkspace{Persistent: true, StorageClassName: ptr.To("fast-ssd")}
		b.Spec.WorkspaceSize = ptr.To(resource.MustParse("5Gi"))
	})
	pod := testPods.sandboxPod(b)
	var ws *corev1.Volume
	for i, v := range pod.Spec.Volumes {
		if v.Name == "workspace" {
			ws = &pod.Spec.Volumes[i]
		}
	}
	require.NotNil(t, ws)
	require.Nil(t, ws.EmptyDir, "not an emptyDir: it would go with the pod")
	require.Equal(t, &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ma-0123-workspace"}, ws.PersistentVolumeClaim)
	mounted := false
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == "workspace" {
			mounted = m.MountPath == workspaceDir && !m.ReadOnly
		}
	}
	require.True(t, mounted, "the claim is /workspace")

	claim := testPods.workspaceClaim(b)
	require.Equal(t, "ma-0123-workspace", claim.Name)
	require.Equal(t, "sandboxes", claim.Namespace)
	require.Equal(t, sandboxLabels(b), claim.Labels, "labelled as everything else of the binding")
	require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, claim.Spec.AccessModes)
	require.Equal(t, ptr.To("fast-ssd"), claim.Spec.StorageClassName)
	require.Equal(t, resource.MustParse("5Gi"), claim.Spec.Resources.Requests[corev1.ResourceStorage])

	claim = testPods.workspaceClaim(binding(func(b *v1alpha1.SandboxBinding) { b.Spec.Workspace.Persistent = true }))
	require.Nil(t, claim.Spec.StorageClassName, "the cluster's default class")
	require.Equal(t, resource.MustParse(DefaultWorkspaceSize), claim.Spec.Resources.Requests[corev1.ResourceStorage])
}

func TestSandboxNetworkPolicy(t *testing.T) {
	tests := []struct {
		name    string
		egress  string
		pods    SandboxPods
		wantOut func(t *testing.T, rules []networkingv1.NetworkPolicyEgressRule)
	}{
		{"none by default", "", testPods, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) { require.Empty(t, r) }},
		{"none", v1alpha1.EgressNone, testPods, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) { require.Empty(t, r) }},
		{"full", v1alpha1.EgressFull, testPods, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) {
			require.Equal(t, []networkingv1.NetworkPolicyEgressRule{{}}, r, "one empty rule allows everything")
		}},
		{"hosts: only the proxy", v1alpha1.EgressHosts, testPods, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) {
			require.Len(t, r, 1)
			require.Len(t, r[0].To, 1)
			require.Equal(t, map[string]string{"app.kubernetes.io/component": "egress-proxy"}, r[0].To[0].PodSelector.MatchLabels)
			require.Equal(t, map[string]string{corev1.LabelMetadataName: "agents"}, r[0].To[0].NamespaceSelector.MatchLabels)
			require.Equal(t, int32(3128), r[0].Ports[0].Port.IntVal)
		}},
		{"hosts without a proxy: nothing", v1alpha1.EgressHosts, SandboxPods{SandboxdImage: "x"}, func(t *testing.T, r []networkingv1.NetworkPolicyEgressRule) {
			require.Empty(t, r, "narrower, never wider")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := tt.pods.sandboxNetworkPolicy(binding(func(b *v1alpha1.SandboxBinding) { b.Spec.Network.Egress = tt.egress }))
			require.Equal(t, map[string]string{v1alpha1.LabelSandboxBinding: "ma-0123"}, np.Spec.PodSelector.MatchLabels)
			require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
			require.NotNil(t, np.Spec.Egress, "an empty list, with the Egress type, denies")
			tt.wantOut(t, np.Spec.Egress)
			require.Len(t, np.Spec.Ingress, 1)
			require.Equal(t, int32(DefaultSandboxdPort), np.Spec.Ingress[0].Ports[0].Port.IntVal, "ingress only to sandboxd")
			require.Equal(t, tt.pods.Workers.Selector, np.Spec.Ingress[0].From[0].PodSelector.MatchLabels, "only from the workers")
		})
	}
}
