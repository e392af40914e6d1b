package sandbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
)

// renamed is a local provider under another name, standing in for a second kind.
type renamed struct{ *local.Provider }

func (renamed) Name() string { return "other" }

func TestRegistryRoutesByTheProviderTheRefNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	def := local.New(t.TempDir())
	reg, err := sandbox.NewRegistry(def, renamed{local.New(t.TempDir())})
	require.NoError(t, err)
	require.Equal(t, def, reg.Default())

	ref, err := def.Create(ctx, sandbox.Spec{Name: "n"})
	require.NoError(t, err)
	_, err = reg.Attach(ctx, ref)
	require.NoError(t, err)

	_, err = reg.Attach(ctx, sandbox.Ref{Provider: "other", ExternalID: ref.ExternalID})
	require.Error(t, err, "routed to the other provider, which refuses a ref it did not make")
	require.NotErrorIs(t, err, sandbox.ErrUnknownProvider)

	for _, name := range []string{"docker", ""} {
		_, err = reg.Attach(ctx, sandbox.Ref{Provider: name, ExternalID: "x"})
		require.ErrorIs(t, err, sandbox.ErrUnknownProvider)
		err = reg.Destroy(ctx, sandbox.Ref{Provider: name, ExternalID: "x"})
		require.ErrorIs(t, err, sandbox.ErrUnknownProvider)
		require.ErrorContains(t, err, "this deployment runs local, other")
	}
	require.NoError(t, reg.Destroy(ctx, ref))
	_, err = def.Attach(ctx, ref)
	require.ErrorIs(t, err, sandbox.ErrGone)
}

func TestNewRegistryRefusesDuplicateNames(t *testing.T) {
	t.Parallel()
	_, err := sandbox.NewRegistry(local.New(t.TempDir()), local.New(t.TempDir()))
	require.ErrorContains(t, err, `provider "local" registered twice`)
	_, err = sandbox.NewRegistry(nil)
	require.Error(t, err)
}
