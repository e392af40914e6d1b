package controllers

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkspacesMapping(t *testing.T) {
	w := &Workspaces{Fixed: map[string]string{"default": "wrkspc_dev"}}
	ws, err := w.For(context.Background(), "default")
	require.NoError(t, err)
	require.Equal(t, "wrkspc_dev", ws)

	_, err = w.For(context.Background(), "team-a")
	var nm ErrNamespaceNotMapped
	require.True(t, errors.As(err, &nm))
	require.Equal(t, "team-a", nm.Namespace)
	require.ErrorContains(t, err, "MANAGED_AGENT_CONTROLLER_WORKSPACES")
}
