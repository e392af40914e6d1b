//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/secretbox"
)

var vaultKeys = []string{"id", "type", "display_name", "metadata", "created_at", "updated_at", "archived_at"}

var credentialKeys = []string{"id", "type", "vault_id", "display_name", "metadata", "auth", "created_at", "updated_at", "archived_at"}

// secrets are every write-only value the vault tests send; no response may contain one.
var secrets = []string{"static-secret-token", "rotated-static-token", "oauth-access-secret", "oauth-refresh-secret",
	"oauth-client-secret", "env-secret-value", "new-refresh-secret", "new-client-secret"}

// newVaultEnv is an API with a vault keyring.
func newVaultEnv(t *testing.T) *env {
	t.Helper()
	return newAPIEnv(t, app.Config{VaultKeys: secretbox.NewSpec("e2e")}, nil)
}

func requireNoSecrets(t *testing.T, body string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, body, s)
	}
}

func TestVaultLifecycle(t *testing.T) {
	t.Parallel()
	e := newVaultEnv(t)
	ctx := context.Background()
	v, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "Alice", Metadata: map[string]string{"owner": "alice", "tier": "1"}})
	require.NoError(t, err)
	obj := objectOf(t, v.RawJSON())
	requireKeys(t, obj, vaultKeys...)
	require.Regexp(t, `^vlt_011C\w+$`, v.ID)
	require.Equal(t, "vault", obj["type"])
	require.Equal(t, "Alice", v.DisplayName)
	require.Nil(t, obj["archived_at"])
	require.Equal(t, obj["created_at"], obj["updated_at"])

	got, err := e.client.Beta.Vaults.Get(ctx, v.ID, anthropic.BetaVaultGetParams{})
	require.NoError(t, err)
	require.JSONEq(t, v.RawJSON(), got.RawJSON())

	// Update: a new name, metadata patched (null deletes, omitted keys stay).
	resp, body := e.raw(http.MethodPost, "/v1/vaults/"+v.ID, `{"display_name":"Alice B","metadata":{"tier":null,"team":"red"}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	upd := objectOf(t, body)
	require.Equal(t, "Alice B", upd["display_name"])
	require.Equal(t, map[string]any{"owner": "alice", "team": "red"}, upd["metadata"])
	updated, err := e.client.Beta.Vaults.Update(ctx, v.ID, anthropic.BetaVaultUpdateParams{DisplayName: param.NewOpt("Alice C")})
	require.NoError(t, err)
	require.Equal(t, "Alice C", updated.DisplayName)
	require.Equal(t, map[string]string{"owner": "alice", "team": "red"}, updated.Metadata)

	// List: newest first, paged, archived ones only on request.
	var made []string
	for i := range 3 {
		w, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: fmt.Sprintf("v%d", i)})
		require.NoError(t, err)
		made = append(made, w.ID)
	}
	page, err := e.client.Beta.Vaults.List(ctx, anthropic.BetaVaultListParams{Limit: param.NewOpt(int64(2))})
	require.NoError(t, err)
	require.Equal(t, []string{made[2], made[1]}, vaultIDs(page.Data))
	require.NotEmpty(t, page.NextPage)
	var all []string
	iter := e.client.Beta.Vaults.ListAutoPaging(ctx, anthropic.BetaVaultListParams{Limit: param.NewOpt(int64(1))})
	for iter.Next() {
		all = append(all, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, []string{made[2], made[1], made[0], v.ID}, all)

	// Archive: idempotent, hidden from the default list, no more updates.
	arch, err := e.client.Beta.Vaults.Archive(ctx, made[0], anthropic.BetaVaultArchiveParams{})
	require.NoError(t, err)
	require.False(t, arch.ArchivedAt.IsZero())
	again, err := e.client.Beta.Vaults.Archive(ctx, made[0], anthropic.BetaVaultArchiveParams{})
	require.NoError(t, err)
	require.Equal(t, arch.ArchivedAt, again.ArchivedAt)
	page, err = e.client.Beta.Vaults.List(ctx, anthropic.BetaVaultListParams{})
	require.NoError(t, err)
	require.NotContains(t, vaultIDs(page.Data), made[0])
	page, err = e.client.Beta.Vaults.List(ctx, anthropic.BetaVaultListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Contains(t, vaultIDs(page.Data), made[0])
	_, err = e.client.Beta.Vaults.Update(ctx, made[0], anthropic.BetaVaultUpdateParams{DisplayName: param.NewOpt("x")})
	requireAPIErr(t, err, 400, "invalid_request_error", "archived")

	// Delete answers 200 with a body; the vault is gone.
	resp, body = e.raw(http.MethodDelete, "/v1/vaults/"+made[1], "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"type":"vault_deleted"}`, made[1]), body)
	_, err = e.client.Beta.Vaults.Get(ctx, made[1], anthropic.BetaVaultGetParams{})
	requireAPIErr(t, err, 404, "not_found_error", made[1])
	del, err := e.client.Beta.Vaults.Delete(ctx, made[2], anthropic.BetaVaultDeleteParams{})
	require.NoError(t, err)
	require.Equal(t, made[2], del.ID)
}

