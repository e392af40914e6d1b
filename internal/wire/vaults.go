package wire

import "encoding/json"

// VaultCreateParams is the body of POST /v1/vaults.
type VaultCreateParams struct {
	DisplayName string        `json:"display_name"`
	Metadata    MetadataParam `json:"metadata"`
}

// VaultUpdateParams is the body of POST /v1/vaults/{id}.
type VaultUpdateParams struct {
	DisplayName Nullable[string] `json:"display_name"`
	Metadata    MetadataPatch    `json:"metadata"`
}

// Vault is the vault resource (BetaManagedAgentsVault): every key present.
type Vault struct {
	ID          string   `json:"id"`
	Type        string   `json:"type"`
	DisplayName string   `json:"display_name"`
	Metadata    Metadata `json:"metadata"`
	CreatedAt   Time     `json:"created_at"`
	UpdatedAt   Time     `json:"updated_at"`
	ArchivedAt  *Time    `json:"archived_at"`
}

// Credential auth types.
const (
	AuthStaticBearer        = "static_bearer"
	AuthMCPOAuth            = "mcp_oauth"
	AuthEnvironmentVariable = "environment_variable"
)

// CredentialCreateParams is the body of POST /v1/vaults/{id}/credentials.
type CredentialCreateParams struct {
	Auth        *CredentialAuthParam `json:"auth"`
	DisplayName *string              `json:"display_name"`
	Metadata    MetadataParam        `json:"metadata"`
}

// CredentialUpdateParams is the body of POST /v1/vaults/{id}/credentials/{credential_id}.
type CredentialUpdateParams struct {
	Auth        *CredentialAuthParam `json:"auth"`
	DisplayName Nullable[string]     `json:"display_name"`
	Metadata    MetadataPatch        `json:"metadata"`
}

// CredentialAuthParam is the auth union as sent, every member's fields in one struct (create
// and update); the service checks which fields the type allows. Secret fields (Token,
// AccessToken, SecretValue, Refresh.RefreshToken, Refresh.TokenEndpointAuth.ClientSecret)
// are write-only.
type CredentialAuthParam struct {
	Type string `json:"type"`
	// static_bearer and mcp_oauth
	MCPServerURL *string `json:"mcp_server_url"`
	Token        *string `json:"token"`
	AccessToken  *string `json:"access_token"`
	// ExpiresAt is mcp_oauth's access token expiry, RFC 3339 (the service parses it).
	ExpiresAt *string       `json:"expires_at"`
	Refresh   *RefreshParam `json:"refresh"`
	// environment_variable
	SecretName        *string                    `json:"secret_name"`
	SecretValue       *string                    `json:"secret_value"`
	Networking        *CredentialNetworkingParam `json:"networking"`
	InjectionLocation *InjectionLocationParam    `json:"injection_location"`
}

// UnmarshalJSON rejects unknown fields.
func (a *CredentialAuthParam) UnmarshalJSON(b []byte) error {
	type plain CredentialAuthParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("auth", err)
	}
	*a = CredentialAuthParam(p)
	return nil
}

// RefreshParam is mcp_oauth's refresh configuration as sent.
type RefreshParam struct {
	ClientID          *string                 `json:"client_id"`
	RefreshToken      *string                 `json:"refresh_token"`
	TokenEndpoint     *string                 `json:"token_endpoint"`
	TokenEndpointAuth *TokenEndpointAuthParam `json:"token_endpoint_auth"`
	Resource          *string                 `json:"resource"`
	Scope             *string                 `json:"scope"`
}

// UnmarshalJSON rejects unknown fields.
func (r *RefreshParam) UnmarshalJSON(b []byte) error {
	type plain RefreshParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("refresh", err)
	}
	*r = RefreshParam(p)
	return nil
}

// TokenEndpointAuthParam is how the token endpoint authenticates the client.
type TokenEndpointAuthParam struct {
	Type         string  `json:"type"`
	ClientSecret *string `json:"client_secret"`
}

// UnmarshalJSON rejects unknown fields.
func (t *TokenEndpointAuthParam) UnmarshalJSON(b []byte) error {
	type plain TokenEndpointAuthParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("token_endpoint_auth", err)
	}
	*t = TokenEndpointAuthParam(p)
	return nil
}

// CredentialNetworkingParam is where an environment_variable secret may be sent.
type CredentialNetworkingParam struct {
	Type         string   `json:"type"`
	AllowedHosts []string `json:"allowed_hosts"`
}

