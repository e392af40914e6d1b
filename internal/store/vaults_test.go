//go:build integration

package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
)

func (f fixture) newVault(t *testing.T) string {
	t.Helper()
	id := ids.New(ids.Vault)
	require.NoError(t, f.st.InsertVault(context.Background(), VaultRecord{ID: id, WorkspaceID: f.ws, DisplayName: "v", CreatedAt: micros(time.Now())}))
	return id
}

func mcpCredential(vaultID, url string) CredentialRecord {
	return CredentialRecord{ID: ids.New(ids.Credential), VaultID: vaultID, AuthType: "static_bearer", MatchURL: &url,
		Auth: json.RawMessage(`{"type":"static_bearer"}`), Sealed: []byte{1, 2}, CreatedAt: micros(time.Now())}
}

func TestVaultsAreWorkspaceScoped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	other := newFixtureOn(t, f.st)
	v := f.newVault(t)
	c := mcpCredential(v, "https://mcp.example.com")
	require.NoError(t, f.st.InsertCredential(ctx, c))

	got, err := f.st.GetVault(ctx, f.ws, v, false)
	require.NoError(t, err)
	require.Equal(t, map[string]string{}, got.Metadata)
	_, err = f.st.GetVault(ctx, other.ws, v, false)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = f.st.GetCredential(ctx, other.ws, v, c.ID, false)
	require.ErrorIs(t, err, ErrNotFound)
	gc, err := f.st.GetCredential(ctx, f.ws, v, c.ID, true)
	require.NoError(t, err)
	require.Equal(t, c.Sealed, gc.Sealed)
	require.Equal(t, "https://mcp.example.com", *gc.MatchURL)

	usable, err := other.st.UsableVaults(ctx, other.ws, []string{v})
	require.NoError(t, err)
	require.Empty(t, usable)
	_, err = f.st.MatchingCredential(ctx, other.ws, []string{v}, "https://mcp.example.com", false)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestOneActiveCredentialPerServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	v := f.newVault(t)
	first := mcpCredential(v, "https://mcp.example.com")
	require.NoError(t, f.st.InsertCredential(ctx, first))
	require.ErrorIs(t, f.st.InsertCredential(ctx, mcpCredential(v, "https://mcp.example.com")), ErrDuplicate)
	// Another vault may hold one; environment variables have no URL.
	require.NoError(t, f.st.InsertCredential(ctx, mcpCredential(f.newVault(t), "https://mcp.example.com")))
	for range 2 {
		require.NoError(t, f.st.InsertCredential(ctx, CredentialRecord{ID: ids.New(ids.Credential), VaultID: v, AuthType: "environment_variable",
			Auth: json.RawMessage(`{}`), Sealed: []byte{1}, CreatedAt: time.Now()}))
	}
	n, err := f.st.CountActiveCredentials(ctx, v)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	// Archiving frees the URL.
	now := micros(time.Now())
	first.ArchivedAt, first.UpdatedAt = &now, now
	require.NoError(t, f.st.UpdateCredential(ctx, first))
	require.NoError(t, f.st.InsertCredential(ctx, mcpCredential(v, "https://mcp.example.com")))
}

func TestMatchingCredentialFollowsVaultOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	v1, v2, v3 := f.newVault(t), f.newVault(t), f.newVault(t)
	c2, c3 := mcpCredential(v2, "https://m"), mcpCredential(v3, "https://m")
	require.NoError(t, f.st.InsertCredential(ctx, c3))
	require.NoError(t, f.st.InsertCredential(ctx, c2))

	got, err := f.st.MatchingCredential(ctx, f.ws, []string{v1, v3, v2}, "https://m", false)
	require.NoError(t, err)
	require.Equal(t, c3.ID, got.ID)
	got, err = f.st.MatchingCredential(ctx, f.ws, []string{v2, v3}, "https://m", true)
	require.NoError(t, err)
	require.Equal(t, c2.ID, got.ID)

	// An archived vault is skipped.
	rec, err := f.st.GetVault(ctx, f.ws, v2, false)
	require.NoError(t, err)
	now := micros(time.Now())
	rec.ArchivedAt = &now
	require.NoError(t, f.st.UpdateVault(ctx, rec))
	got, err = f.st.MatchingCredential(ctx, f.ws, []string{v2, v3}, "https://m", false)
	require.NoError(t, err)
	require.Equal(t, c3.ID, got.ID)
	_, err = f.st.SessionCredential(ctx, f.ws, []string{v2, v3}, c2.ID, false)
	require.ErrorIs(t, err, ErrNotFound)

	// Deleting a vault deletes its credentials.
	require.NoError(t, f.st.DeleteVault(ctx, v3))
	_, err = f.st.MatchingCredential(ctx, f.ws, []string{v3}, "https://m", false)
	require.ErrorIs(t, err, ErrNotFound)
	var n int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM vault_credentials WHERE vault_id = $1`, v3).Scan(&n))
	require.Zero(t, n)
}

func TestSessionVaultIDsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	plain := f.newSession(t)
	rec, err := f.st.GetSession(ctx, f.ws, plain, false)
	require.NoError(t, err)
	require.Equal(t, []string{}, rec.VaultIDs)

	withVaults := f.sessionRecord(ids.New(ids.Session), time.Now())
	withVaults.VaultIDs = []string{"vlt_b", "vlt_a"}
	require.NoError(t, f.st.InsertSession(ctx, withVaults))
	ws, vaults, err := f.st.SessionVaults(ctx, withVaults.ID)
	require.NoError(t, err)
	require.Equal(t, f.ws, ws)
	require.Equal(t, []string{"vlt_b", "vlt_a"}, vaults)
	_, _, err = f.st.SessionVaults(ctx, "sesn_missing")
	require.ErrorIs(t, err, ErrNotFound)
}