func vaultIDs(vs []anthropic.BetaManagedAgentsVault) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

func TestCredentialLifecycleNeverEchoesSecrets(t *testing.T) {
	t.Parallel()
	e := newVaultEnv(t)
	ctx := context.Background()
	v, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "v"})
	require.NoError(t, err)
	creds := e.client.Beta.Vaults.Credentials

	// static_bearer
	sb, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{DisplayName: param.NewOpt("GitHub"),
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "https://mcp.github.example.com/sse", Token: "static-secret-token"}}})
	require.NoError(t, err)
	requireNoSecrets(t, sb.RawJSON())
	obj := objectOf(t, sb.RawJSON())
	requireKeys(t, obj, credentialKeys...)
	require.Regexp(t, `^vcrd_011C\w+$`, sb.ID)
	require.Equal(t, "vault_credential", obj["type"])
	require.Equal(t, v.ID, sb.VaultID)
	require.Equal(t, "GitHub", sb.DisplayName)
	require.Equal(t, map[string]any{}, obj["metadata"])
	require.Equal(t, map[string]any{"type": "static_bearer", "mcp_server_url": "https://mcp.github.example.com/sse"}, obj["auth"])

	// mcp_oauth with refresh
	expires := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	oa, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{Metadata: map[string]string{"k": "v"},
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{
			MCPServerURL: "https://mcp.linear.example.com/mcp", AccessToken: "oauth-access-secret", ExpiresAt: param.NewOpt(expires),
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "client-1", RefreshToken: "oauth-refresh-secret",
				TokenEndpoint: "https://auth.linear.example.com/token", Scope: param.NewOpt("read"),
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{
					OfClientSecretBasic: &anthropic.BetaManagedAgentsTokenEndpointAuthBasicParam{ClientSecret: "oauth-client-secret"}}}}}})
	require.NoError(t, err)
	requireNoSecrets(t, oa.RawJSON())
	obj = objectOf(t, oa.RawJSON())
	requireKeys(t, obj, credentialKeys...)
	require.Nil(t, obj["display_name"])
	require.Equal(t, map[string]any{"type": "mcp_oauth", "mcp_server_url": "https://mcp.linear.example.com/mcp", "expires_at": "2030-01-02T03:04:05Z",
		"refresh": map[string]any{"client_id": "client-1", "token_endpoint": "https://auth.linear.example.com/token",
			"token_endpoint_auth": map[string]any{"type": "client_secret_basic"}, "resource": nil, "scope": "read"}}, obj["auth"])
	require.Equal(t, expires, oa.Auth.ExpiresAt)
	require.Equal(t, "client_secret_basic", oa.Auth.Refresh.TokenEndpointAuth.Type)

	// mcp_oauth without refresh or expiry: both keys present, null.
	bare, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{
			MCPServerURL: "https://mcp.bare.example.com", AccessToken: "oauth-access-secret"}}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"type": "mcp_oauth", "mcp_server_url": "https://mcp.bare.example.com", "expires_at": nil, "refresh": nil}, objectOf(t, bare.RawJSON())["auth"])

	// environment_variable
	ev, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfEnvironmentVariable: &anthropic.BetaManagedAgentsEnvironmentVariableCreateParams{
			SecretName: "STRIPE_KEY", SecretValue: "env-secret-value",
			Networking: anthropic.BetaManagedAgentsCredentialNetworkingParamsUnion{OfLimited: &anthropic.BetaManagedAgentsLimitedCredentialNetworkingParams{
				AllowedHosts: []string{"api.stripe.com", "*.stripe.com"}}},
			InjectionLocation: anthropic.BetaManagedAgentsInjectionLocationParams{Body: param.NewOpt(true)}}}})
	require.NoError(t, err)
	requireNoSecrets(t, ev.RawJSON())
	require.Equal(t, map[string]any{"type": "environment_variable", "secret_name": "STRIPE_KEY",
		"networking":         map[string]any{"type": "limited", "allowed_hosts": []any{"api.stripe.com", "*.stripe.com"}},
		"injection_location": map[string]any{"body": true, "header": true}}, objectOf(t, ev.RawJSON())["auth"])
	require.Equal(t, []string{"api.stripe.com", "*.stripe.com"}, ev.Auth.Networking.AllowedHosts)

	// Get and list never carry a secret either.
	got, err := creds.Get(ctx, oa.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	require.NoError(t, err)
	require.JSONEq(t, oa.RawJSON(), got.RawJSON())
	resp, body := e.raw(http.MethodGet, "/v1/vaults/"+v.ID+"/credentials", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	requireNoSecrets(t, body)
	var listed []string
	iter := creds.ListAutoPaging(ctx, v.ID, anthropic.BetaVaultCredentialListParams{Limit: param.NewOpt(int64(1))})
	for iter.Next() {
		listed = append(listed, iter.Current().ID)
		requireNoSecrets(t, iter.Current().RawJSON())
	}
	require.NoError(t, iter.Err())
	require.Equal(t, []string{ev.ID, bare.ID, oa.ID, sb.ID}, listed)

	// Updates: secrets replaced (not echoed), settings patched, fixed fields refused.
	upd, err := creds.Update(ctx, sb.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID, Metadata: map[string]string{"rotated": "yes"},
		Auth: anthropic.BetaVaultCredentialUpdateParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerUpdateParams{Token: param.NewOpt("rotated-static-token")}}})
	require.NoError(t, err)
	requireNoSecrets(t, upd.RawJSON())
	require.Equal(t, map[string]string{"rotated": "yes"}, upd.Metadata)
	upd, err = creds.Update(ctx, oa.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID,
		Auth: anthropic.BetaVaultCredentialUpdateParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthUpdateParams{
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshUpdateParams{RefreshToken: param.NewOpt("new-refresh-secret"), Scope: param.NewOpt(""),
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshUpdateParamsTokenEndpointAuthUnion{
					OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostUpdateParam{ClientSecret: param.NewOpt("new-client-secret")}}}}}})
	require.NoError(t, err)
	requireNoSecrets(t, upd.RawJSON())
	refresh := objectOf(t, upd.RawJSON())["auth"].(map[string]any)["refresh"].(map[string]any)
	require.Nil(t, refresh["scope"])
	require.Equal(t, map[string]any{"type": "client_secret_basic"}, refresh["token_endpoint_auth"], "the auth style is kept")
	resp, body = e.raw(http.MethodPost, "/v1/vaults/"+v.ID+"/credentials/"+ev.ID, `{"auth":{"type":"environment_variable","networking":{"type":"unrestricted"},"injection_location":{"header":false}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, map[string]any{"type": "environment_variable", "secret_name": "STRIPE_KEY", "networking": map[string]any{"type": "unrestricted"},
		"injection_location": map[string]any{"body": true, "header": false}}, objectOf(t, body)["auth"])
	for _, bad := range []struct{ id, body, msg string }{
		{sb.ID, `{"auth":{"type":"mcp_oauth","access_token":"x"}}`, "cannot change from static_bearer to mcp_oauth"},
		{sb.ID, `{"auth":{"type":"static_bearer","mcp_server_url":"https://elsewhere.example.com"}}`, "auth.mcp_server_url: cannot be changed"},
		{ev.ID, `{"auth":{"type":"environment_variable","secret_name":"OTHER"}}`, "auth.secret_name: cannot be changed"},
		{oa.ID, `{"auth":{"type":"mcp_oauth","refresh":{"client_id":"c2"}}}`, "auth.refresh.client_id: cannot be changed"},
		{sb.ID, `{"auth":{"type":"static_bearer","token":""}}`, "auth.token: must not be empty"},
		{sb.ID, `{"auth":{"type":"static_bearer","tokn":"x"}}`, "unknown field"},
	} {
		resp, body := e.raw(http.MethodPost, "/v1/vaults/"+v.ID+"/credentials/"+bad.id, bad.body)
		requireRawErr(t, resp, body, 400, "invalid_request_error", bad.msg)
	}

	// One active credential per MCP server URL (normalized); archiving frees it.
	_, err = creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "HTTPS://mcp.github.example.com:443/sse/", Token: "static-secret-token"}}})
	requireAPIErr(t, err, 409, "conflict_error", "already has an active credential")
	arch, err := creds.Archive(ctx, sb.ID, anthropic.BetaVaultCredentialArchiveParams{VaultID: v.ID})
	require.NoError(t, err)
	require.False(t, arch.ArchivedAt.IsZero())
	requireNoSecrets(t, arch.RawJSON())
	_, err = creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "https://mcp.github.example.com/sse", Token: "static-secret-token"}}})
	require.NoError(t, err)
	_, err = creds.Update(ctx, sb.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID, DisplayName: param.NewOpt("x")})
	requireAPIErr(t, err, 400, "invalid_request_error", "archived")

	// Delete.
	resp, body = e.raw(http.MethodDelete, "/v1/vaults/"+v.ID+"/credentials/"+ev.ID, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"type":"vault_credential_deleted"}`, ev.ID), body)
	_, err = creds.Get(ctx, ev.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	requireAPIErr(t, err, 404, "not_found_error", ev.ID)

	// Nothing in the database holds a secret in the clear.
	rows, err := e.api.Store.Pool().Query(ctx, `SELECT auth::text || encode(sealed, 'escape') FROM vault_credentials`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var row string
		require.NoError(t, rows.Scan(&row))
		requireNoSecrets(t, row)
	}
	require.NoError(t, rows.Err())
}

