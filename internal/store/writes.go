package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Writes are a transaction's writes to one session's log and row, queued and sent together
// by Flush as one batch: one round trip instead of one per write. It is for a caller that
// holds the session's row lock (LockTurn, LockSession) and decides from what it read: with
// the lock nobody else appends, so the seqs an append or a delivery takes are known before
// they are sent (last_seq as read plus what was queued since), and the caller sees its own
// writes without reading them back. Every queued write checks on the server that its seqs
// came out as expected, so a caller that did not hold the lock fails the transaction
// instead of writing a log other than the one it decided on.
type Writes struct {
	q         *Queries
	sessionID string
	lastSeq   int64
	batch     pgx.Batch
	types     []string
}

// Writes starts queuing writes to sessionID, whose last_seq the caller read under the
// session's row lock.
func (q *Queries) Writes(sessionID string, lastSeq int64) *Writes {
	return &Writes{q: q, sessionID: sessionID, lastSeq: lastSeq}
}

// LastSeq is the session's last_seq once the queued writes are applied.
func (w *Writes) LastSeq() int64 { return w.lastSeq }

// Append queues AppendEvents and returns the events as it will have appended them.
func (w *Writes) Append(evs []NewEvent, now time.Time) []wire.Event {
	if len(evs) == 0 {
		return nil
	}
	a := prepareAppend(w.sessionID, evs, now, false)
	w.lastSeq += int64(len(evs))
	a.number(w.lastSeq)
	want := w.lastSeq
	// The check runs on the server (appendExpectSQL): the batch may end with the COMMIT.
	w.batch.Queue(appendExpectSQL, append(a.args, want)...).Exec(func(pgconn.CommandTag) error { return nil })
	w.types = append(w.types, a.types...)
	return a.out
}

// Deliver queues the delivery of queued client events (deliverSQL): they become processed
// and move to the seqs after LastSeq, in the order given.
func (w *Writes) Deliver(eventIDs []string, now time.Time) {
	if len(eventIDs) == 0 {
		return
	}
	w.lastSeq += int64(len(eventIDs))
	want := w.lastSeq
	// The checks run on the server (deliverSQL): the batch may end with the COMMIT.
	w.batch.Queue(deliverSQL, w.sessionID, len(eventIDs), eventIDs, now, string(TopicEvents), want).
		Exec(func(pgconn.CommandTag) error { return nil })
}

// UpdateSession queues UpdateSession of r.
func (w *Writes) UpdateSession(r SessionRecord) {
	w.batch.Queue(updateSessionSQL, updateSessionArgs(r)...).Exec(func(pgconn.CommandTag) error { return nil })
}

// MarkResuming queues marking the session as resumed by a client's answer: until a worker
// moves it on from its current stop reason, ActiveSessions counts it (migration 00012).
func (w *Writes) MarkResuming() {
	w.batch.Queue(`UPDATE sessions SET resuming_from = stop_reason WHERE id = $1`, w.sessionID).
		Exec(func(pgconn.CommandTag) error { return nil })
}

// SetTurnWindow queues recording that a new turn of the session starts at win.StartSeq.
func (w *Writes) SetTurnWindow(win TurnWindow) {
	w.batch.Queue(setTurnWindowSQL, w.sessionID, win.StartSeq, nullJSON(win.BaseUsage)).Exec(func(pgconn.CommandTag) error { return nil })
}

// Flush sends the queued writes as one batch and waits for them; with none queued it does
// nothing. A failed write fails the batch, and the caller's transaction with it.
func (w *Writes) Flush(ctx context.Context) error {
	if w.batch.Len() == 0 {
		return nil
	}
	err := w.q.db.SendBatch(ctx, &w.batch).Close()
	if err != nil {
		w.batch = pgx.Batch{}
		return fmt.Errorf("write session %s: %w", w.sessionID, classify(err))
	}
	w.done()
	return nil
}

// FlushAtCommit hands the queued writes to the transaction, which sends them with its
// COMMIT in one round trip (InTx); the caller then reads nothing more and ends its
// transaction function. A failed write fails the commit, and InTx returns its error as
// Flush would. Outside a transaction, or when the transaction already holds writes for its
// commit, it is Flush.
func (w *Writes) FlushAtCommit(ctx context.Context) error {
	if w.batch.Len() == 0 {
		return nil
	}
	if w.q.tx == nil || w.q.tx.final != nil {
		return w.Flush(ctx)
	}
	w.q.tx.final = w
	return nil
}

// done records that the queued writes were sent and succeeded.
func (w *Writes) done() {
	w.batch = pgx.Batch{}
	w.q.recordAppended(w.types)
	w.types = nil
}
