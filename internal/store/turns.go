package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// LockSession returns a session by id alone (the worker acts for every workspace) and locks
// its row until the transaction ends.
func (q *Queries) LockSession(ctx context.Context, id string) (SessionRecord, error) {
	r, err := scanSession(q.db.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions t WHERE t.id = $1 FOR UPDATE`, id))
	if err != nil {
		return SessionRecord{}, fmt.Errorf("lock session %s: %w", id, classify(err))
	}
	return r, nil
}

// History returns a session's whole log in log order.
func (q *Queries) History(ctx context.Context, sessionID string) ([]wire.Event, error) {
	rows, err := q.db.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE session_id = $1 ORDER BY seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return out, nil
}

// Conversation is a session's row, its turn window and a part of its log: every queued
// client event, wherever it is, and the events the read asked for (CurrentTurn and LockTurn:
// the current turn's; ConversationSince: those above a seq), in log order.
type Conversation struct {
	Session SessionRecord
	Window  TurnWindow
	Events  []wire.Event
}

// CurrentTurn reads a session's row, its turn window and its turn log (its events from the
// window's start) in one round trip: the statements go as one batch.
func (s *Store) CurrentTurn(ctx context.Context, sessionID string) (Conversation, error) {
	return s.readLog(ctx, sessionID, false, turnFrom, nil)
}

// LockTurn is CurrentTurn that also locks the session's row until the transaction q runs in
// ends; the log is read after the lock is taken, so it holds every append committed before.
func (q *Queries) LockTurn(ctx context.Context, sessionID string) (Conversation, error) {
	return q.readLog(ctx, sessionID, true, turnFrom, nil)
}

// turnFrom selects the events of a session's current turn. Reading from the turn's start
// instead of the log's start keeps a step's cost independent of the session's length.
var turnFrom = logFrom{
	from:   `seq BETWEEN (SELECT turn_start_seq FROM sessions WHERE id = $1) AND (SELECT last_seq FROM sessions WHERE id = $1)`,
	before: `seq < (SELECT turn_start_seq FROM sessions WHERE id = $1)`,
}

// conversationSince selects the events after $2.
var conversationSince = logFrom{
	from:   `seq > $2 AND seq <= (SELECT last_seq FROM sessions WHERE id = $1)`,
	before: `seq <= $2`,
}

// logFrom is where a log read starts: from, an SQL condition on seq ($1 is the session id,
// $2… the read's args), and before, its complement, which bounds the queued events read
// apart.
type logFrom struct{ from, before string }

// logReadSQL reads the events of a session that match from, and the queued ones before it.
// It is written for the generic plan of a prepared statement, which PostgreSQL switches to
// after five runs on a connection and costs without the seqs. The old form, one scan of
// `from OR processed_at IS NULL`, could not use the OR as an index condition, and as the
// table grew its generic plan became a scan of the whole session filtered row by row: 1.6 ms
// and 800 buffers per read at 9,000 events (pg_stat_statements), so every step of a long
// session grew slower. Now the two are separate range scans (the primary key; the queued
// events' partial index) joined with UNION ALL, and from bounds seq on both sides, the top
// by the session's last_seq (no event is above it): a range whose both ends are unknown is
// estimated at 0.5 % of the rows, where a one-sided unknown bound is a third, which with few
// sessions in the table made a sequential scan look cheaper (TestLogReadScansOnlyItsRange).
func logReadSQL(f logFrom) string {
	return `SELECT ` + eventColumns + ` FROM events WHERE session_id = $1 AND ` + f.from + `
		UNION ALL
		SELECT ` + eventColumns + ` FROM events WHERE session_id = $1 AND processed_at IS NULL AND ` + f.before + `
		ORDER BY seq`
}

// ConversationSince reads a session's row, its turn window and its log from afterSeq on (with
// every queued event) in one round trip: the statements go as one batch. A caller that keeps
// the processed events up to afterSeq has the whole log with it: a processed event never
// changes and a new or newly delivered one always takes a seq above every seq in use.
func (s *Store) ConversationSince(ctx context.Context, sessionID string, afterSeq int64) (Conversation, error) {
	return s.readLog(ctx, sessionID, false, conversationSince, []any{afterSeq})
}

// readLog reads a session's row (locked with lock) and window, and its events that match
// from or are queued (logReadSQL), as one batch.
func (q *Queries) readLog(ctx context.Context, sessionID string, lock bool, from logFrom, args []any) (Conversation, error) {
	var c Conversation
	b := &pgx.Batch{}
	row := `SELECT ` + sessionColumns + `, t.turn_start_seq, t.turn_base_usage FROM sessions t WHERE t.id = $1`
	if lock {
		row += ` FOR UPDATE`
	}
	b.Queue(row, sessionID).
		QueryRow(func(row pgx.Row) (err error) {
			c.Session, err = scanSession(row, &c.Window.StartSeq, &c.Window.BaseUsage)
			return err
		})
	b.Queue(logReadSQL(from), append([]any{sessionID}, args...)...).
		Query(func(rows pgx.Rows) error {
			var err error
			c.Events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Event, error) { return scanEvent(r) })
			return err
		})
	if err := q.db.SendBatch(ctx, b).Close(); err != nil {
		return Conversation{}, fmt.Errorf("read log of %s: %w", sessionID, classify(err))
	}
	return c, nil
}

// TurnWindow is where a session's current (or latest) turn starts in its log, and the
// session's cumulative usage before it (a wire.Usage object; empty for zero).
type TurnWindow struct {
	StartSeq  int64
	BaseUsage json.RawMessage
}

// GetTurnWindow returns a session's turn window (the zero window for a session whose turns
// started before windows were kept: its turn is read from the log's start).
func (q *Queries) GetTurnWindow(ctx context.Context, sessionID string) (TurnWindow, error) {
	var w TurnWindow
	err := q.db.QueryRow(ctx, `SELECT turn_start_seq, turn_base_usage FROM sessions WHERE id = $1`, sessionID).
		Scan(&w.StartSeq, &w.BaseUsage)
	if err != nil {
		return TurnWindow{}, fmt.Errorf("get turn window of %s: %w", sessionID, classify(err))
	}
	return w, nil
}

const setTurnWindowSQL = `UPDATE sessions SET turn_start_seq = $2, turn_base_usage = $3 WHERE id = $1`

// deliverSQL marks queued client events processed and moves them to the end of the log, in
// the order given ($3), in one statement: the seqs, the move and the wake-up NOTIFY. A queued
// event enters the conversation where it is delivered, after everything committed while it
// waited (API.md §17). The old seqs are left unused, so seqs stay strictly increasing but may
// skip. The caller must hold the session's row lock (Writes.Deliver).
const deliverSQL = `WITH s AS (UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq),
		m AS (UPDATE events e SET seq = s.last_seq - $2 + u.ord, processed_at = $4
			FROM s, unnest($3::text[]) WITH ORDINALITY AS u(id, ord)
			WHERE e.session_id = $1 AND e.id = u.id AND e.processed_at IS NULL RETURNING 1)
		SELECT c.moved, pg_notify($5, $1), s.last_seq,
			ma_expect(s.last_seq IS NOT DISTINCT FROM $6::bigint, format(
				'deliver events: the session''s log ends at %s, not %s: its row was not locked', s.last_seq, $6::bigint)),
			ma_expect(c.moved = $2, format('deliver events: %s of %s were queued', c.moved, $2::int))
		FROM (SELECT count(*) AS moved FROM m) AS c LEFT JOIN s ON true`

// GetSessionByID returns a session by id alone, without locking.
func (q *Queries) GetSessionByID(ctx context.Context, id string) (SessionRecord, error) {
	r, err := scanSession(q.db.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions t WHERE t.id = $1`, id))
	if err != nil {
		return SessionRecord{}, fmt.Errorf("get session %s: %w", id, classify(err))
	}
	return r, nil
}

// SessionsNeedingRun lists live sessions that may have work no run knows about: a turn in
// progress, a turn parked on answers, or client events still queued. Waking one that has
// nothing to do is harmless (its run finds nothing due).
func (q *Queries) SessionsNeedingRun(ctx context.Context, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT s.id FROM sessions s
		WHERE s.archived_at IS NULL AND s.status <> 'terminated'
		  AND (s.status IN ('running', 'rescheduling')
		       OR s.stop_reason->>'type' = 'requires_action'
		       OR EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id AND e.processed_at IS NULL))
		ORDER BY s.updated_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions needing a run: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list sessions needing a run: %w", err)
	}
	return ids, nil
}
