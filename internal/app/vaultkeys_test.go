package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/secretbox"
)

func TestVaultKeysConfig(t *testing.T) {
	t.Parallel()
	good := secretbox.NewSpec("k2") + "," + secretbox.NewSpec("k1")
	c := FromLookup(Config{}, func(name string) (string, bool) {
		if name == "MANAGED_AGENT_VAULT_KEYS" {
			return good, true
		}
		return "", false
	})
	require.Equal(t, good, c.VaultKeys)
	require.NoError(t, c.Validate())
	kr, err := c.vaultKeys()
	require.NoError(t, err)
	require.Equal(t, "k2", kr.Primary())

	kr, err = Config{}.vaultKeys()
	require.NoError(t, err)
	require.True(t, kr.Empty())

	for _, bad := range []string{"k1", "k1:c2hvcnQ=", "k1:" + good[3:] + ",k1:" + good[3:]} {
		err := Config{VaultKeys: bad}.Validate()
		require.ErrorContains(t, err, "MANAGED_AGENT_VAULT_KEYS: ")
		require.ErrorContains(t, err, "id:base64key")
		require.NotContains(t, err.Error(), good[3:], "a key is never quoted")
	}
}

func TestDevVaultKeysAreGeneratedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{DataDir: dir}
	first, err := devVaultKeys(cfg)
	require.NoError(t, err)
	_, err = secretbox.Parse(first)
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir, "vault-keys"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, err := devVaultKeys(cfg)
	require.NoError(t, err)
	require.Equal(t, first, again, "a restart keeps the key")

	cfg.VaultKeys = secretbox.NewSpec("mine")
	set, err := devVaultKeys(cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.VaultKeys, set, "a configured keyring wins")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "vault-keys"), []byte("garbage\n"), 0o600))
	_, err = devVaultKeys(Config{DataDir: dir})
	require.ErrorContains(t, err, "vault-keys")
}
