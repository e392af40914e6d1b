package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/managed-agents/managed-agents/internal/startstop"
)

// Backoff between attempts to bring back a child that died. The first wait keeps a child
// that dies at once from being restarted in a hot loop.
const (
	restartInitialBackoff = 500 * time.Millisecond
	restartMaxBackoff     = 30 * time.Second
)

// childWatch restarts one child process of dev (PostgreSQL, the Temporal dev server) whenever
// it dies, with backoff, until Stop. Until the child is back /readyz answers 503; the API
// and worker reconnect on their own (the database pool, LISTEN and the Temporal client all
// retry).
type childWatch struct {
	name    string
	exited  func() <-chan struct{}
	restart func(context.Context) error
	logger  *slog.Logger
	loop    startstop.Loop
}

// Start starts watching.
func (c *childWatch) Start(ctx context.Context) error {
	c.loop.Start(ctx, c.run)
	return nil
}

// Stop stops watching (and a restart in progress); stop the watch before the child.
func (c *childWatch) Stop() { c.loop.Stop() }

func (c *childWatch) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.exited():
		}
		for backoff := restartInitialBackoff; ; backoff = min(2*backoff, restartMaxBackoff) {
			c.logger.ErrorContext(ctx, c.name+" exited unexpectedly; restarting it", "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			err := c.restart(ctx)
			if err == nil {
				c.logger.InfoContext(ctx, "restarted "+c.name)
				break
			}
			if ctx.Err() != nil {
				return
			}
			c.logger.ErrorContext(ctx, "restart "+c.name+" failed", "error", err)
		}
	}
}
