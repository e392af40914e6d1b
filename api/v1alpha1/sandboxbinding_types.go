package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxBindingSpec is the template of one session's sandbox pod on the kubernetes
// sandbox provider. The provider (the worker) writes it when a session first needs a
// sandbox; the SandboxBinding controller runs the pod from it, with sandboxd injected into
// Image by an init container, so any image works.
//
// NOTE: the spec is fixed once the pod exists (the controller never restarts a sandbox to
// apply a change: that would lose its workspace). A field added here must also be rendered
// by controllers/sandboxbinding_pod.go and written by internal/sandbox/kubernetes. The one
// field that changes is Suspended: a persistent workspace outlives its pod.
//
// +kubebuilder:validation:XValidation:rule="has(self.workspace) == has(oldSelf.workspace) && (!has(self.workspace) || self.workspace == oldSelf.workspace)",message="workspace cannot change"
// +kubebuilder:validation:XValidation:rule="!has(self.suspended) || !self.suspended || (has(self.workspace) && has(self.workspace.persistent) && self.workspace.persistent)",message="only a binding with a persistent workspace can be suspended: suspending deletes the pod, and an emptyDir workspace with it"
type SandboxBindingSpec struct {
	// SessionID is the API session the sandbox belongs to (sesn_...). It cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sessionID cannot change"
	// +required
	SessionID string `json:"sessionID"`

	// Provider runs the sandbox: pod (the default) makes a sandbox pod; a remote provider
	// (e2b, cubesandbox, opensandbox, daytona) has the controller create the sandbox there,
	// through the same client the worker uses, and record its id in status.externalID. The
	// controller must be configured for that provider (MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS).
	// It cannot change.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,31}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provider cannot change"
	// +kubebuilder:default=pod
	// +optional
	Provider string `json:"provider,omitempty"`

	// Image of the sandbox container: any image with the libraries a static binary needs
	// (none) and bash, which commands run in. sandboxd is copied into it at start from the
	// controller's image (MANAGED_AGENT_SANDBOXD_IMAGE) through a shared volume. For a remote
	// provider it is the provider's template or image.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// Port sandboxd listens on in the pod, and the port of the endpoint in status.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8090
	// +optional
	Port int32 `json:"port,omitempty"`

	// Network is the egress the sandbox gets: the deployment's ceiling already resolved
	// against the environment's networking by the worker. The controller enforces it with a
	// NetworkPolicy (ingress is always only from the worker pods to Port).
	// +optional
	Network SandboxNetwork `json:"network,omitempty"`

	// WorkspaceSize bounds the /workspace emptyDir (its sizeLimit), or with a persistent
	// Workspace is the storage its claim requests; omitted means the controller's default
	// (10Gi). Exceeding an emptyDir's limit evicts the pod, which fails the sandbox; a full
	// claim makes writes fail with "no space left on device".
	// +optional
	WorkspaceSize *resource.Quantity `json:"workspaceSize,omitempty"`

	// Workspace says where /workspace lives: an emptyDir of the pod (the default), or a
	// PersistentVolumeClaim of the binding that outlives the pod, so the binding can be
	// suspended. It cannot change.
	// +optional
	Workspace SandboxWorkspace `json:"workspace,omitempty"`

	// Suspended, on a binding with a persistent workspace, deletes its pod and keeps the
	// claim (phase Suspended); set back to false, the controller makes a new pod on the same
	// claim, with the same token. The worker suspends bindings idle longer than
	// MANAGED_AGENT_SANDBOX_IDLE_STOP and resumes them on the next acquisition.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

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

// SandboxWorkspace is where a sandbox's /workspace lives.
type SandboxWorkspace struct {
	// Persistent puts /workspace on a PersistentVolumeClaim (ReadWriteOnce, WorkspaceSize)
	// named <binding>-workspace and owned by the binding, instead of an emptyDir: it survives
	// a suspension, and is deleted with the binding.
	// +optional
	Persistent bool `json:"persistent,omitempty"`
	// StorageClassName of the claim; omitted means the cluster's default StorageClass.
	// Persistent only.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// Egress modes of a SandboxNetwork (the worker's sandbox.Egress modes).
const (
	// EgressNone: no egress at all (the default).
	EgressNone = "None"
	// EgressHosts: egress only to the allowlisting egress proxy's pods (NetworkPolicies cannot
	// name hosts); the proxy decides per host.
	EgressHosts = "Hosts"
	// EgressFull: any egress.
	EgressFull = "Full"
)

// SandboxNetwork is a sandbox's egress.
type SandboxNetwork struct {
	// Egress is None, Hosts or Full; omitted means None.
	// +kubebuilder:validation:Enum=None;Hosts;Full
	// +optional
	Egress string `json:"egress,omitempty"`
	// Hosts are the host patterns the egress proxy lets through (Hosts only), for the record:
	// the NetworkPolicy can only send the pod to the proxy.
	// +optional
	Hosts []string `json:"hosts,omitempty"`
}

// Phases of a SandboxBinding.
const (
	// SandboxPending: the pod is being made, scheduled or started.
	SandboxPending = "Pending"
	// SandboxRunning: the pod runs (Ready says whether sandboxd answers).
	SandboxRunning = "Running"
	// SandboxStopped: the pod's containers ended (the sandbox cannot serve again).
	SandboxStopped = "Stopped"
	// SandboxFailed: the sandbox cannot serve again: its pod failed, or was deleted or evicted
	// behind the controller's back. The controller never makes a second pod for a binding (its
	// workspace would be empty, silently): the worker sees the sandbox gone, and deleting the
	// binding is the only way on.
	SandboxFailed = "Failed"
	// SandboxSuspended: the binding is suspended (spec.suspended), or resuming: its pod is
	// deleted, or being deleted or made again, and its workspace claim kept. The one case of a
	// second pod for a binding: it mounts the same claim.
	SandboxSuspended = "Suspended"
)

// Reasons of a SandboxBinding's Ready condition besides the pod's own waiting reasons.
const (
	ReasonSandboxReady    = "SandboxdReady"
	ReasonRemoteReady     = "RemoteSandboxReady"
	ReasonRemoteCreating  = "RemoteSandboxCreating"
	ReasonRemoteGone      = "RemoteSandboxGone"
	ReasonPodCreating     = "PodCreating"
	ReasonPodStarting     = "PodStarting"
	ReasonPodGone         = "PodGone"
	ReasonPodFailed       = "PodFailed"
	ReasonPodStopped      = "PodStopped"
	ReasonNotConfigured   = "NotConfigured"
	ReasonReconcileFailed = "ReconcileFailed"
	ReasonSuspended       = "Suspended"
	ReasonResuming        = "Resuming"
	// ReasonClaimGone: the workspace claim of a binding that had a pod is missing or being
	// deleted behind the controller's back. Like PodGone, sticky: a new claim would be empty.
	ReasonClaimGone = "ClaimGone"
)

// SandboxBindingStatus is the sandbox pod as last observed.
type SandboxBindingStatus struct {
	// Phase is Pending, Running, Stopped, Failed or Suspended.
	// +kubebuilder:validation:Enum=Pending;Running;Stopped;Failed;Suspended
	// +optional
	Phase string `json:"phase,omitempty"`
	// Endpoint is the sandboxd URL the worker reaches the sandbox at, once it runs; for a
	// remote provider, <provider>://<external id> (the worker attaches through its own client).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ExternalID is the provider's id of the sandbox (the pod's UID, or the remote
	// provider's sandbox id). Once set, a missing pod is one deleted behind the controller's
	// back (the binding becomes Failed), never one to create. It is cleared while the binding
	// is Suspended, and the resumed pod's UID replaces it.
	// +optional
	ExternalID string `json:"externalID,omitempty"`
	// PodName is the sandbox pod: the binding's name, or a claimed warm pool pod's.
	// +optional
	PodName string `json:"podName,omitempty"`
	// TokenSecret names the Secret (key "token") holding sandboxd's per-sandbox token, which
	// the worker sends on every call. The binding owns it.
	// +optional
	TokenSecret string `json:"tokenSecret,omitempty"`
	// WorkspaceClaim names the PersistentVolumeClaim of a persistent workspace. The binding
	// owns it.
	// +optional
	WorkspaceClaim string `json:"workspaceClaim,omitempty"`
	// WarmPool is the SandboxWarmPool whose started pod the binding claimed (PodName, and
	// TokenSecret its Secret, both now owned by the binding); empty when the controller made
	// the pod for the binding.
	// +optional
	WarmPool string `json:"warmPool,omitempty"`
	// Substrate is what the pod is made through, fixed when the binding's pod is chosen (the
	// controller's MANAGED_AGENT_SANDBOX_SUBSTRATE then): pods, the controller creates it
	// (empty means the same: bindings older than this field); agent-sandbox, a
	// kubernetes-sigs/agent-sandbox Sandbox named as the binding makes it, or, with WarmPool,
	// a SandboxClaim of that name on the pool's agent-sandbox SandboxWarmPool. A deployment
	// that changes substrate keeps serving and deleting its bindings each the way it began.
	// +kubebuilder:validation:Enum=pods;agent-sandbox
	// +optional
	Substrate string `json:"substrate,omitempty"`
	// Conditions of the sandbox (Ready once the daemon answers).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxBinding binds one session's sandbox to a pod: the worker's kubernetes sandbox
// provider creates it (named after the session, so a retried create adopts it), the
// controller runs the pod, its token Secret and its NetworkPolicy, and publishes the
// endpoint; deleting it deletes them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Session ID",type=string,JSONPath=`.spec.sessionID`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspended`,priority=1
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

// ProviderPod is SandboxBindingSpec.Provider's default: a sandbox pod.
const ProviderPod = "pod"

// IsRemote says whether the binding's sandbox lives at a remote provider, not in a pod.
func (s *SandboxBindingSpec) IsRemote() bool { return IsRemoteProvider(s.Provider) }

// IsRemoteProvider says whether a binding's provider name ("" is the default, pod) names a
// remote provider.
func IsRemoteProvider(name string) bool { return name != "" && name != ProviderPod }

// Labels and keys the SandboxBinding controller and the kubernetes provider share.
const (
	// LabelSessionID is on every SandboxBinding and on everything made for it: the session
	// the sandbox belongs to, so orphans can be found by session.
	LabelSessionID = "agents.managed-agents.io/session-id"
	// LabelSandboxBinding is on the pod, Secret, NetworkPolicy and claim of a binding: its
	// name.
	LabelSandboxBinding = "agents.managed-agents.io/sandbox-binding"
	// AnnotationPackages is on a binding whose environment installs packages: them, as JSON
	// (manager → packages), so a resumed pod gets them again.
	AnnotationPackages = "agents.managed-agents.io/packages"
	// TokenSecretKey is the key of the token in the binding's Secret.
	TokenSecretKey = "token"
	// ProxyURLSecretKey is, for a binding in Hosts egress, the key of the egress proxy's URL
	// in the binding's Secret: http://user:password@ip:port, the credentials signing the
	// binding's hosts (the pod's HTTP_PROXY and HTTPS_PROXY).
	ProxyURLSecretKey = "proxy-url"
)
