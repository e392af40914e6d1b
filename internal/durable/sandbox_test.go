package durable

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
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

// TestTeardownOfAForeignProviderFinishesTheDelete: a binding made by a provider this
// deployment does not run (it switched providers) has nothing here to destroy. The teardown
// must remove the binding and let the session's delete finish, in one attempt, instead of
// failing (which a controller's finalizer then started again every second, forever).
func TestTeardownOfAForeignProviderFinishesTheDelete(t *testing.T) {
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
	teardowns := 0
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "Teardown" {
			teardowns++
		}
	})
	finished := false
	env.OnActivity(acts.FinishDelete, mock.Anything, testSession).Return(func(context.Context, string) error {
		finished = true
		return nil
	})
	env.OnSignalExternalWorkflow(mock.Anything, WorkflowID(testSession), "", SignalWake, mock.Anything).Return(nil)
	env.ExecuteWorkflow(TeardownWorkflow, testSession)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 1, teardowns, "one attempt, no retries")
	require.True(t, finished, "the session's delete finishes")
	_, err = bindings.Binding(t.Context(), testSession)
	require.ErrorIs(t, err, sandbox.ErrNoBinding)
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
