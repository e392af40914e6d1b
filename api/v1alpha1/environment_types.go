package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnvironmentNetworking is the sandbox's network policy: the REST body's
// `config.networking`.
type EnvironmentNetworking struct {
	// Type is unrestricted (any outbound traffic) or limited (only AllowedHosts, plus MCP
	// servers and package registries when allowed). Default unrestricted.
	// +kubebuilder:validation:Enum=unrestricted;limited
	// +kubebuilder:default=unrestricted
	// +optional
	Type string `json:"type,omitempty"`
	// AllowedHosts are the hosts a limited sandbox may reach (`allowed_hosts`): names such
	// as api.example.com or *.example.com. Only with type limited.
	// +kubebuilder:validation:MaxItems=256
	// +optional
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// AllowMCPServers lets a limited sandbox reach the agent's MCP servers
	// (`allow_mcp_servers`). Only with type limited; default false.
	// +optional
	AllowMCPServers *bool `json:"allowMCPServers,omitempty"`
	// AllowPackageManagers lets a limited sandbox reach the package registries
	// (`allow_package_managers`); needed to install Packages under limited networking. Only
	// with type limited; default false.
	// +optional
	AllowPackageManagers *bool `json:"allowPackageManagers,omitempty"`
}

// EnvironmentPackages are packages installed into every sandbox of the environment, per
// package manager: the REST body's `config.packages`. At most 100 entries per manager, each
// a package spec of at most 512 characters (a name, optionally with a version constraint).
type EnvironmentPackages struct {
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Apt []string `json:"apt,omitempty"`
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Cargo []string `json:"cargo,omitempty"`
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Gem []string `json:"gem,omitempty"`
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Go []string `json:"go,omitempty"`
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Npm []string `json:"npm,omitempty"`
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Pip []string `json:"pip,omitempty"`
}

// EnvironmentConfig is where and how the environment's sandboxes run: the REST body's
// `config`.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'cloud' || (!has(self.networking) && !has(self.packages))",message="a self_hosted config has no networking or packages"
type EnvironmentConfig struct {
	// Type is cloud (this server runs the sandboxes with its configured provider) or
	// self_hosted (the client runs the tools and sends their results). It cannot change
	// after the environment is created (the API refuses it). Default cloud.
	// +kubebuilder:validation:Enum=cloud;self_hosted
	// +kubebuilder:default=cloud
	// +optional
	Type string `json:"type,omitempty"`
	// Networking of the sandboxes; omitted means unrestricted.
	// +optional
	Networking *EnvironmentNetworking `json:"networking,omitempty"`
	// Packages installed into each sandbox before its first tool call; omitted means none.
	// +optional
	Packages *EnvironmentPackages `json:"packages,omitempty"`
}

// EnvironmentSpec is the body of POST /v1/environments. The controller creates the
// environment from it and sends every later change of the spec as an update, so the
// environment matches the spec; sessions already running keep the sandbox they have.
type EnvironmentSpec struct {
	// Name is the environment's name (`name`), unique in the workspace, 1 to 256
	// characters. Omitted means the resource's metadata.name. When another environment of
	// the workspace (one made through the REST API, for example) already has the name, the
	// create is refused and Ready is False with reason Conflict.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Name string `json:"name,omitempty"`

	// Description (`description`), at most 2048 characters.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Description string `json:"description,omitempty"`

	// Config is the sandbox configuration (`config`); omitted means cloud with
	// unrestricted networking and no packages.
	// +optional
	Config *EnvironmentConfig `json:"config,omitempty"`

	// Metadata is the environment's metadata (`metadata`): at most 15 pairs here (the
	// controller adds managed-agents.io/kubernetes-uid, its ownership mark). A key removed
	// from the spec is removed from the environment.
	// +kubebuilder:validation:MaxProperties=15
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// EnvironmentStatus is what the controller last saw of the environment.
type EnvironmentStatus struct {
	// ID is the API environment's id (env_...), set once it is created; Sessions naming this
	// Environment use it.
	// +optional
	ID string `json:"id,omitempty"`
	// WorkspaceID is the API workspace the environment lives in (the namespace's workspace).
	// +optional
	WorkspaceID string `json:"workspaceID,omitempty"`
	// ObservedGeneration is the metadata.generation the environment matches.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when the environment exists and matches the spec of
	// observedGeneration.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Environment declares an environment of the Managed Agents API: where a session's
// sandbox runs and what it may reach. Deleting the resource deletes the environment, or
// archives it when sessions still use it (the API refuses to delete an environment in use;
// archived, it takes no new sessions).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=maenv
// +kubebuilder:printcolumn:name="Environment ID",type=string,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.config.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Environment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec EnvironmentSpec `json:"spec,omitempty"`
	// +optional
	Status EnvironmentStatus `json:"status,omitempty"`
}

// EnvironmentList is a list of Environments.
//
// +kubebuilder:object:root=true
type EnvironmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Environment `json:"items"`
}
