package kubernetes

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestConfigIsCheckedNamingTheVariable(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no namespace", Config{Client: c, Image: "img"}, "MANAGED_AGENT_KUBERNETES_NAMESPACE"},
		{"bad namespace", Config{Client: c, Namespace: "Not_A_Name", Image: "img"}, "MANAGED_AGENT_KUBERNETES_NAMESPACE"},
		{"no image", Config{Client: c, Namespace: "sandboxes"}, "MANAGED_AGENT_KUBERNETES_IMAGE"},
		{"bad port", Config{Client: c, Namespace: "sandboxes", Image: "img", Port: 70000}, "MANAGED_AGENT_KUBERNETES_SANDBOXD_PORT"},
		{"bad runtime class", Config{Client: c, Namespace: "sandboxes", Image: "img", RuntimeClassName: "Bad Name"}, "MANAGED_AGENT_KUBERNETES_RUNTIME_CLASS"},
		{"no client", Config{Namespace: "sandboxes", Image: "img"}, "no cluster client"},
		{"bad storage class", Config{Client: c, Namespace: "sandboxes", Image: "img", PersistentWorkspace: true, WorkspaceStorageClass: "Fast SSD"}, "MANAGED_AGENT_KUBERNETES_WORKSPACE_STORAGE_CLASS"},
		{"storage class without persistence", Config{Client: c, Namespace: "sandboxes", Image: "img", WorkspaceStorageClass: "fast"}, "MANAGED_AGENT_KUBERNETES_PERSISTENT_WORKSPACE=true"},
		{"zero workspace size", Config{Client: c, Namespace: "sandboxes", Image: "img", WorkspaceSize: ptr.To(resource.MustParse("0"))}, "MANAGED_AGENT_KUBERNETES_WORKSPACE_SIZE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			require.ErrorContains(t, err, tt.want)
		})
	}
	p, err := New(Config{Client: c, Namespace: "sandboxes", Image: "img"})
	require.NoError(t, err)
	require.Equal(t, int32(DefaultPort), p.cfg.Port)
}

func TestRefsAreChecked(t *testing.T) {
	good := sandbox.NameFor("sesn_1")
	require.NoError(t, checkRef(sandbox.Ref{Provider: Name, ExternalID: good}))
	require.ErrorIs(t, checkRef(sandbox.Ref{Provider: "docker", ExternalID: good}), sandbox.ErrForeignRef)
	for _, id := range []string{"", "ma-", "MA-" + good[3:], good + "0", "other", "../" + good, good[:len(good)-1] + "g"} {
		require.ErrorIs(t, checkRef(sandbox.Ref{Provider: Name, ExternalID: id}), sandbox.ErrInvalidRef, id)
	}
}

func TestBindingFromSpec(t *testing.T) {
	p, err := New(Config{Client: fake.NewClientBuilder().Build(), Namespace: "sandboxes", Image: "default:img", Port: 9000, RuntimeClassName: "gvisor"})
	require.NoError(t, err)
	spec := sandbox.SpecFor("sesn_Mixed_1", wire.EnvironmentConfig{Type: "cloud"})
	spec.Env = map[string]string{"B": "2", "A": "1"}
	spec.Resources = sandbox.Resources{MilliCPU: 500, MemoryBytes: 1 << 30, DiskBytes: 2 << 30}
	spec.Egress = sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"pypi.org"}}
	b := p.binding(spec)

	require.Equal(t, spec.Name, b.Name)
	require.Equal(t, "sandboxes", b.Namespace)
	require.Equal(t, "sesn_Mixed_1", b.Spec.SessionID)
	require.Equal(t, "sesn_Mixed_1", b.Labels[v1alpha1.LabelSessionID])
	require.Equal(t, "default:img", b.Spec.Image, "the deployment's image when the spec names none")
	require.Equal(t, int32(9000), b.Spec.Port)
	require.Equal(t, "gvisor", *b.Spec.RuntimeClassName)
	require.Equal(t, []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}, b.Spec.Env, "sorted, so equal specs render equally")
	requireQuantity(t, "500m", b.Spec.Resources.Limits[corev1.ResourceCPU])
	requireQuantity(t, "500m", b.Spec.Resources.Requests[corev1.ResourceCPU])
	requireQuantity(t, "1Gi", b.Spec.Resources.Limits[corev1.ResourceMemory])
	requireQuantity(t, "1Gi", b.Spec.Resources.Requests[corev1.ResourceMemory])
	requireQuantity(t, "2Gi", *b.Spec.WorkspaceSize)
	require.Equal(t, v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressHosts, Hosts: []string{"pypi.org"}}, b.Spec.Network)

	spec.Image = "python:3.13"
	spec.Egress = sandbox.Egress{}
	b = p.binding(spec)
	require.Equal(t, "python:3.13", b.Spec.Image)
	require.Equal(t, v1alpha1.EgressNone, b.Spec.Network.Egress, "an unresolved spec gets no network")
}

func TestBindingWithAPersistentWorkspace(t *testing.T) {
	p, err := New(Config{Client: fake.NewClientBuilder().Build(), Namespace: "sandboxes", Image: "img",
		PersistentWorkspace: true, WorkspaceStorageClass: "fast", WorkspaceSize: ptr.To(resource.MustParse("3Gi"))})
	require.NoError(t, err)
	spec := sandbox.SpecFor("sesn_1", wire.EnvironmentConfig{Type: "cloud"})
	b := p.binding(spec)
	require.Equal(t, v1alpha1.SandboxWorkspace{Persistent: true, StorageClassName: ptr.To("fast")}, b.Spec.Workspace)
	requireQuantity(t, "3Gi", *b.Spec.WorkspaceSize)
	require.False(t, b.Spec.Suspended, "a new sandbox runs")

	spec.Resources.DiskBytes = 1 << 30
	requireQuantity(t, "1Gi", *p.binding(spec).Spec.WorkspaceSize) // the environment's size wins

	p, err = New(Config{Client: fake.NewClientBuilder().Build(), Namespace: "sandboxes", Image: "img"})
	require.NoError(t, err)
	b = p.binding(spec)
	require.Equal(t, v1alpha1.SandboxWorkspace{}, b.Spec.Workspace, "an emptyDir by default")
}

func requireQuantity(t *testing.T, want string, got resource.Quantity) {
	t.Helper()
	w := resource.MustParse(want)
	require.Zero(t, w.Cmp(got), "want %s, got %s", want, got.String())
}
