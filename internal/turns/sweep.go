package turns

import (
	"context"
	"fmt"
)

// Waker wakes a session's run (the durable runner).
type Waker interface {
	Wake(ctx context.Context, sessionID string, interrupt bool) error
}

// sweepBatch bounds one sweep; a larger backlog is picked up by the next sweep.
const sweepBatch = 1000

// WakeStale wakes the run of every session that may have work its run does not know about —
// events committed while Temporal was unreachable, a wake-up lost with a crashed API process.
// Workers call it at start and periodically. It returns how many sessions it woke.
func (s *Service) WakeStale(ctx context.Context, w Waker) (int, error) {
	ids, err := s.store.SessionsNeedingRun(ctx, sweepBatch)
	if err != nil {
		return 0, err
	}
	woken := 0
	for _, id := range ids {
		if err := w.Wake(ctx, id, false); err != nil {
			return woken, fmt.Errorf("wake session %s: %w", id, err)
		}
		woken++
	}
	return woken, nil
}
