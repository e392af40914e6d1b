package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/mcpurl"
	"github.com/managed-agents/managed-agents/internal/secretbox"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Limits of credentials (the SDK's and the hosted service's, where known).
const (
	maxCredentialsPerVault = 20
	maxURLLen              = 2048
	maxSecretLen           = 64 << 10
	maxOAuthFieldLen       = 2048
	maxSecretNameLen       = 256
	maxCredentialHosts     = 16
)

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// errNoVaultKeys refuses to store a secret without an encryption key: nothing is written
// in the clear.
func errNoVaultKeys() error {
	return invalidf("vault credentials are disabled on this server: no encryption key is configured (MANAGED_AGENT_VAULT_KEYS)").
		withCode("vault_encryption_not_configured")
}

func credentialFromRecord(r store.CredentialRecord) (wire.Credential, error) {
	var auth wire.CredentialAuth
	if err := json.Unmarshal(r.Auth, &auth); err != nil {
		return wire.Credential{}, fmt.Errorf("decode credential %s auth: %w", r.ID, err)
	}
	return wire.Credential{ID: r.ID, Type: "vault_credential", VaultID: r.VaultID, DisplayName: r.DisplayName, Metadata: r.Metadata,
		Auth: auth, CreatedAt: wire.Time(r.CreatedAt), UpdatedAt: wire.Time(r.UpdatedAt), ArchivedAt: wire.TimePtr(r.ArchivedAt)}, nil
}

// CreateCredential validates, seals and stores a credential in an active vault. A vault
// holds one active credential per MCP server (409 otherwise) and at most 20 active ones.
func (s *Service) CreateCredential(ctx context.Context, workspaceID, vaultID string, p wire.CredentialCreateParams) (wire.Credential, error) {
	if p.DisplayName != nil {
		if err := checkLen("display_name", *p.DisplayName, 0, maxVaultNameLen); err != nil {
			return wire.Credential{}, err
		}
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return wire.Credential{}, err
	}
	if p.Auth == nil {
		return wire.Credential{}, invalidf("auth: is required")
	}
	auth, secrets, matchURL, err := resolveNewAuth(*p.Auth)
	if err != nil {
		return wire.Credential{}, err
	}
	if s.vaultKeys.Empty() {
		return wire.Credential{}, errNoVaultKeys()
	}
	rawAuth, err := json.Marshal(auth)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("encode credential auth: %w", err)
	}
	now := s.now()
	rec := store.CredentialRecord{ID: ids.New(ids.Credential), VaultID: vaultID, DisplayName: p.DisplayName, Metadata: p.Metadata,
		AuthType: auth.Type, MatchURL: matchURL, Auth: rawAuth, CreatedAt: now, UpdatedAt: now}
	if rec.Sealed, err = store.SealSecrets(s.vaultKeys, rec.ID, secrets); err != nil {
		return wire.Credential{}, err
	}
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		// The vault's row lock serializes creates, so the count below holds.
		vault, err := q.GetVault(ctx, workspaceID, vaultID, true)
		if err != nil {
			return notFoundAs(err, "vault %s not found", vaultID)
		}
		if vault.ArchivedAt != nil {
			return invalidf("vault %s is archived; credentials cannot be added", vaultID)
		}
		n, err := q.CountActiveCredentials(ctx, vaultID)
		if err != nil {
			return err
		}
		if n >= maxCredentialsPerVault {
			return invalidf("vault %s already holds %d active credentials, the maximum; archive or delete one first", vaultID, n)
		}
		if err := q.InsertCredential(ctx, rec); err != nil {
			if errors.Is(err, store.ErrDuplicate) {
				return conflictf("vault %s already has an active credential for %s; archive it first", vaultID, auth.MCPServerURL)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return wire.Credential{}, err
	}
	return credentialFromRecord(rec)
}

