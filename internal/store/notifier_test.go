//go:build integration

package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
)

// startNotifier runs a notifier for the test and returns once it listens and has finished
// the wake-everyone pass that follows every connect, so later wake-ups have a known cause.
func startNotifier(t *testing.T, st *Store) *Notifier {
	t.Helper()
	n := NewNotifier()
	l := NewListener(st.Pool(), discardLogger())
	require.NoError(t, l.Listen(TopicEvents, n))
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(l.Stop)
	select {
	case <-n.Ready():
	case <-time.After(waitFor):
		t.Fatal("notifier never started listening")
	}
	flush(t, st, n)
	return n
}

// flush sends a NOTIFY of its own and waits for the notifier to deliver it. PostgreSQL
// delivers notifications in commit order, so afterwards every wake-up committed before flush
// has reached its subscribers: what a channel holds then is all it will ever get from them.
// The NOTIFY is repeated until it arrives, because one sent while the notifier reconnects
// is lost.
func flush(t *testing.T, st *Store, n *Notifier) {
	t.Helper()
	marker := ids.New("flush_")
	ch, unsubscribe := n.Subscribe(marker)
	defer unsubscribe()
	deadline := time.After(waitFor)
	for {
		_, err := st.Pool().Exec(t.Context(), `SELECT pg_notify($1, $2)`, string(TopicEvents), marker+":0")
		require.NoError(t, err)
		select {
		case <-ch:
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the notifier never delivered a NOTIFY")
		}
	}
}

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func requireWoken(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return woken(ch) }, waitFor, 5*time.Millisecond, msg)
}

func appendOne(t *testing.T, q *Queries, sessionID string) {
	t.Helper()
	_, err := q.AppendEvents(t.Context(), sessionID, []NewEvent{{Type: "user.message"}}, time.Now())
	require.NoError(t, err)
}

func TestNotifierWakesOnCommitOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	sid := f.newSession(t)
	ch, unsubscribe := n.Subscribe(sid)
	defer unsubscribe()

	require.NoError(t, f.st.InTx(t.Context(), func(q *Queries) error {
		appendOne(t, q, sid)
		flush(t, f.st, n)
		require.False(t, woken(ch), "no wake-up before the append commits")
		return nil
	}))
	requireWoken(t, ch, "the commit wakes the subscriber")
}

func TestNotifierIgnoresRolledBackAppends(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	sid := f.newSession(t)
	ch, unsubscribe := n.Subscribe(sid)
	defer unsubscribe()

	errRollback := errors.New("rollback")
	err := f.st.InTx(t.Context(), func(q *Queries) error {
		appendOne(t, q, sid)
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	flush(t, f.st, n)
	require.False(t, woken(ch), "a rolled-back append wakes no one")
}

func TestNotifierCoalescesWakeUps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	sid := f.newSession(t)
	first, unsubFirst := n.Subscribe(sid)
	defer unsubFirst()
	second, unsubSecond := n.Subscribe(sid)
	defer unsubSecond()

	for range 3 {
		appendOne(t, f.st.Queries, sid)
	}
	flush(t, f.st, n)
	for name, ch := range map[string]<-chan struct{}{"first": first, "second": second} {
		require.Len(t, ch, 1, "%s subscriber: three commits leave one pending wake-up", name)
		<-ch
		require.False(t, woken(ch), "%s subscriber: nothing more is pending", name)
	}
}

func TestNotifierWakesOnlyTheSessionsSubscribers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	busy, quiet := f.newSession(t), f.newSession(t)
	busyCh, unsubBusy := n.Subscribe(busy)
	defer unsubBusy()
	quietCh, unsubQuiet := n.Subscribe(quiet)
	defer unsubQuiet()

	appendOne(t, f.st.Queries, busy)
	requireWoken(t, busyCh, "the session's subscriber is woken")
	flush(t, f.st, n)
	require.False(t, woken(quietCh), "another session's subscriber is not")
}

func TestNotifierUnsubscribe(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	sid := f.newSession(t)
	ch, unsubscribe := n.Subscribe(sid)
	unsubscribe()

	appendOne(t, f.st.Queries, sid)
	flush(t, f.st, n)
	require.False(t, woken(ch))
	n.mu.Lock()
	defer n.mu.Unlock()
	require.Empty(t, n.subs, "the last unsubscribe drops the session's entry")
}

func TestNotifierWakesOnDeleteSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	sid := f.newSession(t)
	ch, unsubscribe := n.Subscribe(sid)
	defer unsubscribe()

	require.NoError(t, f.st.DeleteSession(t.Context(), sid))
	requireWoken(t, ch, "a live stream learns its session is gone")
}

// Notifications sent while the LISTEN connection is down are lost, so after reconnecting
// the notifier wakes every subscriber to re-read its log.
func TestNotifierReconnectsAndWakesEveryone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := startNotifier(t, f.st)
	a, b := f.newSession(t), f.newSession(t)
	aCh, unsubA := n.Subscribe(a)
	defer unsubA()
	bCh, unsubB := n.Subscribe(b)
	defer unsubB()

	var killed int
	// Only this test's database: other tests' notifiers share the server.
	require.NoError(t, f.st.Pool().QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`).Scan(&killed))
	require.Equal(t, 1, killed, "the notifier holds one LISTEN connection")

	requireWoken(t, aCh, "a is woken after the reconnect")
	requireWoken(t, bCh, "b is woken after the reconnect")

	appendOne(t, f.st.Queries, a)
	requireWoken(t, aCh, "commits wake subscribers again after the reconnect")
	flush(t, f.st, n)
	require.False(t, woken(bCh), "and still only the session's own")
}
