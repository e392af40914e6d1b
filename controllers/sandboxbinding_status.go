package controllers

import (
	"cmp"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// sandboxView is the part of a binding's status the pod decides: computed by sandboxView
// from what the reconciler observed, with no I/O, so every case is a table row.
type sandboxView struct {
	Phase      string
	Endpoint   string
	ExternalID string
	Ready      metav1.ConditionStatus
	Reason     string
	Message    string
}

// viewSandbox says what a binding is, given its last status and its pod as the apiserver has
// it now (nil: there is none). A pod that once existed (the status recorded its UID) and is
// now missing, being deleted or replaced by another of the same name was removed behind the
// controller's back: the binding is Failed for good, and stays so, since a new pod would
// silently serve an empty workspace.
func viewSandbox(last v1alpha1.SandboxBindingStatus, pod *corev1.Pod, port int32) sandboxView {
	gone := func(msg string) sandboxView {
		return sandboxView{Phase: v1alpha1.SandboxFailed, ExternalID: last.ExternalID, Ready: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonPodGone, Message: msg}
	}
	if prev := meta.FindStatusCondition(last.Conditions, v1alpha1.ConditionReady); last.Phase == v1alpha1.SandboxFailed && prev != nil &&
		(prev.Reason == v1alpha1.ReasonPodGone || prev.Reason == v1alpha1.ReasonPodFailed) {
		return sandboxView{Phase: v1alpha1.SandboxFailed, ExternalID: last.ExternalID, Ready: metav1.ConditionFalse, Reason: prev.Reason, Message: prev.Message}
	}
	switch {
	case pod == nil && last.ExternalID != "":
		return gone(fmt.Sprintf("the sandbox pod (uid %s) was deleted behind the controller's back; its workspace is lost and it is not recreated: delete the binding", last.ExternalID))
	case pod == nil:
		return sandboxView{Phase: v1alpha1.SandboxPending, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonPodCreating, Message: "creating the sandbox pod"}
	case last.ExternalID != "" && string(pod.UID) != last.ExternalID:
		return gone(fmt.Sprintf("the sandbox pod was replaced (uid %s, not %s) behind the controller's back: delete the binding", pod.UID, last.ExternalID))
	case pod.DeletionTimestamp != nil:
		return gone("the sandbox pod is being deleted behind the controller's back; its workspace is lost: delete the binding")
	}
	v := sandboxView{ExternalID: string(pod.UID), Ready: metav1.ConditionFalse}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		v.Phase, v.Reason = v1alpha1.SandboxFailed, v1alpha1.ReasonPodFailed
		v.Message = "the sandbox pod failed"
		if pod.Status.Reason != "" || pod.Status.Message != "" {
			v.Message += ": " + joinNonEmpty(pod.Status.Reason, pod.Status.Message)
		} else if r, m, ok := terminated(pod); ok {
			v.Message += ": " + joinNonEmpty(r, m)
		}
		return v
	case corev1.PodSucceeded:
		v.Phase, v.Reason, v.Message = v1alpha1.SandboxStopped, v1alpha1.ReasonPodStopped, "sandboxd exited; the sandbox pod is stopped"
		return v
	case corev1.PodRunning:
		v.Phase = v1alpha1.SandboxRunning
		if podReady(pod) && pod.Status.PodIP != "" {
			v.Ready, v.Reason, v.Message = metav1.ConditionTrue, v1alpha1.ReasonSandboxReady, "sandboxd answers"
			v.Endpoint = "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
			return v
		}
	default:
		v.Phase = v1alpha1.SandboxPending
	}
	// Not ready: the most specific reason the pod gives.
	if r, m, ok := waiting(pod); ok {
		v.Reason, v.Message = r, joinNonEmpty(r, m)
		return v
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			v.Reason, v.Message = cmp.Or(c.Reason, "Unschedulable"), joinNonEmpty(c.Reason, c.Message)
			return v
		}
	}
	v.Reason, v.Message = v1alpha1.ReasonPodStarting, "waiting for sandboxd to answer on its port"
	return v
}

// viewBinding is viewSandbox with the binding's workspace claim and suspension: suspended
// (on a persistent workspace) the pod is expected to go, and the binding is Suspended with no
// pod UID once it has; resuming, the pod being deleted is waited out and the new pod, on the
// same claim, is the binding's pod rather than one replaced behind the controller's back.
// claimGone is a workspace claim missing or being deleted after a pod ran on it: Failed for
// good, as a deleted pod.
func viewBinding(last v1alpha1.SandboxBindingStatus, pod *corev1.Pod, port int32, suspended, claimGone bool) sandboxView {
	if last.Phase == v1alpha1.SandboxFailed {
		// Failed for good: neither a suspension nor a resumption brings it back.
		if prev := meta.FindStatusCondition(last.Conditions, v1alpha1.ConditionReady); prev != nil && prev.Reason == v1alpha1.ReasonClaimGone {
			return sandboxView{Phase: v1alpha1.SandboxFailed, ExternalID: last.ExternalID, Ready: metav1.ConditionFalse, Reason: prev.Reason, Message: prev.Message}
		}
		return viewSandbox(last, pod, port)
	}
	switch {
	case claimGone:
		return sandboxView{Phase: v1alpha1.SandboxFailed, ExternalID: last.ExternalID, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonClaimGone,
			Message: "the workspace claim was deleted behind the controller's back; its workspace is lost and it is not recreated: delete the binding"}
	case suspended && pod != nil:
		return sandboxView{Phase: v1alpha1.SandboxSuspended, ExternalID: last.ExternalID, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonSuspended,
			Message: "suspending: the sandbox pod is being deleted; its workspace claim is kept"}
	case suspended:
		return sandboxView{Phase: v1alpha1.SandboxSuspended, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonSuspended,
			Message: "suspended: the sandbox pod is deleted and its workspace claim kept; unsuspending makes a new pod on it"}
	case last.Phase != v1alpha1.SandboxSuspended:
		return viewSandbox(last, pod, port)
	case pod == nil || pod.DeletionTimestamp != nil:
		return sandboxView{Phase: v1alpha1.SandboxSuspended, Ready: metav1.ConditionFalse, Reason: v1alpha1.ReasonResuming,
			Message: "resuming: waiting for the suspended pod to be gone and a new one made on the workspace claim"}
	}
	// The pod made on resuming: its UID becomes the binding's.
	return viewSandbox(v1alpha1.SandboxBindingStatus{}, pod, port)
}

// applyView writes v into status, keeping the condition's transition time when it did not
// change (meta.SetStatusCondition).
func applyView(st *v1alpha1.SandboxBindingStatus, v sandboxView, generation int64) {
	st.Phase, st.Endpoint, st.ExternalID = v.Phase, v.Endpoint, v.ExternalID
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: v.Ready,
		Reason: v.Reason, Message: v.Message, ObservedGeneration: generation})
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waiting is the first container (init containers first) waiting for a reason other than
// the routine ContainerCreating and PodInitializing.
func waiting(pod *corev1.Pod) (reason, message string, ok bool) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return w.Reason, fmt.Sprintf("container %s: %s", cs.Name, w.Message), true
			}
		}
	}
	return "", "", false
}

func terminated(pod *corev1.Pod) (reason, message string, ok bool) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return cmp.Or(t.Reason, "Error"), fmt.Sprintf("container %s exited with %d %s", cs.Name, t.ExitCode, t.Message), true
			}
		}
	}
	return "", "", false
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}
