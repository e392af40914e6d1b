package wire

import "encoding/json"

// EnvironmentCreateParams is the body of POST /v1/environments.
type EnvironmentCreateParams struct {
	Name        string                  `json:"name"`
	Description *string                 `json:"description"`
	Config      *EnvironmentConfigParam `json:"config"`
	Scope       *string                 `json:"scope"`
	Metadata    MetadataParam           `json:"metadata"`
}

// EnvironmentUpdateParams is the body of POST /v1/environments/{id}.
type EnvironmentUpdateParams struct {
	Name        Nullable[string]                 `json:"name"`
	Description Nullable[string]                 `json:"description"`
	Config      Nullable[EnvironmentConfigParam] `json:"config"`
	Scope       Nullable[string]                 `json:"scope"`
	Metadata    MetadataPatch                    `json:"metadata"`
}

// EnvironmentConfigParam is the config union as sent (cloud or self_hosted).
type EnvironmentConfigParam struct {
	Type       string           `json:"type"`
	Networking *NetworkingParam `json:"networking"`
	Packages   *PackagesParam   `json:"packages"`
}

// UnmarshalJSON rejects unknown fields.
func (c *EnvironmentConfigParam) UnmarshalJSON(b []byte) error {
	type plain EnvironmentConfigParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("config", err)
	}
	*c = EnvironmentConfigParam(p)
	return nil
}

// NetworkingParam is unrestricted or limited networking as sent.
type NetworkingParam struct {
	Type                 string   `json:"type"`
	AllowedHosts         []string `json:"allowed_hosts"`
	AllowMCPServers      *bool    `json:"allow_mcp_servers"`
	AllowPackageManagers *bool    `json:"allow_package_managers"`
}

// UnmarshalJSON rejects unknown fields.
func (n *NetworkingParam) UnmarshalJSON(b []byte) error {
	type plain NetworkingParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("networking", err)
	}
	*n = NetworkingParam(p)
	return nil
}

// PackagesParam lists packages per manager as sent.
type PackagesParam struct {
	Type  *string  `json:"type"`
	Apt   []string `json:"apt"`
	Cargo []string `json:"cargo"`
	Gem   []string `json:"gem"`
	Go    []string `json:"go"`
	Npm   []string `json:"npm"`
	Pip   []string `json:"pip"`
}

// UnmarshalJSON rejects unknown fields.
func (p *PackagesParam) UnmarshalJSON(b []byte) error {
	type plain PackagesParam
	var v plain
	if err := DecodeStrict(b, &v); err != nil {
		return prefixErr("packages", err)
	}
	*p = PackagesParam(v)
	return nil
}

// EnvironmentConfig is the resolved config: cloud with every key present, or exactly
// {"type":"self_hosted"}.
type EnvironmentConfig struct {
	Type       string      `json:"type"`
	Networking *Networking `json:"networking,omitempty"`
	Packages   *Packages   `json:"packages,omitempty"`
}

// Networking is the resolved networking policy; the limited-only keys are absent when
// unrestricted.
type Networking struct {
	Type                 string   `json:"type"`
	AllowedHosts         []string `json:"allowed_hosts,omitempty"`
	AllowMCPServers      *bool    `json:"allow_mcp_servers,omitempty"`
	AllowPackageManagers *bool    `json:"allow_package_managers,omitempty"`
}

// MarshalJSON keeps allowed_hosts present (possibly empty) for limited networking.
func (n Networking) MarshalJSON() ([]byte, error) {
	if n.Type != "limited" {
		return json.Marshal(struct {
			Type string `json:"type"`
		}{n.Type})
	}
	hosts := n.AllowedHosts
	if hosts == nil {
		hosts = []string{}
	}
	return json.Marshal(struct {
		Type                 string   `json:"type"`
		AllowedHosts         []string `json:"allowed_hosts"`
		AllowMCPServers      bool     `json:"allow_mcp_servers"`
		AllowPackageManagers bool     `json:"allow_package_managers"`
	}{n.Type, hosts, deref(n.AllowMCPServers), deref(n.AllowPackageManagers)})
}

// Packages is the resolved package list: every manager key present.
type Packages struct {
	Type  string   `json:"type"`
	Apt   []string `json:"apt"`
	Cargo []string `json:"cargo"`
	Gem   []string `json:"gem"`
	Go    []string `json:"go"`
	Npm   []string `json:"npm"`
	Pip   []string `json:"pip"`
}

// Environment is the environment resource.
type Environment struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	Config      EnvironmentConfig `json:"config"`
	Scope       string            `json:"scope"`
	Metadata    Metadata          `json:"metadata"`
	CreatedAt   Time              `json:"created_at"`
	UpdatedAt   Time              `json:"updated_at"`
	ArchivedAt  *Time             `json:"archived_at"`
}

func deref(b *bool) bool { return b != nil && *b }
