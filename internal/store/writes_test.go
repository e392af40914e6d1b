//go:build integration

package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// TestWritesMatchWhatTheyQueue checks that what Writes returns and queues is what the log
// holds after the commit: the same events, seqs, deliveries and row as the one-statement calls
// would have left.
// flushModes are the two ways a transaction sends its queued writes: before its commit, or
// with it.
var flushModes = []struct {
	name  string
	flush func(*Writes, context.Context) error
}{
	{"flush", (*Writes).Flush},
	{"at commit", (*Writes).FlushAtCommit},
}

func TestWritesMatchWhatTheyQueue(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testWritesMatchWhatTheyQueue(t, mode.flush)
		})
	}
}

func testWritesMatchWhatTheyQueue(t *testing.T, flush func(*Writes, context.Context) error) {
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)
	queued, err := f.st.AppendEvents(ctx, sid, []NewEvent{
		{Type: wire.EventUserMessage, Body: json.RawMessage(`{"content":[{"type":"text","text":"one"}]}`)},
		{Type: wire.EventUserMessage, Body: json.RawMessage(`{"content":[{"type":"text","text":"two"}]}`)},
	}, time.Now())
	require.NoError(t, err)

	now := micros(time.Now())
	var running, idle []wire.Event
	var last int64
	err = f.st.InTx(ctx, func(q *Queries) error {
		rec, err := q.LockSession(ctx, sid)
		require.NoError(t, err)
		w := q.Writes(sid, rec.LastSeq)
		running = w.Append([]NewEvent{{Type: wire.EventSessionStatusRunning, Processed: true}}, now)
		w.Deliver([]string{queued[1].ID, queued[0].ID}, now)
		w.SetTurnWindow(TurnWindow{StartSeq: running[0].Seq, BaseUsage: json.RawMessage(`{"input_tokens":3}`)})
		idle = w.Append([]NewEvent{{Type: wire.EventSessionStatusIdle, Body: json.RawMessage(`{"stop_reason":{"type":"end_turn"}}`), Processed: true}}, now)
		rec.Status = wire.SessionStatusIdle
		w.UpdateSession(rec)
		last = w.LastSeq()
		return flush(w, ctx)
	})
	require.NoError(t, err)

	require.EqualValues(t, 3, running[0].Seq)
	require.EqualValues(t, 6, idle[0].Seq, "the two delivered events took 4 and 5")
	require.EqualValues(t, 6, last)
	stored, _, err := f.st.ListEvents(ctx, sid, EventListParams{Limit: 100})
	require.NoError(t, err)
	got := make([]string, len(stored))
	for i, ev := range stored {
		got[i] = ev.ID
		require.NotNil(t, ev.ProcessedAt, "%s is processed", ev.ID)
	}
	require.Equal(t, []string{running[0].ID, queued[1].ID, queued[0].ID, idle[0].ID}, got, "delivered in the order given")
	requireSameEvents(t, []wire.Event{running[0]}, stored[:1])
	requireSameEvents(t, idle, stored[3:])

	sess, err := f.st.GetSession(ctx, f.ws, sid, false)
	require.NoError(t, err)
	require.EqualValues(t, 6, sess.LastSeq)
	require.Equal(t, wire.SessionStatusIdle, sess.Status)
	win, err := f.st.GetTurnWindow(ctx, sid)
	require.NoError(t, err)
	require.EqualValues(t, 3, win.StartSeq)
	require.JSONEq(t, `{"input_tokens":3}`, string(win.BaseUsage))
}

