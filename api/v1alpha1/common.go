package v1alpha1

// Condition types the controllers set (metav1.Condition.Type). Every kind has Ready; a
// Session has the others too.
const (
	// ConditionReady: the resource's API object exists and matches the spec. For a Session it
	// means more: the session is idle and waits for the next message.
	ConditionReady = "Ready"
	// ConditionRunning: a Session's turn is in progress (running or rescheduling).
	ConditionRunning = "Running"
	// ConditionRequiresAction: a Session waits for a client to confirm a tool call or to send
	// a custom tool's result before it can go on.
	ConditionRequiresAction = "RequiresAction"
	// ConditionFailed: a Session cannot go on: it is terminated, its model retries were
	// exhausted, or the API refused to create it.
	ConditionFailed = "Failed"
)

// Finalizer is the finalizer every kind carries while it owns an API object: deleting the
// resource first deletes (or archives) that object.
const Finalizer = "agents.managed-agents.io/finalizer"

// OwnerMetadataKey is the metadata key the controllers write into every agent and
// environment they create through the API, with the resource's UID as the value. It records
// ownership in the API object itself: the controller only ever updates, archives or deletes
// API objects that carry its resource's UID, and after a crash between the create and the
// status write it finds the object it created by this key instead of creating a second one.
const OwnerMetadataKey = "managed-agents.io/kubernetes-uid"

// LocalObjectReference names an object of the same namespace.
type LocalObjectReference struct {
	// Name of the object in the Session's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}