// resolveNewAuth validates a create's auth and splits it into its echoed part, its secrets
// and the normalized MCP server URL (nil for environment variables).
func resolveNewAuth(p wire.CredentialAuthParam) (wire.CredentialAuth, store.CredentialSecrets, *string, error) {
	var sec store.CredentialSecrets
	switch p.Type {
	case wire.AuthStaticBearer:
		if err := onlyFields(p, "auth", "mcp_server_url", "token"); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		u, match, err := serverURL(p.MCPServerURL)
		if err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		if sec.Token, err = requiredSecret("auth.token", p.Token); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		return wire.CredentialAuth{Type: p.Type, MCPServerURL: u}, sec, &match, nil
	case wire.AuthMCPOAuth:
		if err := onlyFields(p, "auth", "mcp_server_url", "access_token", "expires_at", "refresh"); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		u, match, err := serverURL(p.MCPServerURL)
		if err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		if sec.AccessToken, err = requiredSecret("auth.access_token", p.AccessToken); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		auth := wire.CredentialAuth{Type: p.Type, MCPServerURL: u}
		if auth.ExpiresAt, err = expiresAt(p.ExpiresAt); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		if p.Refresh != nil {
			if auth.Refresh, err = resolveNewRefresh(*p.Refresh, &sec); err != nil {
				return wire.CredentialAuth{}, sec, nil, err
			}
		}
		return auth, sec, &match, nil
	case wire.AuthEnvironmentVariable:
		if err := onlyFields(p, "auth", "secret_name", "secret_value", "networking", "injection_location"); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		if p.SecretName == nil {
			return wire.CredentialAuth{}, sec, nil, invalidf("auth.secret_name: is required")
		}
		if err := checkLen("auth.secret_name", *p.SecretName, 1, maxSecretNameLen); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		if !secretName.MatchString(*p.SecretName) {
			return wire.CredentialAuth{}, sec, nil, invalidf("auth.secret_name: must be an environment variable name (letters, digits and _, not starting with a digit)")
		}
		var err error
		if sec.SecretValue, err = requiredSecret("auth.secret_value", p.SecretValue); err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		if p.Networking == nil {
			return wire.CredentialAuth{}, sec, nil, invalidf("auth.networking: is required")
		}
		n, err := resolveCredentialNetworking(*p.Networking)
		if err != nil {
			return wire.CredentialAuth{}, sec, nil, err
		}
		loc := patchInjection(defaultInjection(), p.InjectionLocation)
		return wire.CredentialAuth{Type: p.Type, SecretName: *p.SecretName, Networking: n, InjectionLocation: &loc}, sec, nil, nil
	case "":
		return wire.CredentialAuth{}, sec, nil, invalidf("auth.type: is required")
	}
	return wire.CredentialAuth{}, sec, nil, invalidf("auth.type: must be static_bearer, mcp_oauth or environment_variable")
}

// defaultInjection is where an environment_variable secret may go when the create names
// nowhere: request headers only (documented in docs/vaults.md).
func defaultInjection() wire.InjectionLocation { return wire.InjectionLocation{Header: true} }

func patchInjection(loc wire.InjectionLocation, p *wire.InjectionLocationParam) wire.InjectionLocation {
	if p != nil {
		if p.Body != nil {
			loc.Body = *p.Body
		}
		if p.Header != nil {
			loc.Header = *p.Header
		}
	}
	return loc
}

// onlyFields refuses fields another auth type owns, naming the first one.
func onlyFields(p wire.CredentialAuthParam, prefix string, allowed ...string) error {
	set := map[string]bool{
		"mcp_server_url": p.MCPServerURL != nil, "token": p.Token != nil, "access_token": p.AccessToken != nil,
		"expires_at": p.ExpiresAt != nil, "refresh": p.Refresh != nil, "secret_name": p.SecretName != nil,
		"secret_value": p.SecretValue != nil, "networking": p.Networking != nil, "injection_location": p.InjectionLocation != nil,
	}
	for _, a := range allowed {
		delete(set, a)
	}
	for _, name := range []string{"mcp_server_url", "token", "access_token", "expires_at", "refresh", "secret_name", "secret_value", "networking", "injection_location"} {
		if set[name] {
			return invalidf("%s.%s: is not a field of a %s credential", prefix, name, p.Type)
		}
	}
	return nil
}

