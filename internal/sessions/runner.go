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

// wake tells the runner about committed events. The events are already durable, so the
// wake-up must not depend on the client staying connected (the request context); it is
// retried for a few seconds and then logged: the next wake-up of the session (any later send)
// finds the queued work, because every run starts from the log.
func (s *Service) wake(ctx context.Context, sessionID string, interrupt bool) {
	if s.runner == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	var err error
	for backoff := 50 * time.Millisecond; ; backoff = min(backoff*2, 2*time.Second) {
		if err = s.runner.Wake(ctx, sessionID, interrupt); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			s.logger.ErrorContext(ctx, "could not wake the session's run; its events stay queued until the session is woken again",
				"session_id", sessionID, "error", err)
			return
		case <-time.After(backoff):
		}
	}
}
