package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SessionSpec says which agent works in which environment. The agent, the environment and
// the initial message fix what the session is: they cannot change once set (the apiserver
// refuses the update); title and metadata may change at any time and are sent to the session
// as an update.
//
// +kubebuilder:validation:XValidation:rule="has(self.agentRef) != has(self.agentID)",message="set exactly one of agentRef and agentID"
// +kubebuilder:validation:XValidation:rule="has(self.environmentRef) != has(self.environmentID)",message="set exactly one of environmentRef and environmentID"
// +kubebuilder:validation:XValidation:rule="has(self.agentRef) == has(oldSelf.agentRef) && (!has(self.agentRef) || self.agentRef == oldSelf.agentRef) && has(self.agentID) == has(oldSelf.agentID) && (!has(self.agentID) || self.agentID == oldSelf.agentID)",message="the agent of a session cannot change; create a new Session"
// +kubebuilder:validation:XValidation:rule="has(self.agentVersion) == has(oldSelf.agentVersion) && (!has(self.agentVersion) || self.agentVersion == oldSelf.agentVersion)",message="agentVersion cannot change; create a new Session"
// +kubebuilder:validation:XValidation:rule="has(self.environmentRef) == has(oldSelf.environmentRef) && (!has(self.environmentRef) || self.environmentRef == oldSelf.environmentRef) && has(self.environmentID) == has(oldSelf.environmentID) && (!has(self.environmentID) || self.environmentID == oldSelf.environmentID)",message="the environment of a session cannot change; create a new Session"
// +kubebuilder:validation:XValidation:rule="has(self.initialMessage) == has(oldSelf.initialMessage) && (!has(self.initialMessage) || self.initialMessage == oldSelf.initialMessage)",message="initialMessage cannot change; send further messages through the REST API"
type SessionSpec struct {
	// AgentRef names an Agent resource in the Session's namespace; the session uses the API
	// agent that resource created (status.id). Until that Agent exists and has an id, the
	// Session waits: Ready is False with reason AgentNotFound, an event says why, and the
	// controller retries with backoff (and at once when the Agent changes). Exactly one of
	// agentRef and agentID is set.
	// +optional
	AgentRef *LocalObjectReference `json:"agentRef,omitempty"`

	// AgentID names an agent of the API directly (agent_...), for example one created
	// through the REST API. It must be in the namespace's workspace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +optional
	AgentID string `json:"agentID,omitempty"`

	// AgentVersion pins the agent version the session runs with; omitted means the agent's
	// latest version when the session is created. Later agent versions never change an
	// existing session.
	// +kubebuilder:validation:Minimum=1
	// +optional
	AgentVersion *int64 `json:"agentVersion,omitempty"`

	// EnvironmentRef names an Environment resource in the Session's namespace; like
	// agentRef, the Session waits (reason EnvironmentNotFound) until it has an id. Exactly
	// one of environmentRef and environmentID is set.
	// +optional
	EnvironmentRef *LocalObjectReference `json:"environmentRef,omitempty"`

	// EnvironmentID names an environment of the API directly (env_...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +optional
	EnvironmentID string `json:"environmentID,omitempty"`

	// Title of the session (`title`), at most 512 characters. A change is sent to the
	// session (it appends a session.updated event); removing it clears the title.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Title string `json:"title,omitempty"`

	// Metadata of the session (`metadata`): at most 16 pairs, keys of 1 to 64 characters,
	// values of at most 512. A change is sent to the session; keys removed from the spec are
	// removed from the session.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`

	// InitialMessage, if set, is sent as the session's first user.message, in the same
	// transaction that creates the session (the API's initial_events), so it is sent exactly
	// once however often the create is retried, and the session starts running at once.
	// Further messages go through the REST API (POST /v1/sessions/{id}/events).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100000
	// +optional
	InitialMessage string `json:"initialMessage,omitempty"`
}

// SessionUsage is the session's cumulative token usage.
type SessionUsage struct {
	// InputTokens the model read, uncached.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens the model wrote.
	OutputTokens int64 `json:"outputTokens"`
	// CacheReadInputTokens the model read from the prompt cache.
	CacheReadInputTokens int64 `json:"cacheReadInputTokens"`
	// CacheCreationInputTokens the model wrote to the prompt cache (5 minute and 1 hour
	// lifetimes together).
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
}

// SessionStatus mirrors the API session, from its log's typed status events; the
// controller updates it whenever the session's log grows (it listens for committed events,
// it does not poll) and, as a backstop, every few minutes.
type SessionStatus struct {
	// SessionID is the API session's id (sesn_...), set once the session is created. The
	// create is idempotent on the resource's UID, so a controller that crashed after the
	// create finds the same session, never a second one.
	// +optional
	SessionID string `json:"sessionID,omitempty"`

	// WorkspaceID is the API workspace the session lives in (the namespace's workspace); a
	// REST client needs a key of this workspace to see the session.
	// +optional
	WorkspaceID string `json:"workspaceID,omitempty"`

	// AgentID and AgentVersion are the agent version the session runs with.
	// +optional
	AgentID string `json:"agentID,omitempty"`
	// +optional
	AgentVersion int64 `json:"agentVersion,omitempty"`
	// EnvironmentID is the environment the session's sandbox follows.
	// +optional
	EnvironmentID string `json:"environmentID,omitempty"`

	// Status is the session's status: idle, running, rescheduling or terminated.
	// +optional
	Status string `json:"status,omitempty"`

	// StopReason is why the last turn stopped (the last session.status_idle's stop_reason):
	// end_turn, requires_action or retries_exhausted.
	// +optional
	StopReason string `json:"stopReason,omitempty"`

	// RequiredActionEventIDs are the events a requires_action stop waits on (tool uses to
	// confirm, custom tool uses to answer).
	// +optional
	RequiredActionEventIDs []string `json:"requiredActionEventIDs,omitempty"`

	// LastAgentMessage is the text of the last agent.message, cut to 256 characters.
	// +optional
	LastAgentMessage string `json:"lastAgentMessage,omitempty"`

	// LastError is the message of the last session.error, cut to 256 characters, while the
	// session has not run a turn successfully since.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// LastEventID and LastEventTime are the newest event of the session's log.
	// +optional
	LastEventID string `json:"lastEventID,omitempty"`
	// +optional
	LastEventTime *metav1.Time `json:"lastEventTime,omitempty"`

	// Usage is the session's cumulative token usage.
	// +optional
	Usage *SessionUsage `json:"usage,omitempty"`

	// ObservedGeneration is the metadata.generation whose title and metadata the session
	// has.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the session exists and is idle: it waits for the next message;
	// reasons AgentNotFound, EnvironmentNotFound, Invalid, Pending, Running, Terminated,
	// Deleting when not), Running, RequiresAction and Failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Session is one session of the Managed Agents API: an agent working in an environment.
// Creating the resource creates the session (with the initial message, if any); the status
// follows the session as it runs; deleting the resource deletes the session, interrupting
// it first if a turn is running. Talk to the session through the REST API with its
// status.sessionID and a key of the namespace's workspace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=masess
// +kubebuilder:printcolumn:name="Session ID",type=string,JSONPath=`.status.sessionID`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Stop Reason",type=string,JSONPath=`.status.stopReason`
// +kubebuilder:printcolumn:name="Last Message",type=string,JSONPath=`.status.lastAgentMessage`,priority=0
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Session struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SessionSpec `json:"spec"`
	// +optional
	Status SessionStatus `json:"status,omitempty"`
}

// SessionList is a list of Sessions.
//
// +kubebuilder:object:root=true
type SessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Session `json:"items"`
}