func expiresAt(p *string) (*wire.Time, error) {
	if p == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *p)
	if err != nil {
		return nil, invalidf("auth.expires_at: must be an RFC 3339 timestamp")
	}
	w := wire.Time(t.UTC().Truncate(time.Microsecond))
	return &w, nil
}

func serverURL(p *string) (raw, normalized string, err error) {
	if p == nil {
		return "", "", invalidf("auth.mcp_server_url: is required")
	}
	if err := checkLen("auth.mcp_server_url", *p, 1, maxURLLen); err != nil {
		return "", "", err
	}
	n, nerr := mcpurl.Normalize(*p)
	if nerr != nil {
		return "", "", invalidf("auth.mcp_server_url: %v", nerr)
	}
	// Normalizing percent-encodes non-ASCII characters, up to nine bytes each: bound what is
	// indexed, or a long non-ASCII URL fails the insert (an index row is at most ~2.7 KB).
	if len(n) > maxURLLen {
		return "", "", invalidf("auth.mcp_server_url: must be at most %d bytes once normalized (non-ASCII characters count as their percent-encoding)", maxURLLen)
	}
	return *p, n, nil
}

func requiredSecret(field string, p *string) (string, error) {
	if p == nil {
		return "", invalidf("%s: is required", field)
	}
	if err := checkLen(field, *p, 1, maxSecretLen); err != nil {
		return "", err
	}
	return *p, nil
}

func resolveNewRefresh(p wire.RefreshParam, sec *store.CredentialSecrets) (*wire.CredentialRefresh, error) {
	const f = "auth.refresh"
	if p.ClientID == nil {
		return nil, invalidf("%s.client_id: is required", f)
	}
	if err := checkLen(f+".client_id", *p.ClientID, 1, maxOAuthFieldLen); err != nil {
		return nil, err
	}
	var err error
	if sec.RefreshToken, err = requiredSecret(f+".refresh_token", p.RefreshToken); err != nil {
		return nil, err
	}
	if p.TokenEndpoint == nil {
		return nil, invalidf("%s.token_endpoint: is required", f)
	}
	if err := checkLen(f+".token_endpoint", *p.TokenEndpoint, 1, maxURLLen); err != nil {
		return nil, err
	}
	if _, err := mcpurl.Normalize(*p.TokenEndpoint); err != nil {
		return nil, invalidf("%s.token_endpoint: %v", f, err)
	}
	if p.TokenEndpointAuth == nil {
		return nil, invalidf("%s.token_endpoint_auth: is required", f)
	}
	out := &wire.CredentialRefresh{ClientID: *p.ClientID, TokenEndpoint: *p.TokenEndpoint, TokenEndpointAuth: wire.TokenEndpointAuth{Type: p.TokenEndpointAuth.Type}}
	switch p.TokenEndpointAuth.Type {
	case "none":
		if p.TokenEndpointAuth.ClientSecret != nil {
			return nil, invalidf("%s.token_endpoint_auth.client_secret: is not used with type none", f)
		}
	case "client_secret_basic", "client_secret_post":
		if sec.ClientSecret, err = requiredSecret(f+".token_endpoint_auth.client_secret", p.TokenEndpointAuth.ClientSecret); err != nil {
			return nil, err
		}
	default:
		return nil, invalidf("%s.token_endpoint_auth.type: must be none, client_secret_basic or client_secret_post", f)
	}
	for _, o := range []struct {
		name string
		in   *string
		out  **string
	}{{"resource", p.Resource, &out.Resource}, {"scope", p.Scope, &out.Scope}} {
		if o.in == nil {
			continue
		}
		if err := checkLen(f+"."+o.name, *o.in, 0, maxOAuthFieldLen); err != nil {
			return nil, err
		}
		if *o.in != "" {
			v := *o.in
			*o.out = &v
		}
	}
	return out, nil
}

