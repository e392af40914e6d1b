package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// podIs builds a pod for the table: uid, phase and whatever the options add.
func podIs(uid string, phase corev1.PodPhase, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ma-x", UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: phase}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ready(ip string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.PodIP = ip
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	}
}

func waitingFor(container, reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: container,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}})
	}
}

func TestViewSandbox(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	seen := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxRunning, ExternalID: "uid-1"}
	goneBefore := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxFailed, ExternalID: "uid-1",
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: F, Reason: v1alpha1.ReasonPodGone, Message: "deleted"}}}
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	tests := []struct {
		name     string
		last     v1alpha1.SandboxBindingStatus
		pod      *corev1.Pod
		phase    string
		ready    metav1.ConditionStatus
		reason   string
		endpoint string
		extID    string
	}{
		{"no pod yet", v1alpha1.SandboxBindingStatus{}, nil, v1alpha1.SandboxPending, F, v1alpha1.ReasonPodCreating, "", ""},
		{"created, not scheduled", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodPending), v1alpha1.SandboxPending, F, v1alpha1.ReasonPodStarting, "", "uid-1"},
		{"unschedulable", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"}}
		}), v1alpha1.SandboxPending, F, "Unschedulable", "", "uid-1"},
		{"image pull failing", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodPending, waitingFor("sandbox", "ImagePullBackOff", "no such image")),
			v1alpha1.SandboxPending, F, "ImagePullBackOff", "", "uid-1"},
		{"routine creating is not a reason", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodPending, waitingFor("sandbox", "ContainerCreating", "")),
			v1alpha1.SandboxPending, F, v1alpha1.ReasonPodStarting, "", "uid-1"},
		{"running, probe not passed", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodRunning), v1alpha1.SandboxRunning, F, v1alpha1.ReasonPodStarting, "", "uid-1"},
		{"ready without an IP is not ready", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodRunning, ready("")), v1alpha1.SandboxRunning, F, v1alpha1.ReasonPodStarting, "", "uid-1"},
		{"ready", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodRunning, ready("10.1.2.3")), v1alpha1.SandboxRunning, T, v1alpha1.ReasonSandboxReady, "http://10.1.2.3:8090", "uid-1"},
		{"ready on IPv6", v1alpha1.SandboxBindingStatus{}, podIs("uid-1", corev1.PodRunning, ready("fd00::7")), v1alpha1.SandboxRunning, T, v1alpha1.ReasonSandboxReady, "http://[fd00::7]:8090", "uid-1"},
		{"crash looping", seen, podIs("uid-1", corev1.PodRunning, waitingFor("sandbox", "CrashLoopBackOff", "back-off")), v1alpha1.SandboxRunning, F, "CrashLoopBackOff", "", "uid-1"},
		{"pod failed (evicted)", seen, podIs("uid-1", corev1.PodFailed, func(p *corev1.Pod) { p.Status.Reason = "Evicted" }), v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodFailed, "", "uid-1"},
		{"pod succeeded", seen, podIs("uid-1", corev1.PodSucceeded), v1alpha1.SandboxStopped, F, v1alpha1.ReasonPodStopped, "", "uid-1"},
		{"pod deleted behind our back", seen, nil, v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
		{"pod being deleted behind our back", seen, podIs("uid-1", corev1.PodRunning, ready("10.1.2.3"), deleting), v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
		{"pod replaced by another", seen, podIs("uid-2", corev1.PodRunning, ready("10.1.2.4")), v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
		{"gone stays gone, even if a pod reappears", goneBefore, podIs("uid-1", corev1.PodRunning, ready("10.1.2.3")), v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viewSandbox(tt.last, tt.pod, 8090)
			require.Equal(t, tt.phase, v.Phase)
			require.Equal(t, tt.ready, v.Ready)
			require.Equal(t, tt.reason, v.Reason)
			require.Equal(t, tt.endpoint, v.Endpoint)
			require.Equal(t, tt.extID, v.ExternalID)
			require.NotEmpty(t, v.Message, "every state says why")
		})
	}
}

func TestApplyViewKeepsTheTransitionTime(t *testing.T) {
	var st v1alpha1.SandboxBindingStatus
	applyView(&st, sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonPodStarting, Message: "a"}, 1)
	first := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).LastTransitionTime
	applyView(&st, sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: "ImagePullBackOff", Message: "b"}, 1)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	require.Equal(t, first, c.LastTransitionTime, "the status did not change, only the reason")
	require.Equal(t, "ImagePullBackOff", c.Reason)
	applyView(&st, sandboxView{Phase: v1alpha1.SandboxRunning, Endpoint: "http://10.0.0.1:8090", ExternalID: "u", Ready: metav1.ConditionTrue, Reason: v1alpha1.ReasonSandboxReady, Message: "c"}, 2)
	require.Equal(t, "http://10.0.0.1:8090", st.Endpoint)
	require.Equal(t, int64(2), meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).ObservedGeneration)
	require.Len(t, st.Conditions, 1)
}

