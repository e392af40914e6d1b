package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AgentModel is the model an agent calls: the REST body's `model`.
type AgentModel struct {
	// ID is the model id, for example claude-sonnet-4-5 (`model.id`). With the server's fake
	// model (the offline default) any id is accepted.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	ID string `json:"id"`

	// Effort is the reasoning effort (`model.effort`), for example low, medium or high.
	// Omitted means the model's default. Changing only the effort makes a new agent version.
	// +optional
	Effort string `json:"effort,omitempty"`

	// Speed is the model's speed setting (`model.speed`), for example standard or fast.
	// Omitted means standard.
	// +optional
	Speed string `json:"speed,omitempty"`

	// InferenceGeo pins where inference runs (`model.inference_geo`); omitted means
	// anywhere.
	// +optional
	InferenceGeo *string `json:"inferenceGeo,omitempty"`
}

// AgentSkill references a skill: an entry of the REST body's `skills`.
type AgentSkill struct {
	// Type is the skill's kind: anthropic or custom (`type`).
	// +kubebuilder:validation:Enum=anthropic;custom
	// +required
	Type string `json:"type"`
	// SkillID is the skill's id (`skill_id`).
	// +kubebuilder:validation:MinLength=1
	// +required
	SkillID string `json:"skillID"`
	// Version pins a version of the skill (`version`); omitted means the latest at the time
	// the agent version is written.
	// +optional
	Version *string `json:"version,omitempty"`
}

// AgentExecutionIdentity is the principal the agent's runs carry: the REST body's
// `execution_identity`.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'aws_role' || !has(self.roleARN)",message="roleARN is only allowed with type aws_role"
type AgentExecutionIdentity struct {
	// Type is service_account (the deployment's own identity) or aws_role (RoleARN).
	// +kubebuilder:validation:Enum=service_account;aws_role
	// +required
	Type string `json:"type"`
	// RoleARN is the IAM role (arn:aws:iam::<account>:role/<name>) of type aws_role
	// (`role_arn`).
	// +optional
	RoleARN string `json:"roleARN,omitempty"`
}

// AgentSpec is the body of POST /v1/agents, field by field (camelCase here, snake_case in
// the API). The controller creates the agent from it; every later change of the spec
// (metadata.generation) is sent as an update that makes the agent match the spec, and the
// API writes a new agent version when anything changed. Sessions created earlier keep the
// version they were created with.
type AgentSpec struct {
	// Name is the agent's name (`name`), 1 to 256 characters. Omitted means the resource's
	// metadata.name.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Name string `json:"name,omitempty"`

	// Description (`description`), at most 2048 characters. Omitted or empty clears it on
	// the next version.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Description string `json:"description,omitempty"`

	// Model the agent calls (`model`). Required.
	// +required
	Model AgentModel `json:"model"`

	// System is the system prompt (`system`), at most 100,000 characters. Omitted or empty
	// means none.
	// +kubebuilder:validation:MaxLength=100000
	// +optional
	System string `json:"system,omitempty"`

	// Tools are the agent's tools, each exactly an entry of the REST body's `tools` in the
	// API's own JSON (snake_case keys): a built-in toolset such as
	// {"type": "agent_toolset_20260401"}, a custom tool {"type": "custom", "name", "description",
	// "input_schema"}, or an MCP toolset {"type": "mcp_toolset", "mcp_server_name"}. They are
	// passed through unchanged and validated by the API; a spec the API refuses leaves the
	// agent as it was and sets Ready=False with the API's message. Omitted means no tools.
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Tools []runtime.RawExtension `json:"tools,omitempty"`

	// MCPServers are the MCP servers the agent's mcp_toolset entries name, each exactly an
	// entry of the REST body's `mcp_servers` ({"type": "url", "name", "url"}). Every server
	// must be used by a toolset and every toolset must name a server.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	MCPServers []runtime.RawExtension `json:"mcpServers,omitempty"`

	// Skills the agent may load (`skills`), at most 20; skills need the read tool.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Skills []AgentSkill `json:"skills,omitempty"`

	// ExecutionIdentity is the principal the agent's runs carry (`execution_identity`);
	// omitted means service_account. Removing it from the spec resets it to service_account
	// on the next version.
	// +optional
	ExecutionIdentity *AgentExecutionIdentity `json:"executionIdentity,omitempty"`

	// Metadata is the agent's metadata (`metadata`): at most 15 pairs here (the API allows
	// 16 and the controller adds managed-agents.io/kubernetes-uid, its ownership mark), keys
	// of 1 to 64 characters, values of at most 512. A key removed from the spec is removed
	// from the agent on the next version.
	// +kubebuilder:validation:MaxProperties=15
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// AgentStatus is what the controller last saw of the agent.
type AgentStatus struct {
	// ID is the API agent's id (agent_...), set once the agent is created; Sessions naming
	// this Agent use it.
	// +optional
	ID string `json:"id,omitempty"`

	// Version is the agent's latest version: 1 after the create, one more after each spec
	// change that changed the agent.
	// +optional
	Version int64 `json:"version,omitempty"`

	// WorkspaceID is the API workspace the agent lives in (the namespace's workspace).
	// +optional
	WorkspaceID string `json:"workspaceID,omitempty"`

	// ObservedGeneration is the metadata.generation the agent matches.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True when the agent exists and matches the spec of
	// observedGeneration; False with the API's message when the API refused the spec.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Agent declares an agent of the Managed Agents API: a versioned model, system prompt and
// set of tools. Deleting the resource archives the agent (the API keeps archived agents so
// the sessions that used it stay readable).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mag
// +kubebuilder:printcolumn:name="Agent ID",type=string,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="Version",type=integer,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model.id`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Agent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentSpec `json:"spec"`
	// +optional
	Status AgentStatus `json:"status,omitempty"`
}

// AgentList is a list of Agents.
//
// +kubebuilder:object:root=true
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Agent `json:"items"`
}
