//go:build integration

package app

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/secretbox"
)

func TestRunVaultRekey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	keys := secretbox.NewSpec("k2") + "," + secretbox.NewSpec("k1")
	var out bytes.Buffer

	err := RunVaultRekey(ctx, Config{DatabaseURL: url, LogFormat: "text", LogLevel: "error"}, &out)
	require.ErrorContains(t, err, "MANAGED_AGENT_VAULT_KEYS is not set")
	err = RunVaultRekey(ctx, Config{DatabaseURL: url, VaultKeys: keys, LogFormat: "text", LogLevel: "error"}, &out)
	require.ErrorContains(t, err, "managed-agents migrate")

	require.NoError(t, RunMigrate(ctx, Config{DatabaseURL: url, LogFormat: "text", LogLevel: "error"}))
	require.NoError(t, RunVaultRekey(ctx, Config{DatabaseURL: url, VaultKeys: keys, LogFormat: "text", LogLevel: "error"}, &out))
	require.Equal(t, "resealed 0 vault credentials with key k2\n", out.String())
}