func TestVaultsAreWorkspaceScoped(t *testing.T) {
	t.Parallel()
	e := newVaultEnv(t)
	ctx := context.Background()
	v, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "mine"})
	require.NoError(t, err)
	c, err := e.client.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "https://mcp.example.com", Token: "static-secret-token"}}})
	require.NoError(t, err)

	other := e.clientFor(e.newKey())
	_, err = other.Beta.Vaults.Get(ctx, v.ID, anthropic.BetaVaultGetParams{})
	requireAPIErr(t, err, 404, "not_found_error", v.ID)
	_, err = other.Beta.Vaults.Archive(ctx, v.ID, anthropic.BetaVaultArchiveParams{})
	requireAPIErr(t, err, 404, "not_found_error", v.ID)
	_, err = other.Beta.Vaults.Delete(ctx, v.ID, anthropic.BetaVaultDeleteParams{})
	requireAPIErr(t, err, 404, "not_found_error", v.ID)
	_, err = other.Beta.Vaults.Credentials.Get(ctx, c.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	requireAPIErr(t, err, 404, "not_found_error", v.ID)
	_, err = other.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{})
	requireAPIErr(t, err, 404, "not_found_error", v.ID)
	_, err = other.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "https://mcp2.example.com", Token: "static-secret-token"}}})
	requireAPIErr(t, err, 404, "not_found_error", v.ID)
	page, err := other.Beta.Vaults.List(ctx, anthropic.BetaVaultListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Data)

	// A credential is found only under its own vault.
	v2, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "other"})
	require.NoError(t, err)
	_, err = e.client.Beta.Vaults.Credentials.Get(ctx, c.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v2.ID})
	requireAPIErr(t, err, 404, "not_found_error", c.ID)
}

