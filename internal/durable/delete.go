package durable

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/managed-agents/managed-agents/internal/turns"
)

// FinishDelete removes the session once Teardown destroyed and unbound its sandbox
// (turns.FinishDelete). A session whose delete never began is a permanent failure, not
// something a retry fixes.
func (a *Activities) FinishDelete(ctx context.Context, sessionID string) error {
	err := a.Turns.FinishDelete(ctx, sessionID)
	if errors.Is(err, turns.ErrNotFenced) {
		return temporal.NewNonRetryableApplicationError(err.Error(), "SessionNotFenced", nil)
	}
	return err
}
