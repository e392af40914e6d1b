package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInstallBinaryCopiesThisExecutable(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "managed-agents")
	require.NoError(t, InstallBinary(dest))
	self, err := os.Executable()
	require.NoError(t, err)
	want, err := os.ReadFile(self)
	require.NoError(t, err)
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, want, got)
	info, err := os.Stat(dest)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o555), info.Mode().Perm())
	require.NoError(t, InstallBinary(dest), "a restarted init container installs again")
	entries, err := os.ReadDir(filepath.Dir(dest))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")

	require.ErrorContains(t, InstallBinary("relative/path"), "not an absolute path")
}
