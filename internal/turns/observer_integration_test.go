//go:build integration

package turns

import (
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

type turnRecorder struct {
	mu       sync.Mutex
	started  int
	finished []string
}

func (r *turnRecorder) TurnStarted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started++
}

func (r *turnRecorder) TurnFinished(stop string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, stop)
}

// Advance reports the turns it opens and closes, once each, and nothing when it has nothing
// to do.
func TestObserverSeesOpenedAndClosedTurns(t *testing.T) {
	t.Parallel()
	rec := &turnRecorder{}
	e := newEngine(t)
	e.svc = New(e.st, slog.New(slog.NewTextHandler(io.Discard, nil)), WithObserver(rec))
	e.turn(t, 10, 0)
	e.turn(t, 10, 0)
	_, err := e.svc.Advance(t.Context(), e.session)
	require.NoError(t, err)
	require.Equal(t, 2, rec.started)
	require.Equal(t, []string{wire.StopEndTurn, wire.StopEndTurn}, rec.finished)
}
