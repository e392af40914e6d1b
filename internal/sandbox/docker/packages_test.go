package docker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvKeyCoversBaseAndPackagesOnly(t *testing.T) {
	t.Parallel()
	a := envKey("sha256:1", map[string][]string{"pip": {"a"}, "npm": {"b"}})
	require.Equal(t, a, envKey("sha256:1", map[string][]string{"npm": {"b"}, "pip": {"a"}}))
	require.NotEqual(t, a, envKey("sha256:2", map[string][]string{"pip": {"a"}, "npm": {"b"}}), "a rebuilt base")
	require.NotEqual(t, a, envKey("sha256:1", map[string][]string{"pip": {"a", "b"}}))
	require.NotEqual(t, envKey("x", map[string][]string{"pip": {"a b"}}), envKey("x", map[string][]string{"pip": {"a", "b"}}))
}
