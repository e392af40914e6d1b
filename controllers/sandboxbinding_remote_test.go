package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

func TestRemoteSpec(t *testing.T) {
	size := resource.MustParse("5Gi")
	tests := []struct {
		name string
		spec v1alpha1.SandboxBindingSpec
		want sandbox.Spec
	}{
		{"the least", v1alpha1.SandboxBindingSpec{SessionID: "sesn_1", Image: "base", Provider: "e2b"},
			sandbox.Spec{Name: "ma-x", SessionID: "sesn_1", Image: "base", Egress: sandbox.Egress{Mode: sandbox.EgressNone}}},
		{"resources, env and an allowlist", v1alpha1.SandboxBindingSpec{SessionID: "sesn_2", Image: "tpl", Provider: "daytona",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}},
			WorkspaceSize: &size,
			Env:           []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: ""}},
			Network:       v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressHosts, Hosts: []string{"example.com"}}},
			sandbox.Spec{Name: "ma-x", SessionID: "sesn_2", Image: "tpl",
				Resources: sandbox.Resources{MilliCPU: 1500, MemoryBytes: 2 << 30, DiskBytes: 5 << 30},
				Env:       map[string]string{"A": "1", "B": ""},
				Egress:    sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"example.com"}}}},
		{"full egress", v1alpha1.SandboxBindingSpec{SessionID: "sesn_3", Image: "i", Provider: "opensandbox", Network: v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressFull}},
			sandbox.Spec{Name: "ma-x", SessionID: "sesn_3", Image: "i", Egress: sandbox.Egress{Mode: sandbox.EgressFull}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: "ma-x"}, Spec: tt.spec}
			require.Equal(t, tt.want, remoteSpec(b))
		})
	}
}

func TestRemoteView(t *testing.T) {
	b := &v1alpha1.SandboxBinding{Spec: v1alpha1.SandboxBindingSpec{Provider: "e2b"}, Status: v1alpha1.SandboxBindingStatus{ExternalID: "i7x2"}}
	v := remoteView(b)
	require.Equal(t, sandboxView{Phase: v1alpha1.SandboxRunning, Ready: metav1.ConditionTrue, Reason: v1alpha1.ReasonRemoteReady,
		Message: "e2b sandbox i7x2", Endpoint: "e2b://i7x2", ExternalID: "i7x2"}, v)
	require.True(t, b.Spec.IsRemote())
	require.False(t, (&v1alpha1.SandboxBindingSpec{}).IsRemote())
	require.False(t, (&v1alpha1.SandboxBindingSpec{Provider: v1alpha1.ProviderPod}).IsRemote())
}
