package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	agentsandbox "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentsandboxext "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// TestSandboxObjectCarriesThePod: a binding's Sandbox is the pod the pods substrate would
// make, as its template, so both substrates run the same sandbox; no Service; running unless
// suspended on a persistent workspace.
func TestSandboxObjectCarriesThePod(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    *v1alpha1.SandboxBinding
		mode agentsandbox.SandboxOperatingMode
	}{
		{"running", binding(), agentsandbox.SandboxOperatingModeRunning},
		{"suspended", binding(func(b *v1alpha1.SandboxBinding) {
			b.Spec.Workspace.Persistent, b.Spec.Suspended = true, true
		}), agentsandbox.SandboxOperatingModeSuspended},
		{"suspended without a persistent workspace is not", binding(func(b *v1alpha1.SandboxBinding) { b.Spec.Suspended = true }),
			agentsandbox.SandboxOperatingModeRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sbx := testPods.sandboxObject(tc.b)
			pod := testPods.sandboxPod(tc.b)
			require.Equal(t, tc.b.Name, sbx.Name, "named as the binding, so its pod is too")
			require.Equal(t, tc.b.Namespace, sbx.Namespace)
			require.Equal(t, pod.Spec, sbx.Spec.PodTemplate.Spec)
			require.Equal(t, pod.Labels, sbx.Spec.PodTemplate.ObjectMeta.Labels, "the binding's policy selects the pod by them")
			require.Equal(t, sandboxLabels(tc.b), sbx.Labels, "the controller's cache holds it")
			require.Equal(t, ptr.To(false), sbx.Spec.Service)
			require.Equal(t, tc.mode, sbx.Spec.OperatingMode)
			require.Empty(t, sbx.Spec.VolumeClaimTemplates, "a persistent workspace is the binding's own claim")
		})
	}
}

// TestSandboxTemplateIsThePoolsPod: a pool's SandboxTemplate renders the pool's pod, reads
// the pool's one token Secret, is fenced by the pool's deny-all policy, and lets agent-sandbox
// add no policy, env or volumes of its own.
func TestSandboxTemplateIsThePoolsPod(t *testing.T) {
	pool := &v1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "sandboxes"},
		Spec: v1alpha1.SandboxWarmPoolSpec{Replicas: 2, Template: v1alpha1.SandboxPodTemplate{Image: "python:3.13"}}}
	hash := testPods.poolHash(pool)
	tmpl := testPods.sandboxTemplate(pool, hash)
	require.Equal(t, "default", tmpl.Name)
	require.Equal(t, poolTokenSecretName("default"), podTokenSecret(&corev1.Pod{Spec: tmpl.Spec.PodTemplate.Spec}))
	want := testPods.warmPoolPod(pool, pool.Name, hash).Spec
	want.Containers[0].Env = append(want.Containers[0].Env, corev1.EnvVar{Name: "MANAGED_AGENT_SANDBOXD_TOKEN_SUBJECT",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
	require.Equal(t, want, tmpl.Spec.PodTemplate.Spec, "the pool's pod, whose sandboxd derives its token for its own UID")
	require.True(t, labels.SelectorFromSet(warmPoolNetworkPolicy(pool).Spec.PodSelector.MatchLabels).Matches(labels.Set(tmpl.Spec.PodTemplate.ObjectMeta.Labels)),
		"the pool's policy fences its sandboxes")
	require.Equal(t, hash, tmpl.Spec.PodTemplate.ObjectMeta.Labels[v1alpha1.LabelTemplateHash])
	require.Equal(t, agentsandboxext.NetworkPolicyManagementUnmanaged, tmpl.Spec.NetworkPolicyManagement)
	require.Equal(t, agentsandboxext.EnvVarsInjectionPolicyDisallowed, tmpl.Spec.EnvVarsInjectionPolicy)
	require.Equal(t, agentsandboxext.VolumeClaimTemplatesPolicyDisallowed, tmpl.Spec.VolumeClaimTemplatesPolicy)
	require.Equal(t, ptr.To(false), tmpl.Spec.Service)
}

// TestSubstrateDecisions: what a binding's status says about where its pod comes from.
func TestSubstrateDecisions(t *testing.T) {
	for _, tc := range []struct {
		name               string
		b                  *v1alpha1.SandboxBinding
		chosen, own, claim bool
	}{
		{name: "new", b: binding()},
		{name: "a pod of its own (pods)", b: binding(func(b *v1alpha1.SandboxBinding) { b.Status.PodName, b.Status.Substrate = b.Name, SubstratePods }), chosen: true},
		{name: "older than the substrate field", b: binding(func(b *v1alpha1.SandboxBinding) { b.Status.PodName = b.Name }), chosen: true},
		{name: "a Sandbox of its own", b: binding(func(b *v1alpha1.SandboxBinding) { b.Status.PodName, b.Status.Substrate = b.Name, SubstrateAgentSandbox }),
			chosen: true, own: true},
		{name: "claimed, pod not known yet", b: binding(func(b *v1alpha1.SandboxBinding) {
			(&SandboxBindingReconciler{}).recordClaim(b, "default")
		}), chosen: true, claim: true},
		{name: "a claimed pod of a pool of ours (pods)", b: binding(func(b *v1alpha1.SandboxBinding) {
			b.Status.PodName, b.Status.Substrate, b.Status.WarmPool, b.Status.TokenSecret = "default-abc", SubstratePods, "default", "default-abc-token"
		}), chosen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &SandboxBindingReconciler{}
			require.Equal(t, tc.chosen, podChosen(tc.b))
			require.Equal(t, tc.own, r.ownSandbox(tc.b))
			require.Equal(t, tc.claim, agentSandboxClaim(tc.b))
			if tc.claim {
				require.Equal(t, tokenSecretName(tc.b), tc.b.Status.TokenSecret, "a claim's token is the binding's own Secret")
			}
		})
	}
}

// TestSandboxCacheOnlyWithAgentSandbox: the manager's cache names agent-sandbox's kinds only
// on that substrate (it asks the apiserver about every kind it names: a cluster without the
// CRDs would fail the start), and selects there what the controller makes.
func TestSandboxCacheOnlyWithAgentSandbox(t *testing.T) {
	count := func(substrate string) (n int, sel labels.Selector) {
		for obj, by := range SandboxCacheOptions("sandboxes", substrate) {
			switch obj.(type) {
			case *agentsandbox.Sandbox, *agentsandboxext.SandboxClaim, *agentsandboxext.SandboxTemplate, *agentsandboxext.SandboxWarmPool:
				n++
				sel = by.Label
			}
		}
		return n, sel
	}
	n, _ := count(SubstratePods)
	require.Zero(t, n)
	n, _ = count("")
	require.Zero(t, n)
	n, sel := count(SubstrateAgentSandbox)
	require.Equal(t, 4, n)
	require.True(t, sel.Matches(labels.Set(sandboxLabels(binding()))))
	pool := &v1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	require.True(t, sel.Matches(labels.Set(warmPoolLabels(pool))))
}
