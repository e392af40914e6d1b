package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
)

// setupFails is a provider whose sandboxes cannot be set up, as docker's when an
// environment's packages fail to install.
type setupFails struct {
	sandbox.Provider
	creates int
}

func (p *setupFails) Create(context.Context, sandbox.Spec) (sandbox.Ref, error) {
	p.creates++
	return sandbox.Ref{}, fmt.Errorf("create docker sandbox ma-1: %w: the pip installer exited with status 1; its output ends with:\nERROR: No matching distribution found for pandas==99", sandbox.ErrSetup)
}

// A failed setup ends the acquisition for good, and the session.error message (the
// application error's message, failureMessage) carries the installer's output.
func TestAcquireWhoseSetupFailsFailsForGoodWithTheOutput(t *testing.T) {
	t.Parallel()
	p := &setupFails{Provider: local.New(t.TempDir())}
	reg, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	acts := &Activities{Sandboxes: sandbox.NewManager(reg, sandboxtest.NewBindings(), noSpecs{}), Logger: slog.New(slog.DiscardHandler)}

	err = acts.AcquireSandbox(t.Context(), testSession)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, appErr.NonRetryable(), "the same install would fail again")
	require.Contains(t, failureMessage(err), "ERROR: No matching distribution found for pandas==99")
	require.Contains(t, failureMessage(err), "the pip installer exited with status 1")
	require.Equal(t, 1, p.creates)
}