func TestSessionVaultIDs(t *testing.T) {
	t.Parallel()
	e := newVaultEnv(t)
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "a", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "e"})
	require.NoError(t, err)
	v1, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "one"})
	require.NoError(t, err)
	v2, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "two"})
	require.NoError(t, err)
	newSess := func(vaults ...string) (*anthropic.BetaManagedAgentsSession, error) {
		return e.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: envr.ID, VaultIDs: vaults})
	}

	sess, err := newSess(v2.ID, v1.ID)
	require.NoError(t, err)
	require.Equal(t, []string{v2.ID, v1.ID}, sess.VaultIDs)
	got, err := e.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, []string{v2.ID, v1.ID}, got.VaultIDs)
	plain, err := newSess()
	require.NoError(t, err)
	require.Equal(t, []any{}, objectOf(t, plain.RawJSON())["vault_ids"])

	_, err = newSess(v1.ID, "vlt_missing")
	requireAPIErr(t, err, 404, "not_found_error", "vault_ids[1]: vault vlt_missing not found")
	other := e.clientFor(e.newKey())
	foreign, err := other.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "foreign"})
	require.NoError(t, err)
	_, err = newSess(foreign.ID)
	requireAPIErr(t, err, 404, "not_found_error", foreign.ID)
	_, err = newSess(v1.ID, v1.ID)
	requireAPIErr(t, err, 400, "invalid_request_error", "listed twice")
	_, err = e.client.Beta.Vaults.Archive(ctx, v1.ID, anthropic.BetaVaultArchiveParams{})
	require.NoError(t, err)
	_, err = newSess(v1.ID)
	requireAPIErr(t, err, 400, "invalid_request_error", "vault_ids[0]: vault "+v1.ID+" is archived")
}

