package turns

import (
	"context"
	"errors"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/store"
)

// ErrNotFenced: FinishDelete was asked to remove a session whose delete never began.
var ErrNotFenced = errors.New("session was not fenced for deletion")

// FinishDelete is the second half of deleting a session that has a sandbox: the teardown runs
// it once the sandbox is destroyed and unbound. It removes the row and, by cascade, the log,
// and wakes live streams so they end with session.deleted. The first half
// (sessions.BeginDelete) fenced the session by archiving it, so no turn can start meanwhile; a
// session that is not archived is refused rather than deleted under a running turn. A session
// already gone is success, so a retried finish is harmless.
func (s *Service) FinishDelete(ctx context.Context, sessionID string) error {
	return s.store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.LockSession(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.ArchivedAt == nil {
			return fmt.Errorf("finish deleting session %s: %w", sessionID, ErrNotFenced)
		}
		if err := q.DeleteSession(ctx, sessionID); err != nil {
			return fmt.Errorf("finish deleting session %s: %w", sessionID, err)
		}
		return nil
	})
}