func resolveCredentialNetworking(p wire.CredentialNetworkingParam) (*wire.CredentialNetworking, error) {
	switch p.Type {
	case "unrestricted":
		if p.AllowedHosts != nil {
			return nil, invalidf("auth.networking.allowed_hosts: only limited networking has allowed_hosts")
		}
		return &wire.CredentialNetworking{Type: "unrestricted"}, nil
	case "limited":
	default:
		return nil, invalidf("auth.networking.type: must be unrestricted or limited")
	}
	if len(p.AllowedHosts) == 0 || len(p.AllowedHosts) > maxCredentialHosts {
		return nil, invalidf("auth.networking.allowed_hosts: must list 1 to %d hosts", maxCredentialHosts)
	}
	for i, h := range p.AllowedHosts {
		if !hostPattern.MatchString(h) {
			return nil, invalidf("auth.networking.allowed_hosts[%d]: %q must be a bare hostname, an IPv4 address or a *.domain wildcard (no scheme, port or path)", i, wire.Excerpt(h, maxQuoted))
		}
	}
	return &wire.CredentialNetworking{Type: "limited", AllowedHosts: p.AllowedHosts}, nil
}

// GetCredential returns a credential of a vault of the workspace.
func (s *Service) GetCredential(ctx context.Context, workspaceID, vaultID, id string) (wire.Credential, error) {
	rec, err := s.store.GetCredential(ctx, workspaceID, vaultID, id, false)
	if err != nil {
		return wire.Credential{}, s.credentialNotFound(ctx, err, workspaceID, vaultID, id)
	}
	return credentialFromRecord(rec)
}

// credentialNotFound names the vault when it is the vault that is missing.
func (s *Service) credentialNotFound(ctx context.Context, err error, workspaceID, vaultID, id string) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if _, verr := s.store.GetVault(ctx, workspaceID, vaultID, false); verr != nil {
		return notFoundAs(verr, "vault %s not found", vaultID)
	}
	return notFoundf("credential %s not found in vault %s", id, vaultID)
}

// UpdateCredential patches a credential: display name, metadata and, within its type, its
// secrets and settings. The type, the MCP server URL, the secret name, the OAuth client id,
// token endpoint and resource cannot change (archive and create another).
func (s *Service) UpdateCredential(ctx context.Context, workspaceID, vaultID, id string, p wire.CredentialUpdateParams) (wire.Credential, error) {
	var out wire.Credential
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetCredential(ctx, workspaceID, vaultID, id, true)
		if err != nil {
			return s.credentialNotFound(ctx, err, workspaceID, vaultID, id)
		}
		if rec.ArchivedAt != nil {
			return invalidf("credential %s is archived and cannot be updated", id)
		}
		if p.DisplayName.Set {
			rec.DisplayName = nil
			if !p.DisplayName.Null {
				if err := checkLen("display_name", p.DisplayName.Value, 0, maxVaultNameLen); err != nil {
					return err
				}
				v := p.DisplayName.Value
				rec.DisplayName = &v
			}
		}
		if p.Metadata != nil {
			if rec.Metadata, err = patchMetadata("metadata", rec.Metadata, p.Metadata, false); err != nil {
				return err
			}
		}
		if p.Auth != nil {
			if err := s.patchAuth(&rec, *p.Auth); err != nil {
				return err
			}
		}
		rec.UpdatedAt = s.now()
		if err := q.UpdateCredential(ctx, rec); err != nil {
			return err
		}
		out, err = credentialFromRecord(rec)
		return err
	})
	return out, err
}