func TestVaultBadInput(t *testing.T) {
	t.Parallel()
	e := newVaultEnv(t)
	resp, body := e.raw(http.MethodPost, "/v1/vaults", `{"display_name":"v"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	vid := objectOf(t, body)["id"].(string)
	creds := "/v1/vaults/" + vid + "/credentials"
	sb := func(extra string) string {
		return `{"auth":{"type":"static_bearer","mcp_server_url":"https://m.example.com","token":"t"` + extra + `}}`
	}
	oauth := func(refresh string) string {
		return `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://o.example.com","access_token":"a","refresh":` + refresh + `}}`
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		errType, msg     string
	}{
		{"vault without a name", "/v1/vaults", `{}`, 400, "invalid_request_error", "display_name: must not be empty"},
		{"vault name too long", "/v1/vaults", `{"display_name":"` + strings.Repeat("x", 256) + `"}`, 400, "invalid_request_error", "display_name"},
		{"vault unknown field", "/v1/vaults", `{"display_name":"v","colour":"red"}`, 400, "invalid_request_error", "colour"},
		{"vault metadata not a string", "/v1/vaults", `{"display_name":"v","metadata":{"a":1}}`, 400, "invalid_request_error", "metadata"},
		{"credential without auth", creds, `{}`, 400, "invalid_request_error", "auth: is required"},
		{"unknown auth type", creds, `{"auth":{"type":"basic"}}`, 400, "invalid_request_error", "auth.type: must be static_bearer, mcp_oauth or environment_variable"},
		{"unknown auth field", creds, sb(`,"password":"p"`), 400, "invalid_request_error", "password"},
		{"field of another type", creds, sb(`,"secret_name":"X"`), 400, "invalid_request_error", "auth.secret_name: is not a field of a static_bearer credential"},
		{"missing token", creds, `{"auth":{"type":"static_bearer","mcp_server_url":"https://m.example.com"}}`, 400, "invalid_request_error", "auth.token: is required"},
		{"bad server URL", creds, `{"auth":{"type":"static_bearer","mcp_server_url":"ftp://m.example.com","token":"t"}}`, 400, "invalid_request_error", "auth.mcp_server_url: must be an http or https URL"},
		{"refresh without client_id", creds, oauth(`{"refresh_token":"r","token_endpoint":"https://a.example.com","token_endpoint_auth":{"type":"none"}}`), 400, "invalid_request_error", "auth.refresh.client_id: is required"},
		{"basic auth without secret", creds, oauth(`{"client_id":"c","refresh_token":"r","token_endpoint":"https://a.example.com","token_endpoint_auth":{"type":"client_secret_basic"}}`), 400, "invalid_request_error", "client_secret: is required"},
		{"unknown endpoint auth", creds, oauth(`{"client_id":"c","refresh_token":"r","token_endpoint":"https://a.example.com","token_endpoint_auth":{"type":"mtls"}}`), 400, "invalid_request_error", "token_endpoint_auth.type"},
		{"bad expires_at", creds, `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://o.example.com","access_token":"a","expires_at":"soon"}}`, 400, "invalid_request_error", "expires_at"},
		{"bad secret name", creds, `{"auth":{"type":"environment_variable","secret_name":"1X","secret_value":"v","networking":{"type":"unrestricted"}}}`, 400, "invalid_request_error", "auth.secret_name"},
		{"env without networking", creds, `{"auth":{"type":"environment_variable","secret_name":"X","secret_value":"v"}}`, 400, "invalid_request_error", "auth.networking: is required"},
		{"limited without hosts", creds, `{"auth":{"type":"environment_variable","secret_name":"X","secret_value":"v","networking":{"type":"limited"}}}`, 400, "invalid_request_error", "allowed_hosts"},
		{"host with a scheme", creds, `{"auth":{"type":"environment_variable","secret_name":"X","secret_value":"v","networking":{"type":"limited","allowed_hosts":["https://a.com"]}}}`, 400, "invalid_request_error", "allowed_hosts[0]"},
		{"unknown vault", "/v1/vaults/vlt_missing/credentials", sb(""), 404, "not_found_error", "vlt_missing"},
		{"bad list limit", "/v1/vaults?limit=101", "", 400, "invalid_request_error", "limit"},
		{"garbage cursor", "/v1/vaults?page=garbage", "", 400, "invalid_request_error", "invalid page cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.body == "" {
				method = http.MethodGet
			}
			resp, body := e.raw(method, tc.path, tc.body)
			requireRawErr(t, resp, body, tc.status, tc.errType, tc.msg)
		})
	}
	// A cursor of another list is refused.
	resp, body = e.raw(http.MethodPost, "/v1/vaults", `{"display_name":"w"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.raw(http.MethodGet, "/v1/vaults?limit=1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var page struct {
		NextPage string `json:"next_page"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	resp, body = e.raw(http.MethodGet, creds+"?page="+page.NextPage, "")
	requireRawErr(t, resp, body, 400, "invalid_request_error", "invalid page cursor")
}

func TestCredentialsNeedAVaultKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no MANAGED_AGENT_VAULT_KEYS
	ctx := context.Background()
	v, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "v"})
	require.NoError(t, err)
	_, err = e.client.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: "https://mcp.example.com", Token: "static-secret-token"}}})
	apiErr := requireAPIErr(t, err, 400, "invalid_request_error", "MANAGED_AGENT_VAULT_KEYS")
	require.Equal(t, "vault_encryption_not_configured", objectOf(t, apiErr.RawJSON())["error"].(map[string]any)["details"].(map[string]any)["error_code"])
	page, err := e.client.Beta.Vaults.Credentials.List(ctx, v.ID, anthropic.BetaVaultCredentialListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Data)
}
