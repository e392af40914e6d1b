package controllers

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// TestTemplateHash: a binding matches a pool exactly when the controller would render the
// same pod for both, whatever the session and the network.
func TestTemplateHash(t *testing.T) {
	base := v1alpha1.SandboxBindingSpec{SessionID: "sesn_1", Image: "sandbox:1", Port: 8090}
	upgraded := testPods
	upgraded.SandboxdImage = "managed-agents:v2"
	// The egress proxy reaches no pod spec, only the binding's policy.
	noProxy := testPods
	noProxy.EgressProxy, noProxy.EgressProxyPort = PodPeer{}, 0
	// The deployment's default resources reach the pods of bindings that name none.
	biggerDefaults := testPods
	biggerDefaults.DefaultResources = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}
	with := func(f func(*v1alpha1.SandboxBindingSpec)) v1alpha1.SandboxBindingSpec {
		s := *base.DeepCopy()
		f(&s)
		return s
	}
	tests := []struct {
		name  string
		spec  v1alpha1.SandboxBindingSpec
		pods  SandboxPods
		equal bool
	}{
		{"another session", with(func(s *v1alpha1.SandboxBindingSpec) { s.SessionID = "sesn_2" }), testPods, true},
		{"another network (the binding's policy applies on claim)", with(func(s *v1alpha1.SandboxBindingSpec) {
			s.Network = v1alpha1.SandboxNetwork{Egress: v1alpha1.EgressFull}
		}), testPods, true},
		{"the default port spelled out or not", with(func(s *v1alpha1.SandboxBindingSpec) { s.Port = 0 }), testPods, true},
		{"the default workspace size spelled out", with(func(s *v1alpha1.SandboxBindingSpec) { s.WorkspaceSize = ptr.To(resource.MustParse("10Gi")) }), testPods, true},
		{"a quantity spelled another way", with(func(s *v1alpha1.SandboxBindingSpec) { s.WorkspaceSize = ptr.To(resource.MustParse("10240Mi")) }), testPods, true},
		{"another egress proxy configuration", base, noProxy, true},
		{"another image", with(func(s *v1alpha1.SandboxBindingSpec) { s.Image = "sandbox:2" }), testPods, false},
		{"another port", with(func(s *v1alpha1.SandboxBindingSpec) { s.Port = 9000 }), testPods, false},
		{"env (it cannot be injected into a running pod)", with(func(s *v1alpha1.SandboxBindingSpec) {
			s.Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}), testPods, false},
		{"env the controller drops anyway", with(func(s *v1alpha1.SandboxBindingSpec) {
			s.Env = []corev1.EnvVar{{Name: "MANAGED_AGENT_X", Value: "1"}}
		}), testPods, true},
		{"resources", with(func(s *v1alpha1.SandboxBindingSpec) {
			s.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
		}), testPods, false},
		{"the default resources spelled out", with(func(s *v1alpha1.SandboxBindingSpec) {
			s.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		}), testPods, true},
		{"other deployment defaults", base, biggerDefaults, false},
		{"a runtime class", with(func(s *v1alpha1.SandboxBindingSpec) { s.RuntimeClassName = ptr.To("gvisor") }), testPods, false},
		{"a workspace size", with(func(s *v1alpha1.SandboxBindingSpec) { s.WorkspaceSize = ptr.To(resource.MustParse("1Gi")) }), testPods, false},
		{"a service account", with(func(s *v1alpha1.SandboxBindingSpec) { s.ServiceAccountName = "sandbox" }), testPods, false},
		{"a node selector", with(func(s *v1alpha1.SandboxBindingSpec) { s.NodeSelector = map[string]string{"pool": "sandboxes"} }), testPods, false},
		{"a toleration", with(func(s *v1alpha1.SandboxBindingSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists}}
		}), testPods, false},
		{"another sandboxd image (an upgraded controller)", base, upgraded, false},
	}
	want := testPods.templateHash(base)
	require.Len(t, want, 16)
	require.Empty(t, validation.IsValidLabelValue(want), "a valid label value")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.pods.templateHash(tt.spec)
			if tt.equal {
				require.Equal(t, want, got)
			} else {
				require.NotEqual(t, want, got)
			}
		})
	}

	t.Run("a pool's template hashes as the binding it serves", func(t *testing.T) {
		pool := &v1alpha1.SandboxWarmPool{Spec: v1alpha1.SandboxWarmPoolSpec{Template: v1alpha1.SandboxPodTemplate{Image: "sandbox:1"}}}
		require.Equal(t, want, testPods.poolHash(pool))
	})
}

