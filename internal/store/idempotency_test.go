//go:build integration

package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
)

func TestSessionExternalKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first, second := f.newSession(t), f.newSession(t)
	require.NoError(t, f.st.SetSessionExternalKey(ctx, first, "uid-1", "hash-1"))

	err := f.st.SetSessionExternalKey(ctx, second, "uid-1", "hash-2")
	require.ErrorIs(t, err, ErrExternalKeyTaken)
	require.ErrorIs(t, err, ErrDuplicate)

	rec, hash, err := f.st.SessionByExternalKey(ctx, f.ws, "uid-1")
	require.NoError(t, err)
	require.Equal(t, first, rec.ID)
	require.Equal(t, "hash-1", hash)
	_, _, err = f.st.SessionByExternalKey(ctx, f.ws, "uid-unknown")
	require.ErrorIs(t, err, ErrNotFound)

	// Keys are per workspace.
	other := newFixtureOn(t, f.st)
	theirs := other.newSession(t)
	require.NoError(t, f.st.SetSessionExternalKey(ctx, theirs, "uid-1", "hash-3"))
	_, _, err = f.st.SessionByExternalKey(ctx, other.ws, "uid-1")
	require.NoError(t, err)
}

// TestSessionExternalKeyRace: of two transactions that create a session with one key, the
// second waits on the unique index and loses when the first commits.
func TestSessionExternalKeyRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	holding, commit := make(chan struct{}), make(chan struct{})
	winner := make(chan error, 1)
	go func() {
		winner <- f.st.InTx(ctx, func(q *Queries) error {
			id := ids.New(ids.Session)
			if err := q.InsertSession(ctx, f.sessionRecord(id, time.Now())); err != nil {
				return err
			}
			if err := q.SetSessionExternalKey(ctx, id, "uid-race", "h"); err != nil {
				return err
			}
			close(holding)
			<-commit
			return nil
		})
	}()
	<-holding
	loser := make(chan error, 1)
	go func() {
		loser <- f.st.InTx(ctx, func(q *Queries) error {
			id := ids.New(ids.Session)
			if err := q.InsertSession(ctx, f.sessionRecord(id, time.Now())); err != nil {
				return err
			}
			return q.SetSessionExternalKey(ctx, id, "uid-race", "h")
		})
	}()
	select {
	case err := <-loser:
		t.Fatalf("the second transaction did not wait for the first: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(commit)
	require.NoError(t, <-winner)
	require.ErrorIs(t, <-loser, ErrExternalKeyTaken)
	var n int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM sessions WHERE workspace_id = $1`, f.ws).Scan(&n))
	require.Equal(t, 1, n, "the loser's session rolled back")
}

func TestEventSends(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sess := f.newSession(t)
	now := micros(time.Now())
	send := EventSend{SessionID: sess, Key: "k", RequestHash: "h", Response: json.RawMessage(`[{"id":"sevt_1"}]`), CreatedAt: now}
	require.NoError(t, f.st.InsertEventSend(ctx, send))
	require.ErrorIs(t, f.st.InsertEventSend(ctx, send), ErrDuplicate)

	got, err := f.st.GetEventSend(ctx, sess, "k")
	require.NoError(t, err)
	require.Equal(t, "h", got.RequestHash)
	require.JSONEq(t, `[{"id":"sevt_1"}]`, string(got.Response))
	require.True(t, now.Equal(got.CreatedAt))
	_, err = f.st.GetEventSend(ctx, sess, "other")
	require.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, f.st.DeleteSession(ctx, sess))
	_, err = f.st.GetEventSend(ctx, sess, "k")
	require.ErrorIs(t, err, ErrNotFound, "a session's sends go with it")
}
