//go:build integration

package store

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type appendRecorder struct {
	mu    sync.Mutex
	types []string
}

func (r *appendRecorder) EventsAppended(types []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types = append(r.types, types...)
}

func (r *appendRecorder) ListenerReconnecting(string) {}

func (r *appendRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.types)
}

// Appended events are reported once they are committed: at once outside a transaction, at the
// commit inside one, and never for a transaction that rolled back.
func TestObserverSeesCommittedAppendsOnly(t *testing.T) {
	t.Parallel()
	rec := &appendRecorder{}
	st, err := Open(t.Context(), migratedURL(t), WithObserver(rec))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	f := newFixtureOn(t, st)
	sid := f.newSession(t)
	ctx := t.Context()

	_, err = st.AppendEvents(ctx, sid, []NewEvent{{Type: "user.message"}}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{"user.message"}, rec.seen())

	err = st.InTx(ctx, func(q *Queries) error {
		if _, err := q.AppendEvents(ctx, sid, []NewEvent{{Type: "session.status_running"}, {Type: "agent.message"}}, time.Now()); err != nil {
			return err
		}
		require.Equal(t, []string{"user.message"}, rec.seen(), "not before the commit")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"user.message", "session.status_running", "agent.message"}, rec.seen())

	rollback := errors.New("roll back")
	err = st.InTx(ctx, func(q *Queries) error {
		_, err := q.AppendEvents(ctx, sid, []NewEvent{{Type: "session.status_idle"}}, time.Now())
		require.NoError(t, err)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, []string{"user.message", "session.status_running", "agent.message"}, rec.seen(), "a rolled-back append is not reported")
}
