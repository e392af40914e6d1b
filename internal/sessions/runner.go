package sessions

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// Runner runs sessions' turns (the Temporal workflows). The service tells it when committed
// client events may need work; it is optional so the API can run without workers (events then
// stay queued).
type Runner interface {
	// Wake tells the session's run that new client events are committed, starting the run
	// if needed. interrupt asks it to cancel what is in flight.
	Wake(ctx context.Context, sessionID string, interrupt bool) error
	// StartTeardown starts the durable delete of a fenced session with a sandbox: destroy the
	// sandbox, remove its binding, then remove the session (turns.FinishDelete). It returns
	// once the teardown is started; starting it again joins the one that runs.
	StartTeardown(ctx context.Context, sessionID string) error
	// Teardown is StartTeardown and waits for the teardown to finish (or ctx to end).
	Teardown(ctx context.Context, sessionID string) error
	// Forget tells a session's run that the session is gone, so it can end.
	Forget(ctx context.Context, sessionID string)
}

// Wakes returns the service's background waker. Whoever builds the service starts it (it
// also starts on first use) and stops it at shutdown.
func (s *Service) Wakes() *Waker {
	s.wakesOnce.Do(func() { s.wakes = newWaker(s.logger, wakesInFlight, wakeRetryFor) })
	return s.wakes
}

// wake tells the runner about committed events, in the background: the events are already
// durable, so the request that committed them is answered without waiting for Temporal (which
// may be slow or down). The wake-up is retried for a while and then left to the workers'
// sweep; every run starts from the log, so a later wake-up finds the queued work. The
// wake-up keeps the trace context of ctx's span (the request's), so the turn it starts
// continues that trace.
func (s *Service) wake(ctx context.Context, sessionID string, interrupt bool) {
	if s.runner == nil {
		return
	}
	s.Wakes().enqueue(s.runner, sessionID, interrupt, trace.SpanContextFromContext(ctx))
}
