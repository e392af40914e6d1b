package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxWarmPoolSpec keeps Replicas sandbox pods of one template started and unclaimed, so
// a session's first acquisition adopts a running pod instead of waiting for one to be
// scheduled, pulled and started.
type SandboxWarmPoolSpec struct {
	// Replicas is the number of ready, unclaimed pods the pool keeps. A claim takes one out
	// of the pool and the controller starts a replacement; 0 keeps none (the pool's pods are
	// deleted).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +required
	Replicas int32 `json:"replicas"`

	// Template is the pod-relevant part of a SandboxBinding's spec. A binding claims a pool
	// pod only when the pod the controller would render for it is the one it rendered for
	// the pool: same image, port, resources, workspace size, runtime class, service account,
	// node selector, tolerations and env, and the same controller configuration (the
	// sandboxd image). The kubernetes provider writes bindings from the worker's
	// MANAGED_AGENT_KUBERNETES_* settings; a pool meant for them must repeat those values
	// (the Helm chart's sandbox.kubernetes.warmPool does).
	//
	// Env cannot be injected into a running pod: a binding with env claims only from a pool
	// whose template has exactly that env, so setting env per environment forces a cold
	// start. The network is not part of the match: the binding's NetworkPolicy applies to a
	// claimed pod the moment it is relabelled, and an unclaimed pool pod has no ingress and
	// no egress at all.
	//
	// Changing the template (or the controller's sandboxd image) replaces the pool's
	// unclaimed pods; claimed ones keep running as they are.
	// +required
	Template SandboxPodTemplate `json:"template"`
}

// SandboxPodTemplate is the pod-relevant part of a SandboxBindingSpec; every field means
// what the binding's field of the same name means.
//
// NOTE: a field added to SandboxBindingSpec that the controller renders into the pod needs
// no change here to stay safe: claiming compares rendered pods, so bindings that set it never
// match a pool. Add it here (and to ForBinding) only to let pools serve such bindings.
type SandboxPodTemplate struct {
	// Image of the sandbox container.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`
	// Port sandboxd listens on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8090
	// +optional
	Port int32 `json:"port,omitempty"`
	// WorkspaceSize bounds the /workspace emptyDir; omitted means the controller's default.
	// +optional
	WorkspaceSize *resource.Quantity `json:"workspaceSize,omitempty"`
	// Resources of the sandbox container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// RuntimeClassName, for example gvisor or kata.
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// Env of the sandbox container; only bindings with exactly this env claim.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// ServiceAccountName the pods run as.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// NodeSelector constrains the nodes the pods may run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// ForBinding is the binding spec whose pod t renders (no session, no network).
func (t SandboxPodTemplate) ForBinding() SandboxBindingSpec {
	return SandboxBindingSpec{
		Image:              t.Image,
		Port:               t.Port,
		WorkspaceSize:      t.WorkspaceSize,
		Resources:          t.Resources,
		RuntimeClassName:   t.RuntimeClassName,
		Env:                t.Env,
		ServiceAccountName: t.ServiceAccountName,
		NodeSelector:       t.NodeSelector,
		Tolerations:        t.Tolerations,
	}
}

// Reasons of a SandboxWarmPool's Ready condition (besides ReasonNotConfigured and
// ReasonReconcileFailed).
const (
	// ReasonPoolFilled: Replicas pods are ready to claim.
	ReasonPoolFilled = "Filled"
	// ReasonPoolFilling: fewer pods than Replicas are ready (starting, or waiting for a node or
	// an image: the message says which).
	ReasonPoolFilling = "Filling"
)

// SandboxWarmPoolStatus is the pool as last observed.
type SandboxWarmPoolStatus struct {
	// Replicas is the number of unclaimed pods of the current template (ready or not).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of those whose sandboxd answers: the pods a binding can
	// claim now.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// TemplateHash identifies the rendered pod of the current template; a binding whose
	// rendered pod hashes alike claims from this pool. Pool pods carry it as a label.
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`
	// Substrate is what keeps the pool's pods: pods (the controller; empty means the same) or
	// agent-sandbox (an agent-sandbox SandboxTemplate and SandboxWarmPool of the pool's name).
	// +kubebuilder:validation:Enum=pods;agent-sandbox
	// +optional
	Substrate string `json:"substrate,omitempty"`
	// Selector selects the pool's unclaimed pods (for the scale subresource and kubectl).
	// +optional
	Selector string `json:"selector,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions of the pool (Ready once Replicas pods are ready).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxWarmPool keeps started sandbox pods of one template for SandboxBindings to claim
// (docs/kubernetes.md, "Warm pool"). Its pods carry no session; a binding that claims one
// becomes its owner and relabels it, the pool starts another. Deleting the pool deletes its
// unclaimed pods; claimed ones belong to their bindings.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="a warm pool's name is at most 40 characters (its pods and their Secrets are named after it)"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
//
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}

// Labels and annotations of warm pool pods.
const (
	// LabelWarmPool is on a pool's unclaimed pods, their Secrets and the pool's
	// NetworkPolicy: the pool's name. A claim removes it from the pod.
	LabelWarmPool = "agents.managed-agents.io/sandbox-warm-pool"
	// LabelTemplateHash is on a pool's unclaimed pods: the hash of their rendered pod, which
	// a binding's must equal to claim one.
	LabelTemplateHash = "agents.managed-agents.io/sandbox-template-hash"
	// AnnotationClaimedFrom is on a claimed pod: the pool it came from.
	AnnotationClaimedFrom = "agents.managed-agents.io/claimed-from-warm-pool"
)