func TestWarmPoolPod(t *testing.T) {
	pool := &v1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "sandboxes"},
		Spec: v1alpha1.SandboxWarmPoolSpec{Replicas: 2, Template: v1alpha1.SandboxPodTemplate{Image: "sandbox:1", RuntimeClassName: ptr.To("gvisor")}}}
	hash := testPods.poolHash(pool)
	pod := testPods.warmPoolPod(pool, "default-0a1b2c3d4e", hash)
	require.Equal(t, "default-0a1b2c3d4e", pod.Name)
	require.Equal(t, "default-0a1b2c3d4e-token", podTokenSecret(pod))
	require.Equal(t, map[string]string{v1alpha1.LabelWarmPool: "default", v1alpha1.LabelTemplateHash: hash,
		"app.kubernetes.io/managed-by": "managed-agents", "app.kubernetes.io/component": "sandbox"}, pod.Labels)
	require.NotContains(t, pod.Labels, v1alpha1.LabelSandboxBinding, "no binding's policy selects an unclaimed pod")
	require.NotContains(t, pod.Labels, v1alpha1.LabelSessionID)
	require.Equal(t, "gvisor", *pod.Spec.RuntimeClassName)
	require.False(t, *pod.Spec.AutomountServiceAccountToken, "restricted as a binding's pod")

	np := warmPoolNetworkPolicy(pool)
	require.Equal(t, "default-warmpool", np.Name)
	require.Equal(t, map[string]string{v1alpha1.LabelWarmPool: "default"}, np.Spec.PodSelector.MatchLabels)
	require.Len(t, np.Spec.PolicyTypes, 2)
	require.Empty(t, np.Spec.Ingress, "no ingress")
	require.Empty(t, np.Spec.Egress, "no egress")
	require.Equal(t, "agents.managed-agents.io/sandbox-warm-pool=default", warmPoolSelector(pool))
}

// TestSandboxCacheSelectsPoolPods: the manager's cache holds bindings' and pools' pods, and
// nothing else.
func TestSandboxCacheSelectsPoolPods(t *testing.T) {
	var sel labels.Selector
	for obj, by := range SandboxCacheOptions("", SubstratePods) {
		if _, ok := obj.(*corev1.Pod); ok {
			sel = by.Label
		}
	}
	require.NotNil(t, sel)
	pool := &v1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.SandboxWarmPoolSpec{Template: v1alpha1.SandboxPodTemplate{Image: "x"}}}
	b := &v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: "ma-1"}, Spec: v1alpha1.SandboxBindingSpec{SessionID: "sesn_1", Image: "x"}}
	require.True(t, sel.Matches(labels.Set(testPods.warmPoolPod(pool, "default-1", "h").Labels)))
	require.True(t, sel.Matches(labels.Set(testPods.sandboxPod(b).Labels)))
	require.False(t, sel.Matches(labels.Set{"app": "web"}))
}

func poolPod(name, hash string, age time.Duration, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelTemplateHash: hash},
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	ready("10.0.0.1")(p)
}

func TestPlanWarmPool(t *testing.T) {
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	failed := func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
	pulling := waitingFor("sandbox", "ImagePullBackOff", "Back-off pulling image")
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		replicas int32
		create   int
		remove   []string
		replicaN int32
		ready    int32
		waiting  string
	}{
		{name: "empty pool fills", replicas: 3, create: 3},
		{name: "nothing wanted, nothing kept", replicas: 0, pods: []*corev1.Pod{poolPod("a", "h", time.Hour, running)}, remove: []string{"a"}},
		{name: "full pool is left alone", replicas: 2,
			pods:     []*corev1.Pod{poolPod("a", "h", time.Hour, running), poolPod("b", "h", time.Minute, running)},
			replicaN: 2, ready: 2},
		{name: "a starting pod counts toward replicas but not ready", replicas: 2,
			pods:     []*corev1.Pod{poolPod("a", "h", time.Hour, running), poolPod("b", "h", time.Minute, pulling)},
			replicaN: 2, ready: 1, waiting: "pod b: ImagePullBackOff: container sandbox: Back-off pulling image"},
		{name: "another template's pods go and are replaced", replicas: 2,
			pods:   []*corev1.Pod{poolPod("old1", "g", time.Hour, running), poolPod("new", "h", time.Minute, running), poolPod("old2", "g", time.Hour)},
			create: 1, remove: []string{"old1", "old2"}, replicaN: 1, ready: 1},
		{name: "an ended pod goes and is replaced", replicas: 1,
			pods:   []*corev1.Pod{poolPod("a", "h", time.Hour, failed)},
			create: 1, remove: []string{"a"}},
		{name: "a pod being deleted counts for nothing", replicas: 1,
			pods:   []*corev1.Pod{poolPod("a", "h", time.Hour, running, deleting)},
			create: 1},
		{name: "the surplus goes not ready first, then newest", replicas: 2,
			pods: []*corev1.Pod{poolPod("young", "h", time.Minute, running), poolPod("starting", "h", time.Hour),
				poolPod("old", "h", 2*time.Hour, running), poolPod("middle", "h", time.Hour, running)},
			remove: []string{"starting", "young"}, replicaN: 2, ready: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := planWarmPool(tt.pods, "h", tt.replicas, 8090)
			var removed []string
			for _, p := range plan.Remove {
				removed = append(removed, p.Name)
			}
			require.Equal(t, tt.create, plan.Create, "create")
			require.ElementsMatch(t, tt.remove, removed, "remove")
			require.Equal(t, tt.replicaN, plan.Replicas, "replicas")
			require.Equal(t, tt.ready, plan.Ready, "ready")
			require.Equal(t, tt.waiting, plan.Waiting)
		})
	}
}