// UnmarshalJSON rejects unknown fields.
func (n *CredentialNetworkingParam) UnmarshalJSON(b []byte) error {
	type plain CredentialNetworkingParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("networking", err)
	}
	*n = CredentialNetworkingParam(p)
	return nil
}

// InjectionLocationParam is where in a request an environment_variable secret may be
// substituted.
type InjectionLocationParam struct {
	Body   *bool `json:"body"`
	Header *bool `json:"header"`
}

// UnmarshalJSON rejects unknown fields.
func (l *InjectionLocationParam) UnmarshalJSON(b []byte) error {
	type plain InjectionLocationParam
	var p plain
	if err := DecodeStrict(b, &p); err != nil {
		return prefixErr("injection_location", err)
	}
	*l = InjectionLocationParam(p)
	return nil
}

// Credential is the vault credential resource (BetaManagedAgentsCredential): every key
// present, secrets never.
type Credential struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	VaultID     string         `json:"vault_id"`
	DisplayName *string        `json:"display_name"`
	Metadata    Metadata       `json:"metadata"`
	Auth        CredentialAuth `json:"auth"`
	CreatedAt   Time           `json:"created_at"`
	UpdatedAt   Time           `json:"updated_at"`
	ArchivedAt  *Time          `json:"archived_at"`
}

// CredentialAuth is the non-secret part of a credential's auth. It marshals the keys of its
// type only (static_bearer: type, mcp_server_url; mcp_oauth: also expires_at and refresh,
// null when absent; environment_variable: type, secret_name, networking,
// injection_location). It is also the stored form (store.CredentialRecord.Auth).
type CredentialAuth struct {
	Type              string                `json:"type"`
	MCPServerURL      string                `json:"mcp_server_url,omitempty"`
	ExpiresAt         *Time                 `json:"expires_at,omitempty"`
	Refresh           *CredentialRefresh    `json:"refresh,omitempty"`
	SecretName        string                `json:"secret_name,omitempty"`
	Networking        *CredentialNetworking `json:"networking,omitempty"`
	InjectionLocation *InjectionLocation    `json:"injection_location,omitempty"`
}

// MarshalJSON writes the keys of the auth's type, nullable ones as null.
func (a CredentialAuth) MarshalJSON() ([]byte, error) {
	switch a.Type {
	case AuthStaticBearer:
		return json.Marshal(struct {
			Type         string `json:"type"`
			MCPServerURL string `json:"mcp_server_url"`
		}{a.Type, a.MCPServerURL})
	case AuthMCPOAuth:
		return json.Marshal(struct {
			Type         string             `json:"type"`
			MCPServerURL string             `json:"mcp_server_url"`
			ExpiresAt    *Time              `json:"expires_at"`
			Refresh      *CredentialRefresh `json:"refresh"`
		}{a.Type, a.MCPServerURL, a.ExpiresAt, a.Refresh})
	case AuthEnvironmentVariable:
		return json.Marshal(struct {
			Type              string                `json:"type"`
			SecretName        string                `json:"secret_name"`
			Networking        *CredentialNetworking `json:"networking"`
			InjectionLocation *InjectionLocation    `json:"injection_location"`
		}{a.Type, a.SecretName, a.Networking, a.InjectionLocation})
	}
	type plain CredentialAuth
	return json.Marshal(plain(a))
}

// CredentialRefresh is mcp_oauth's refresh configuration without its secrets.
type CredentialRefresh struct {
	ClientID          string            `json:"client_id"`
	TokenEndpoint     string            `json:"token_endpoint"`
	TokenEndpointAuth TokenEndpointAuth `json:"token_endpoint_auth"`
	Resource          *string           `json:"resource"`
	Scope             *string           `json:"scope"`
}

// TokenEndpointAuth names the client authentication style: none, client_secret_basic or
// client_secret_post.
type TokenEndpointAuth struct {
	Type string `json:"type"`
}

// CredentialNetworking is unrestricted ({type}) or limited ({type, allowed_hosts}).
type CredentialNetworking struct {
	Type         string   `json:"type"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// MarshalJSON keeps allowed_hosts present for limited networking.
func (n CredentialNetworking) MarshalJSON() ([]byte, error) {
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
		Type         string   `json:"type"`
		AllowedHosts []string `json:"allowed_hosts"`
	}{n.Type, hosts})
}

// InjectionLocation is where an environment_variable secret may be substituted.
type InjectionLocation struct {
	Body   bool `json:"body"`
	Header bool `json:"header"`
}