// TestWritesRefuseAnUnexpectedLog checks that queued writes fail, and write nothing, when the
// log is not where the caller read it (it did not hold the row lock), or a delivery finds an
// event that is not queued.
func TestWritesRefuseAnUnexpectedLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	// Each session's log: a delivered message (seq 2, its first seq 1 unused), then a
	// queued one (seq 3).
	tests := []struct {
		name    string
		lastSeq int64 // what the writer believes
		write   func(w *Writes, delivered, queued string)
		want    string
	}{
		{name: "append after a seq it did not see", lastSeq: 1, want: "not locked", write: func(w *Writes, _, _ string) {
			w.Append([]NewEvent{{Type: wire.EventSessionStatusRunning, Processed: true}}, time.Now())
		}},
		{name: "deliver after a seq it did not see", lastSeq: 2, want: "not locked", write: func(w *Writes, _, queued string) {
			w.Deliver([]string{queued}, time.Now())
		}},
		{name: "deliver an event twice", lastSeq: 3, want: "were queued", write: func(w *Writes, delivered, _ string) {
			w.Deliver([]string{delivered}, time.Now())
		}},
	}
	for _, tt := range tests {
		for _, mode := range flushModes {
			t.Run(tt.name+", "+mode.name, func(t *testing.T) {
				sid := f.newSession(t)
				msg := []NewEvent{{Type: wire.EventUserMessage, Body: json.RawMessage(`{"content":[]}`)}}
				first, err := f.st.AppendEvents(ctx, sid, msg, time.Now())
				require.NoError(t, err)
				require.NoError(t, f.st.InTx(ctx, func(q *Queries) error {
					w := q.Writes(sid, 1)
					w.Deliver([]string{first[0].ID}, time.Now())
					return w.Flush(ctx)
				}))
				second, err := f.st.AppendEvents(ctx, sid, msg, time.Now())
				require.NoError(t, err)
				err = f.st.InTx(ctx, func(q *Queries) error {
					w := q.Writes(sid, tt.lastSeq)
					tt.write(w, first[0].ID, second[0].ID)
					return mode.flush(w, ctx)
				})
				require.ErrorContains(t, err, tt.want)
				var n, queued int
				require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE processed_at IS NULL) FROM events WHERE session_id = $1`, sid).Scan(&n, &queued))
				require.Equal(t, 2, n, "nothing was appended")
				require.Equal(t, 1, queued, "nothing was delivered")
				var last int64
				require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT last_seq FROM sessions WHERE id = $1`, sid).Scan(&last))
				require.EqualValues(t, 3, last)
			})
		}
	}
}

