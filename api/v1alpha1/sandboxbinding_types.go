package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxBindingSpec is the template of one session's sandbox pod on the kubernetes
// sandbox provider. The provider writes it when a session first needs a sandbox; the
// SandboxBinding controller (not built yet) runs the pod from it.
type SandboxBindingSpec struct {
	// SessionID is the API session the sandbox belongs to (sesn_...). It cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sessionID cannot change"
	// +required
	SessionID string `json:"sessionID"`

	// Image of the sandbox container; it must contain the sandboxd daemon (the default
	// sandbox image does).
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// Resources of the sandbox container (CPU, memory, ephemeral storage); omitted means the
	// namespace's defaults.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// RuntimeClassName selects a RuntimeClass for stronger isolation, for example gvisor or
	// kata; omitted means the cluster's default runtime.
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// Env are extra environment variables of the sandbox container (the environment's
	// configuration and the daemon's token are added by the controller).
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// ServiceAccountName the sandbox pod runs as; omitted means the namespace's default.
	// Give it no permissions: the agent's tools run in the pod.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// NodeSelector constrains the nodes the pod may run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the pod, for nodes tainted for sandboxes.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// SandboxBindingStatus is the sandbox pod as last observed.
type SandboxBindingStatus struct {
	// Phase is Pending, Running, Stopped or Failed.
	// +kubebuilder:validation:Enum=Pending;Running;Stopped;Failed
	// +optional
	Phase string `json:"phase,omitempty"`
	// Endpoint is the sandboxd URL the worker reaches the sandbox at, once it runs.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ExternalID is the provider's id of the sandbox (the pod's UID).
	// +optional
	ExternalID string `json:"externalID,omitempty"`
	// Conditions of the sandbox (Ready once the daemon answers).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxBinding binds one session's sandbox to a pod. Its controller arrives with the
// kubernetes sandbox provider; until then the kind exists so that clusters can install it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Session ID",type=string,JSONPath=`.spec.sessionID`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxBindingSpec `json:"spec"`
	// +optional
	Status SandboxBindingStatus `json:"status,omitempty"`
}

// SandboxBindingList is a list of SandboxBindings.
//
// +kubebuilder:object:root=true
type SandboxBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxBinding `json:"items"`
}
