package sessions

import (
	"context"
	"time"
)

// Runner runs sessions' turns (the Temporal workflows). The service tells it when committed
// client events may need work; it is optional so the API can run without workers (events then
// stay queued).
type Runner interface {
	// Wake tells the session's run that new client events are committed, starting the run
	// if needed. interrupt asks it to cancel what is in flight.
	Wake(ctx context.Context, sessionID string, interrupt bool) error
	// Teardown destroys the session's sandbox and removes its binding, durably (retried until
	// it succeeds or ctx ends).
	Teardown(ctx context.Context, sessionID string) error
	// Forget tells a session's run that the session is gone, so it can end.
	Forget(ctx context.Context, sessionID string)
}

// SetRunner connects the service to the runner of session turns.
func (s *Service) SetRunner(r Runner) { s.runner = r }

// wake tells the runner about committed events. The events are already durable, so a failed
// wake-up is logged, retried briefly and then left: the client's next send wakes the run again.
func (s *Service) wake(ctx context.Context, sessionID string, interrupt bool) {
	if s.runner == nil {
		return
	}
	var err error
	for attempt, backoff := 0, 50*time.Millisecond; attempt < 3; attempt, backoff = attempt+1, backoff*4 {
		if err = s.runner.Wake(ctx, sessionID, interrupt); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	s.logger.ErrorContext(ctx, "could not wake the session's run; its events stay queued until the next send",
		"session_id", sessionID, "error", err)
}