func TestWarmPoolCondition(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		plan     warmPoolPlan
		err      error
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{"filled", 2, warmPoolPlan{Replicas: 2, Ready: 2}, nil, metav1.ConditionTrue, v1alpha1.ReasonPoolFilled, "2 of 2 pods ready to claim"},
		{"empty on purpose", 0, warmPoolPlan{}, nil, metav1.ConditionTrue, v1alpha1.ReasonPoolFilled, "0 of 0 pods ready to claim"},
		{"filling says why", 2, warmPoolPlan{Replicas: 2, Ready: 1, Waiting: "pod b: Unschedulable"}, nil, metav1.ConditionFalse, v1alpha1.ReasonPoolFilling,
			"1 of 2 pods ready to claim; pod b: Unschedulable"},
		{"an error wins", 2, warmPoolPlan{Replicas: 2, Ready: 2}, errors.New("create a pool pod: quota"), metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed,
			"create a pool pod: quota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason, msg := warmPoolCondition(tt.replicas, tt.plan, tt.err)
			require.Equal(t, tt.status, status)
			require.Equal(t, tt.reason, reason)
			require.Equal(t, tt.message, msg)
		})
	}
}

func TestClaimable(t *testing.T) {
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	noIP := func(p *corev1.Pod) { p.Status.PodIP = "" }
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"ready", poolPod("a", "h", 0, running), true},
		{"another template", poolPod("a", "g", 0, running), false},
		{"starting", poolPod("a", "h", 0), false},
		{"no address yet", poolPod("a", "h", 0, running, noIP), false},
		{"being deleted", poolPod("a", "h", 0, running, deleting), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, claimable(tt.pod, "h"))
		})
	}
	pods := []*corev1.Pod{poolPod("b", "h", time.Minute), poolPod("c", "h", time.Hour), poolPod("a", "h", time.Hour)}
	claimOrder(pods)
	require.Equal(t, []string{"a", "c", "b"}, []string{pods[0].Name, pods[1].Name, pods[2].Name}, "oldest first, by name on ties")
}

func TestWithoutController(t *testing.T) {
	refs := []metav1.OwnerReference{{Kind: "SandboxWarmPool", Name: "p", Controller: ptr.To(true)}, {Kind: "Other", Name: "o"}}
	require.Equal(t, []metav1.OwnerReference{{Kind: "Other", Name: "o"}}, withoutController(refs))
	require.Empty(t, withoutController(nil))
}

// TestClaimedSecret: a binding takes as its token only the Secret its claimed pod owns.
func TestClaimedSecret(t *testing.T) {
	claimed := v1alpha1.SandboxBindingStatus{WarmPool: "default", PodName: "default-1", ExternalID: "uid-1", TokenSecret: "default-1-token"}
	secret := func(kind, name, uid string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "default-1-token", OwnerReferences: []metav1.OwnerReference{
			{Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}}}
	}
	tests := []struct {
		name   string
		status v1alpha1.SandboxBindingStatus
		secret *corev1.Secret
		want   bool
	}{
		{"owned by the claimed pod", claimed, secret("Pod", "default-1", "uid-1"), true},
		{"before the pod's UID is recorded", v1alpha1.SandboxBindingStatus{WarmPool: "default", PodName: "default-1"}, secret("Pod", "default-1", "uid-9"), true},
		{"owned by a pod of that name that replaced it", claimed, secret("Pod", "default-1", "uid-2"), false},
		{"owned by another pod", claimed, secret("Pod", "default-2", "uid-1"), false},
		{"owned by something else", claimed, secret("SandboxWarmPool", "default-1", "uid-1"), false},
		{"owned by nobody", claimed, &corev1.Secret{}, false},
		{"a binding that claimed nothing", v1alpha1.SandboxBindingStatus{PodName: "default-1"}, secret("Pod", "default-1", "uid-1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, claimedSecret(&v1alpha1.SandboxBinding{Status: tt.status}, tt.secret))
		})
	}
}
