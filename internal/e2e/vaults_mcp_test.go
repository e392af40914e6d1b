//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
	"github.com/managed-agents/managed-agents/internal/secretbox"
)

// TestMCPCredentialsFromVaults: the worker sends each MCP server the token of the session's
// vault credential for its URL; an OAuth token the server refuses is refreshed at the token
// endpoint once and the call goes through.
func TestMCPCredentialsFromVaults(t *testing.T) {
	t.Parallel()
	gh := mcptest.Start(t, mcptest.WithBearer(func(tok string) bool { return tok == "static-secret-token" }))
	lin := mcptest.Start(t, mcptest.WithBearer(func(tok string) bool { return strings.HasPrefix(tok, "fresh-") }))
	var refreshes atomic.Int32
	tokenEndpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		if r.PostForm.Get("refresh_token") != "oauth-refresh-secret" || r.PostForm.Get("client_secret") != "oauth-client-secret" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		refreshes.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"fresh-1","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokenEndpoint.Close)

	e := newRunningEnv(t, func(c *app.Config) { c.VaultKeys = secretbox.NewSpec("e2e") }, allowLocalMCP)
	ctx := context.Background()
	vault, err := e.client.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "tokens"})
	require.NoError(t, err)
	_, err = e.client.Beta.Vaults.Credentials.New(ctx, vault.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			MCPServerURL: strings.ToUpper(gh.URL[:4]) + gh.URL[4:] + "/", Token: "static-secret-token"}}})
	require.NoError(t, err)
	_, err = e.client.Beta.Vaults.Credentials.New(ctx, vault.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{
			MCPServerURL: lin.URL, AccessToken: "oauth-access-secret", ExpiresAt: param.NewOpt(time.Now().Add(time.Hour)),
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "client-1", RefreshToken: "oauth-refresh-secret", TokenEndpoint: tokenEndpoint.URL,
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{
					OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostParam{ClientSecret: "oauth-client-secret"}}}}}})
	require.NoError(t, err)

	// A third server whose stored OAuth token has already expired: it is refreshed before the
	// server is contacted, so the server never sees the expired one.
	exp := mcptest.Start(t, mcptest.WithBearer(func(tok string) bool { return strings.HasPrefix(tok, "fresh-") }))
	_, err = e.client.Beta.Vaults.Credentials.New(ctx, vault.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{
			MCPServerURL: exp.URL, AccessToken: "expired-access-secret", ExpiresAt: param.NewOpt(time.Now().Add(-time.Hour)),
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "client-1", RefreshToken: "oauth-refresh-secret", TokenEndpoint: tokenEndpoint.URL,
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{
					OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostParam{ClientSecret: "oauth-client-secret"}}}}}})
	require.NoError(t, err)

	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "mcp", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "gh", URL: gh.URL}, {Name: "lin", URL: lin.URL}, {Name: "exp", URL: exp.URL}},
		Tools:      []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("gh", true), mcpToolset("lin", true), mcpToolset("exp", true)}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "vault-mcp"})
	require.NoError(t, err)
	sess, err := e.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: envr.ID, VaultIDs: []string{vault.ID}})
	require.NoError(t, err)
	f := &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}

	f.send(userMessage("/tool mcp__gh__echo {\"text\":\"from gh\"}\n/tool mcp__lin__echo {\"text\":\"from lin\"}"))
	evs := f.untilIdle()
	for _, ev := range evs {
		require.NotEqual(t, "session.error", ev.Type, "%s", ev.RawJSON())
	}
	require.Equal(t, "mcp__gh__echo: from gh\nmcp__lin__echo: from lin", messageText(find(t, evs, "agent.message")))
	require.Equal(t, 1, gh.Calls("echo"))
	require.Equal(t, 1, lin.Calls("echo"))
	require.EqualValues(t, 2, refreshes.Load(), "the refused token and the expired one were refreshed once each")
	require.NotEmpty(t, exp.Tokens())
	for _, tok := range exp.Tokens() {
		require.Equal(t, "fresh-1", tok, "the expired token is never sent")
	}
	require.Contains(t, gh.Tokens(), "static-secret-token")
	require.Equal(t, "oauth-access-secret", lin.Tokens()[0], "the stored token first")
	require.Equal(t, "fresh-1", lin.Tokens()[len(lin.Tokens())-1])

	// The refreshed expiry is visible; the new token is not.
	page, err := e.client.Beta.Vaults.Credentials.List(ctx, vault.ID, anthropic.BetaVaultCredentialListParams{})
	require.NoError(t, err)
	raw, err := json.Marshal(page.Data)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "fresh-1")
	requireNoSecrets(t, string(raw))

	// Events carry no token either.
	events, err := e.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt[int64](100)})
	require.NoError(t, err)
	for _, ev := range events.Data {
		requireNoSecrets(t, ev.RawJSON())
		require.NotContains(t, ev.RawJSON(), "fresh-1")
	}
}