// patchAuth applies an auth update to rec, resealing its secrets when one changes.
func (s *Service) patchAuth(rec *store.CredentialRecord, p wire.CredentialAuthParam) error {
	if p.Type == "" {
		return invalidf("auth.type: is required")
	}
	if p.Type != rec.AuthType {
		return invalidf("auth.type: cannot change from %s to %s", rec.AuthType, p.Type)
	}
	var auth wire.CredentialAuth
	if err := json.Unmarshal(rec.Auth, &auth); err != nil {
		return fmt.Errorf("decode credential %s auth: %w", rec.ID, err)
	}
	// Secrets are opened only when one changes; fields left out keep their stored value.
	var sec *store.CredentialSecrets
	secrets := func() (*store.CredentialSecrets, error) {
		if sec != nil {
			return sec, nil
		}
		if s.vaultKeys.Empty() {
			return nil, errNoVaultKeys()
		}
		cur, err := store.OpenSecrets(s.vaultKeys, rec.ID, rec.Sealed)
		switch {
		case err == nil:
		case errors.Is(err, secretbox.ErrOpen) && rec.AuthType != wire.AuthMCPOAuth:
			// Sealed under a key this server no longer has. A type with one secret is being
			// given a new one, which is exactly how a user repairs it: nothing is lost.
			cur = store.CredentialSecrets{}
		case errors.Is(err, secretbox.ErrOpen):
			return nil, invalidf("auth: the credential's stored secrets cannot be decrypted with this server's vault keys (was a key removed from MANAGED_AGENT_VAULT_KEYS?); archive it and create it again")
		default:
			return nil, err
		}
		sec = &cur
		return sec, nil
	}
	setSecret := func(field string, in *string, dst func(*store.CredentialSecrets) *string) error {
		if in == nil {
			return nil
		}
		v, err := requiredSecret(field, in)
		if err != nil {
			return err
		}
		cur, err := secrets()
		if err != nil {
			return err
		}
		*dst(cur) = v
		return nil
	}
	switch p.Type {
	case wire.AuthStaticBearer:
		if err := onlyFields(p, "auth", "token"); err != nil {
			return immutable(err, p)
		}
		if err := setSecret("auth.token", p.Token, func(c *store.CredentialSecrets) *string { return &c.Token }); err != nil {
			return err
		}
	case wire.AuthMCPOAuth:
		if err := onlyFields(p, "auth", "access_token", "expires_at", "refresh"); err != nil {
			return immutable(err, p)
		}
		if err := setSecret("auth.access_token", p.AccessToken, func(c *store.CredentialSecrets) *string { return &c.AccessToken }); err != nil {
			return err
		}
		if p.ExpiresAt != nil {
			t, err := expiresAt(p.ExpiresAt)
			if err != nil {
				return err
			}
			auth.ExpiresAt = t
		}
		if p.Refresh != nil {
			if err := s.patchRefresh(&auth, *p.Refresh, secrets); err != nil {
				return err
			}
		}
	case wire.AuthEnvironmentVariable:
		if err := onlyFields(p, "auth", "secret_value", "networking", "injection_location"); err != nil {
			return immutable(err, p)
		}
		if err := setSecret("auth.secret_value", p.SecretValue, func(c *store.CredentialSecrets) *string { return &c.SecretValue }); err != nil {
			return err
		}
		if p.Networking != nil {
			n, err := resolveCredentialNetworking(*p.Networking)
			if err != nil {
				return err
			}
			auth.Networking = n
		}
		if p.InjectionLocation != nil {
			cur := defaultInjection()
			if auth.InjectionLocation != nil {
				cur = *auth.InjectionLocation
			}
			loc := patchInjection(cur, p.InjectionLocation)
			auth.InjectionLocation = &loc
		}
	}
	raw, err := json.Marshal(auth)
	if err != nil {
		return fmt.Errorf("encode credential auth: %w", err)
	}
	rec.Auth = raw
	if sec != nil {
		if rec.Sealed, err = store.SealSecrets(s.vaultKeys, rec.ID, *sec); err != nil {
			return err
		}
	}
	return nil
}

// immutable rewords onlyFields' refusal for the fields fixed at create.
func immutable(err error, p wire.CredentialAuthParam) error {
	switch {
	case p.MCPServerURL != nil:
		return invalidf("auth.mcp_server_url: cannot be changed; archive the credential and create another")
	case p.SecretName != nil:
		return invalidf("auth.secret_name: cannot be changed; archive the credential and create another")
	}
	return err
}