func TestViewBindingSuspension(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	running := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxRunning, ExternalID: "uid-1"}
	suspending := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxSuspended, ExternalID: "uid-1"}
	suspended := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxSuspended}
	claimGone := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxFailed, ExternalID: "uid-1",
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: F, Reason: v1alpha1.ReasonClaimGone, Message: "claim deleted"}}}
	podGone := v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxFailed, ExternalID: "uid-1",
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: F, Reason: v1alpha1.ReasonPodGone, Message: "deleted"}}}
	deleting := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
	tests := []struct {
		name                 string
		last                 v1alpha1.SandboxBindingStatus
		pod                  *corev1.Pod
		suspend, claimGone   bool
		phase                string
		ready                metav1.ConditionStatus
		reason, endpoint, id string
	}{
		{"not suspended: the pod decides", running, podIs("uid-1", corev1.PodRunning, ready("10.0.0.1")), false, false,
			v1alpha1.SandboxRunning, T, v1alpha1.ReasonSandboxReady, "http://10.0.0.1:8090", "uid-1"},
		{"suspending: the pod is still there", running, podIs("uid-1", corev1.PodRunning, ready("10.0.0.1")), true, false,
			v1alpha1.SandboxSuspended, F, v1alpha1.ReasonSuspended, "", "uid-1"},
		{"suspending: the pod terminates", suspending, podIs("uid-1", corev1.PodRunning, deleting), true, false,
			v1alpha1.SandboxSuspended, F, v1alpha1.ReasonSuspended, "", "uid-1"},
		{"suspended: the pod is gone, its uid forgotten", suspending, nil, true, false,
			v1alpha1.SandboxSuspended, F, v1alpha1.ReasonSuspended, "", ""},
		{"resuming: the old pod still terminates", suspending, podIs("uid-1", corev1.PodRunning, deleting), false, false,
			v1alpha1.SandboxSuspended, F, v1alpha1.ReasonResuming, "", ""},
		{"resuming: no pod yet", suspended, nil, false, false,
			v1alpha1.SandboxSuspended, F, v1alpha1.ReasonResuming, "", ""},
		{"resumed: the new pod is the binding's, not a replacement", suspending, podIs("uid-2", corev1.PodPending), false, false,
			v1alpha1.SandboxPending, F, v1alpha1.ReasonPodStarting, "", "uid-2"},
		{"resumed and ready", suspended, podIs("uid-2", corev1.PodRunning, ready("10.0.0.2")), false, false,
			v1alpha1.SandboxRunning, T, v1alpha1.ReasonSandboxReady, "http://10.0.0.2:8090", "uid-2"},
		{"after resuming, a replaced pod is gone again", v1alpha1.SandboxBindingStatus{Phase: v1alpha1.SandboxRunning, ExternalID: "uid-2"},
			podIs("uid-3", corev1.PodRunning, ready("10.0.0.3")), false, false, v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-2"},
		{"not suspended, pod deleted behind our back: gone", running, nil, false, false,
			v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
		{"the claim deleted behind our back", running, podIs("uid-1", corev1.PodRunning, ready("10.0.0.1")), false, true,
			v1alpha1.SandboxFailed, F, v1alpha1.ReasonClaimGone, "", "uid-1"},
		{"the claim deleted while suspended", suspended, nil, false, true,
			v1alpha1.SandboxFailed, F, v1alpha1.ReasonClaimGone, "", ""},
		{"claim gone stays gone", claimGone, podIs("uid-1", corev1.PodRunning, ready("10.0.0.1")), false, false,
			v1alpha1.SandboxFailed, F, v1alpha1.ReasonClaimGone, "", "uid-1"},
		{"a gone binding is not suspended", podGone, nil, true, false,
			v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
		{"nor resumed", podGone, podIs("uid-2", corev1.PodRunning, ready("10.0.0.2")), false, false,
			v1alpha1.SandboxFailed, F, v1alpha1.ReasonPodGone, "", "uid-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viewBinding(tt.last, tt.pod, 8090, tt.suspend, tt.claimGone)
			require.Equal(t, tt.phase, v.Phase)
			require.Equal(t, tt.ready, v.Ready)
			require.Equal(t, tt.reason, v.Reason)
			require.Equal(t, tt.endpoint, v.Endpoint)
			require.Equal(t, tt.id, v.ExternalID)
			require.NotEmpty(t, v.Message, "every state says why")
		})
	}
}
