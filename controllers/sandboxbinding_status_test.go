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