func (s *Service) patchRefresh(auth *wire.CredentialAuth, p wire.RefreshParam, secrets func() (*store.CredentialSecrets, error)) error {
	const f = "auth.refresh"
	if auth.Refresh == nil {
		// No refresh yet: the update brings a whole configuration, as on create.
		sec, err := secrets()
		if err != nil {
			return err
		}
		r, err := resolveNewRefresh(p, sec)
		if err != nil {
			return err
		}
		auth.Refresh = r
		return nil
	}
	for _, fixed := range []struct {
		name string
		set  bool
	}{{"client_id", p.ClientID != nil}, {"token_endpoint", p.TokenEndpoint != nil}, {"resource", p.Resource != nil}} {
		if fixed.set {
			return invalidf("%s.%s: cannot be changed; archive the credential and create another", f, fixed.name)
		}
	}
	if p.RefreshToken != nil {
		v, err := requiredSecret(f+".refresh_token", p.RefreshToken)
		if err != nil {
			return err
		}
		sec, err := secrets()
		if err != nil {
			return err
		}
		sec.RefreshToken = v
	}
	if p.Scope != nil {
		// "" clears the stored scope.
		if err := checkLen(f+".scope", *p.Scope, 0, maxOAuthFieldLen); err != nil {
			return err
		}
		auth.Refresh.Scope = nil
		if *p.Scope != "" {
			v := *p.Scope
			auth.Refresh.Scope = &v
		}
	}
	if ta := p.TokenEndpointAuth; ta != nil {
		if ta.Type != "client_secret_basic" && ta.Type != "client_secret_post" {
			return invalidf("%s.token_endpoint_auth.type: must be client_secret_basic or client_secret_post", f)
		}
		if auth.Refresh.TokenEndpointAuth.Type == "none" {
			return invalidf("%s.token_endpoint_auth: the credential authenticates to its token endpoint with type none and has no client secret", f)
		}
		if ta.ClientSecret != nil {
			// The credential keeps its authentication style whichever type is sent (as the SDK documents).
			v, err := requiredSecret(f+".token_endpoint_auth.client_secret", ta.ClientSecret)
			if err != nil {
				return err
			}
			sec, err := secrets()
			if err != nil {
				return err
			}
			sec.ClientSecret = v
		}
	}
	return nil
}

// ArchiveCredential archives a credential: sessions stop using it, and its MCP server URL
// is free for a new credential in the vault. Archiving twice keeps the first archived_at.
func (s *Service) ArchiveCredential(ctx context.Context, workspaceID, vaultID, id string) (wire.Credential, error) {
	var out wire.Credential
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.GetCredential(ctx, workspaceID, vaultID, id, true)
		if err != nil {
			return s.credentialNotFound(ctx, err, workspaceID, vaultID, id)
		}
		if rec.ArchivedAt == nil {
			now := s.now()
			rec.ArchivedAt, rec.UpdatedAt = &now, now
			if err := q.UpdateCredential(ctx, rec); err != nil {
				return err
			}
		}
		out, err = credentialFromRecord(rec)
		return err
	})
	return out, err
}

// DeleteCredential deletes a credential.
func (s *Service) DeleteCredential(ctx context.Context, workspaceID, vaultID, id string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := q.GetCredential(ctx, workspaceID, vaultID, id, true); err != nil {
			return s.credentialNotFound(ctx, err, workspaceID, vaultID, id)
		}
		return q.DeleteCredential(ctx, id)
	})
}

// ListCredentials returns one page of a vault's credentials.
func (s *Service) ListCredentials(ctx context.Context, workspaceID, vaultID string, p ListParams) ([]wire.Credential, bool, error) {
	if _, err := s.store.GetVault(ctx, workspaceID, vaultID, false); err != nil {
		return nil, false, notFoundAs(err, "vault %s not found", vaultID)
	}
	recs, more, err := s.store.ListCredentials(ctx, vaultID, p)
	if err != nil {
		return nil, false, err
	}
	out := make([]wire.Credential, len(recs))
	for i, r := range recs {
		if out[i], err = credentialFromRecord(r); err != nil {
			return nil, false, err
		}
	}
	return out, more, nil
}