// TestInTxEndsEveryWay checks the transaction InTx runs, whose BEGIN goes with its first
// batch and whose final writes go with its COMMIT: it commits what it should, rolls back
// everything on any failure (an error of fn, a failed final write, a failed statement fn
// ignored), and leaves its connection usable.
func TestInTxEndsEveryWay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	msg := []NewEvent{{Type: wire.EventUserMessage, Body: json.RawMessage(`{"content":[]}`), Processed: true}}
	errFn := errors.New("fn failed")
	tests := []struct {
		name string
		fn   func(q *Queries, sid string) error
		want error // nil: committed
		// wantText, with want nil, is an error the commit reports.
		wantText string
	}{
		{name: "batch first, writes at commit", fn: func(q *Queries, sid string) error {
			w, err := appendToLockedTurn(ctx, q, sid, msg)
			if err != nil {
				return err
			}
			return w.FlushAtCommit(ctx)
		}},
		{name: "statement first, writes before commit", fn: func(q *Queries, sid string) error {
			rec, err := q.LockSession(ctx, sid)
			if err != nil {
				return err
			}
			w := q.Writes(sid, rec.LastSeq)
			w.Append(msg, time.Now())
			return w.Flush(ctx)
		}},
		{name: "two writers: the second flushes at once", fn: func(q *Queries, sid string) error {
			w, err := appendToLockedTurn(ctx, q, sid, msg)
			if err != nil {
				return err
			}
			if err := w.FlushAtCommit(ctx); err != nil {
				return err
			}
			// Sent at once, while w's writes wait for the commit: both take the same seqs,
			// so the second to go fails and takes the transaction with it.
			w2 := q.Writes(sid, w.LastSeq()-int64(len(msg)))
			w2.Append(msg, time.Now())
			return w2.FlushAtCommit(ctx)
		}, wantText: "not locked"},
		{name: "fn fails after a batch", want: errFn, fn: func(q *Queries, sid string) error {
			if _, err := q.LockTurn(ctx, sid); err != nil {
				return err
			}
			if _, err := q.AppendEvents(ctx, sid, msg, time.Now()); err != nil {
				return err
			}
			return errFn
		}},
		{name: "fn fails with writes handed to the commit", want: errFn, fn: func(q *Queries, sid string) error {
			w, err := appendToLockedTurn(ctx, q, sid, msg)
			if err != nil {
				return err
			}
			if err := w.FlushAtCommit(ctx); err != nil {
				return err
			}
			return errFn
		}},
		{name: "a failed statement fn ignored", want: pgx.ErrTxCommitRollback, fn: func(q *Queries, sid string) error {
			if _, err := q.AppendEvents(ctx, sid, msg, time.Now()); err != nil {
				return err
			}
			_, _ = q.db.Exec(ctx, `SELECT 1/0`)
			return nil
		}},
		{name: "a failed statement fn ignored, writes at commit", wantText: "current transaction is aborted", fn: func(q *Queries, sid string) error {
			rec, err := q.LockSession(ctx, sid)
			if err != nil {
				return err
			}
			_, _ = q.db.Exec(ctx, `SELECT 1/0`)
			w := q.Writes(sid, rec.LastSeq)
			w.Append(msg, time.Now())
			return w.FlushAtCommit(ctx)
		}},
		{name: "nothing sent", fn: func(*Queries, string) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sid := f.newSession(t)
			err := f.st.InTx(ctx, func(q *Queries) error { return tt.fn(q, sid) })
			var n int
			require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE session_id = $1`, sid).Scan(&n))
			switch {
			case tt.want != nil:
				require.ErrorIs(t, err, tt.want)
				require.Zero(t, n, "rolled back")
			case tt.wantText != "":
				require.ErrorContains(t, err, tt.wantText)
				require.Zero(t, n, "rolled back")
			default:
				require.NoError(t, err)
				if tt.name != "nothing sent" {
					require.Equal(t, 1, n, "committed")
				}
			}
			// Every connection is back in the pool, idle and usable.
			for range 2 * int(f.st.Pool().Config().MaxConns) {
				require.NoError(t, f.st.InTx(ctx, func(q *Queries) error {
					_, err := q.LockTurn(ctx, sid)
					return err
				}))
			}
		})
	}
}

func TestLockSessionWithEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)
	other, err := f.st.CreateWorkspace(ctx, "other")
	require.NoError(t, err)
	tests := []struct {
		name, workspace, session string
		found                    bool
	}{
		{name: "found", workspace: f.ws, session: sid, found: true},
		{name: "unknown session", workspace: f.ws, session: "sesn_unknown"},
		{name: "another workspace's session", workspace: other, session: sid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.st.InTx(ctx, func(q *Queries) error {
				sess, env, err := q.LockSessionWithEnvironment(ctx, tt.workspace, tt.session)
				if err != nil {
					return err
				}
				require.Equal(t, sid, sess.ID)
				require.Equal(t, f.envID, env.ID)
				require.Equal(t, sess.EnvironmentID, env.ID)
				return nil
			})
			if tt.found {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrNotFound)
			}
		})
	}
}

// appendToLockedTurn locks sid's turn and queues msg after it, as Advance does; the caller
// flushes.
func appendToLockedTurn(ctx context.Context, q *Queries, sid string, msg []NewEvent) (*Writes, error) {
	c, err := q.LockTurn(ctx, sid)
	if err != nil {
		return nil, err
	}
	w := q.Writes(sid, c.Session.LastSeq)
	w.Append(msg, time.Now())
	return w, nil
}

// sends counts the statements and batches a connection sends: one round trip each.
type sends struct{ n atomic.Int64 }

func (s *sends) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *sends) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *sends) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *sends) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *sends) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestInTxRoundTrips counts what a transaction sends: its BEGIN goes with its first batch and
// its final writes with its COMMIT, so a locked read and the writes decided from it (how a
// turn is opened and closed, and an event posted) are two round trips.
func TestInTxRoundTrips(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	cfg := f.st.Pool().Config()
	cfg.MaxConns = 1 // one connection, whose statement cache the first run warms
	counter := &sends{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := &Store{pool: pool, obs: nopObserver{}}
	msg := []NewEvent{{Type: wire.EventUserMessage, Body: json.RawMessage(`{"content":[]}`), Processed: true}}
	tests := []struct {
		name string
		fn   func(q *Queries, sid string) error
		want int64
	}{
		{"locked turn read, writes with the commit", func(q *Queries, sid string) error {
			w, err := appendToLockedTurn(ctx, q, sid, msg)
			if err != nil {
				return err
			}
			return w.FlushAtCommit(ctx)
		}, 2},
		{"locked session and environment, append with the commit", func(q *Queries, sid string) error {
			rec, _, err := q.LockSessionWithEnvironment(ctx, f.ws, sid)
			if err != nil {
				return err
			}
			w := q.Writes(sid, rec.LastSeq)
			w.Append(msg, time.Now())
			return w.FlushAtCommit(ctx)
		}, 2},
		{"a read with nothing to write", func(q *Queries, sid string) error {
			_, err := q.LockTurn(ctx, sid)
			return err
		}, 2},
		{"a single statement first: BEGIN alone", func(q *Queries, sid string) error {
			rec, err := q.LockSession(ctx, sid)
			if err != nil {
				return err
			}
			w := q.Writes(sid, rec.LastSeq)
			w.Append(msg, time.Now())
			return w.FlushAtCommit(ctx)
		}, 3},
	}
	for _, tt := range tests {
		sid := f.newSession(t)
		require.NoError(t, st.InTx(ctx, func(q *Queries) error { return tt.fn(q, sid) }), tt.name)
		before := counter.n.Load()
		require.NoError(t, st.InTx(ctx, func(q *Queries) error { return tt.fn(q, sid) }), tt.name)
		require.Equal(t, tt.want, counter.n.Load()-before, tt.name)
	}
}
