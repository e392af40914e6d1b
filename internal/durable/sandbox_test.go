package durable

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
)

type noSpecs struct{}

func (noSpecs) SandboxSpec(_ context.Context, sessionID string) (sandbox.Spec, error) {
	return sandbox.Spec{Name: sandbox.NameFor(sessionID), SessionID: sessionID}, nil
}

func sandboxActivities(t *testing.T, bindings sandbox.BindingStore) *Activities {
	t.Helper()
	reg, err := sandbox.NewRegistry(local.New(t.TempDir()))
	require.NoError(t, err)
	return &Activities{Sandboxes: sandbox.NewManager(reg, bindings, noSpecs{}), Logger: slog.New(slog.DiscardHandler)}
}

// TestTeardownOfAForeignProviderFailsForGood: a binding made by a provider this deployment
// does not run cannot be destroyed here; the teardown must fail once, saying why, instead of
// being retried forever (which made the session delete hang).
func TestTeardownOfAForeignProviderFailsForGood(t *testing.T) {
	t.Parallel()
	bindings := sandboxtest.NewBindings()
	_, err := bindings.InsertBinding(t.Context(), sandbox.Binding{SessionID: testSession, Name: "n", State: sandbox.BindingReady,
		Ref: sandbox.Ref{Provider: "docker", ExternalID: "c0ffee"}})
	require.NoError(t, err)
	acts := sandboxActivities(t, bindings)

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger())
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.RegisterActivity(acts)
	env.ExecuteWorkflow(TeardownWorkflow, testSession)
	require.True(t, env.IsWorkflowCompleted())
	err = env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, errTypeSandboxProvider, appErr.Type())
	require.Contains(t, appErr.Error(), `unknown sandbox provider "docker"`)
	_, err = bindings.Binding(t.Context(), testSession)
	require.NoError(t, err, "the binding is kept: its sandbox was not destroyed")
}

func TestAcquireOfAGoneSandboxFailsForGood(t *testing.T) {
	t.Parallel()
	bindings := sandboxtest.NewBindings()
	acts := sandboxActivities(t, bindings)
	require.NoError(t, acts.AcquireSandbox(t.Context(), testSession))
	bound, err := acts.hasSandbox(t.Context(), testSession)
	require.NoError(t, err)
	require.True(t, bound)

	b, err := bindings.Binding(t.Context(), testSession)
	require.NoError(t, err)
	require.NoError(t, bindings.DeleteBinding(t.Context(), testSession))
	b.Ref.ExternalID = "sess-destroyed-long-ago"
	_, err = bindings.InsertBinding(t.Context(), b)
	require.NoError(t, err)
	fresh := &Activities{Sandboxes: sandbox.NewManager(mustRegistry(t), bindings, noSpecs{}), Logger: slog.New(slog.DiscardHandler)}

	err = fresh.AcquireSandbox(t.Context(), testSession)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable())
	require.Equal(t, errTypeSandboxGone, appErr.Type())
	require.Contains(t, appErr.Error(), "no longer exists")
}

func mustRegistry(t *testing.T) *sandbox.Registry {
	t.Helper()
	reg, err := sandbox.NewRegistry(local.New(t.TempDir()))
	require.NoError(t, err)
	return reg
}
