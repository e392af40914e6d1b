package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// NewEvent is an event to append.
type NewEvent struct {
	// ID is the event id; empty means a new sevt_ id. Callers pre-assign it when the id must
	// be known before the commit (a preview announces the id of the event it precedes).
	ID   string
	Type string
	// Body is the type-specific fields as a JSON object (no id, type or processed_at).
	Body json.RawMessage
	// Processed sets processed_at to the append time; otherwise it stays null (queued).
	Processed bool
	// Private is what the worker keeps of the event that clients never see (wire.Event.Private):
	// a JSON object, or nil.
	Private json.RawMessage
}

// AppendEvents appends events to a session's log in one statement and returns them with
// their ids and seqs. The seqs come from bumping sessions.last_seq in the same statement as
// the insert, so the row lock that orders concurrent appends is held until the events are
// committed, also outside a transaction: no reader can see a seq before every smaller one.
// Appends leave no gaps; only delivering a queued event (Writes.Deliver) leaves its old seq
// unused. A wake-up NOTIFY is queued in the same transaction and is
// delivered only if it commits.
func (q *Queries) AppendEvents(ctx context.Context, sessionID string, evs []NewEvent, now time.Time) ([]wire.Event, error) {
	return q.appendEvents(ctx, sessionID, evs, now, false)
}

// ErrSessionEnded is AppendToLive's answer for a session that is archived or terminated.
var ErrSessionEnded = errors.New("session archived or terminated")

// AppendToLive is AppendEvents for a session that must still be live: when it is archived or
// terminated nothing is appended and the error is ErrSessionEnded (ErrNotFound when it is
// gone). The check and the append are one statement, so no transaction is needed around it.
func (q *Queries) AppendToLive(ctx context.Context, sessionID string, evs []NewEvent, now time.Time) ([]wire.Event, error) {
	out, err := q.appendEvents(ctx, sessionID, evs, now, true)
	if errors.Is(err, ErrNotFound) {
		var live bool
		if qerr := q.db.QueryRow(ctx, `SELECT archived_at IS NULL AND status <> 'terminated' FROM sessions WHERE id = $1`,
			sessionID).Scan(&live); qerr == nil && !live {
			return nil, fmt.Errorf("append events: %w", ErrSessionEnded)
		}
	}
	return out, err
}

func (q *Queries) appendEvents(ctx context.Context, sessionID string, evs []NewEvent, now time.Time, liveOnly bool) ([]wire.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	a := prepareAppend(sessionID, evs, now, liveOnly)
	var last int64
	if err := q.db.QueryRow(ctx, appendSQL, a.args...).Scan(&last, nil, nil); err != nil {
		return nil, fmt.Errorf("append events: %w", classify(err))
	}
	a.number(last)
	q.recordAppended(a.types)
	return a.out, nil
}

// appendSQL appends events in one statement, one round trip: the seqs, the rows and the
// wake-up NOTIFY (and, for a user.interrupt, the interrupt NOTIFY) together. It returns the
// session's last_seq after the append; no row when the session is gone (or, with $11, ended).
const appendSQL = appendWith + `
		SELECT last_seq, pg_notify($8, $1),
			CASE WHEN $9::bool THEN pg_notify($10, $1) END FROM s`

// appendExpectSQL is appendSQL that also checks on the server that the log ends at $13 after
// the append (store.Writes): it fails, and so does the batch it is in, when it does not or
// the session was not found.
const appendExpectSQL = appendWith + `
		SELECT s.last_seq, pg_notify($8, $1),
			CASE WHEN $9::bool THEN pg_notify($10, $1) END,
			ma_expect(s.last_seq IS NOT DISTINCT FROM $13::bigint, format(
				'append events: the session''s log ends at %s, not %s: its row was not locked', s.last_seq, $13::bigint))
		FROM (VALUES (1)) AS one LEFT JOIN s ON true`

const appendWith = `WITH s AS (UPDATE sessions SET last_seq = last_seq + $2
			WHERE id = $1 AND (NOT $11::bool OR archived_at IS NULL AND status <> 'terminated') RETURNING last_seq),
		ins AS (INSERT INTO events (session_id, seq, id, type, body, processed_at, created_at, private)
			SELECT $1, s.last_seq - $2 + u.n, u.i, u.t, u.b::jsonb, u.p, $7, u.x::jsonb
			FROM s, unnest($3::text[], $4::text[], $5::text[], $6::timestamptz[], $12::text[]) WITH ORDINALITY AS u(i, t, b, p, x, n))`

// preparedAppend is an append's events as it returns them, before their seqs are known, and
// appendSQL's arguments.
type preparedAppend struct {
	out   []wire.Event
	types []string
	args  []any
}

func prepareAppend(sessionID string, evs []NewEvent, now time.Time, liveOnly bool) preparedAppend {
	// The time PostgreSQL keeps, so what is returned equals what is read back later.
	now = now.UTC().Truncate(time.Microsecond)
	out := make([]wire.Event, len(evs))
	evIDs := make([]string, len(evs))
	types := make([]string, len(evs))
	bodies := make([]string, len(evs))
	processed := make([]*time.Time, len(evs))
	privates := make([]*string, len(evs))
	for i, ev := range evs {
		body := ev.Body
		if len(body) == 0 {
			body = json.RawMessage("{}")
		}
		// Every event reaches the log here: what jsonb cannot store (a NUL, invalid UTF-8)
		// becomes U+FFFD, so no body fails its append on every retry. The caller gets the
		// body as stored.
		body = wire.LogSafeJSON(body)
		id := ev.ID
		if id == "" {
			id = ids.New(ids.Event)
		}
		out[i] = wire.Event{ID: id, Type: ev.Type, Body: body, CreatedAt: now}
		if ev.Processed {
			t := now
			out[i].ProcessedAt = &t
		}
		evIDs[i], types[i], bodies[i], processed[i] = out[i].ID, ev.Type, string(body), out[i].ProcessedAt
		if len(ev.Private) > 0 {
			private := wire.LogSafeJSON(ev.Private)
			out[i].Private = private
			p := string(private)
			privates[i] = &p
		}
	}
	return preparedAppend{out: out, types: types, args: []any{sessionID, len(evs), evIDs, types, bodies, processed, now,
		string(TopicEvents), slices.Contains(types, wire.EventUserInterrupt), string(TopicInterrupts), liveOnly, privates}}
}

// number gives the events their seqs: the session's last_seq after the append is last.
func (a preparedAppend) number(last int64) {
	for i := range a.out {
		a.out[i].Seq = last - int64(len(a.out)) + int64(i) + 1
	}
}

// EventListParams selects a page of a session's log.
type EventListParams struct {
	Limit int
	Desc  bool
	// MaxBytes, when positive, is the caller's byte bound on a page; StreamEvents sizes its
	// reads by it (the sink enforces it, since only the sink knows the encoded size).
	MaxBytes int
	// AfterSeq continues strictly after this seq in the list's order (0 = from the start).
	AfterSeq int64
	Types    []string
	// The processed_at window (API.md §2.5: created_at[...] filters compare processed_at).
	ProcessedGT, ProcessedGTE, ProcessedLT, ProcessedLTE *time.Time
}

const eventColumns = `id, type, processed_at, body, seq, created_at, private`

func scanEvent(row pgx.Row) (wire.Event, error) {
	var e wire.Event
	var body, private []byte
	err := row.Scan(&e.ID, &e.Type, &e.ProcessedAt, &body, &e.Seq, &e.CreatedAt, &private)
	e.Body = body
	if len(private) > 0 {
		e.Private = private
	}
	return e, err
}

// ListEvents returns one page of a session's log in log order.
func (q *Queries) ListEvents(ctx context.Context, sessionID string, p EventListParams) ([]wire.Event, bool, error) {
	var out []wire.Event
	more, err := q.StreamEvents(ctx, sessionID, p, func(e wire.Event) (bool, error) {
		out = append(out, e)
		return false, nil
	})
	return out, more, err
}

// streamBatchMax caps the rows one query of StreamEvents asks for. A sink that stops in the
// middle of a batch makes pgx drain the batch's remaining rows off the connection (a
// result cannot be abandoned half read), so the cap bounds that waste; a few hundred rows
// keep a page of small events to a handful of queries.
const streamBatchMax = 128

// StreamEvents reads one page of a session's log in log order and hands each event to
// sink as soon as its row is read, so a page is never held in memory whole. The sink
// returns stop=true to end the page after the event it was just given (the caller's byte
// bound); the page also ends after p.Limit events. more says whether the log holds further
// events matching p after the last one given to sink.
//
// Rows are read in keyset batches (seq after the last one read) rather than in one query
// of p.Limit rows, and each batch is sized from the body sizes seen so far against
// p.MaxBytes, so stopping early reads at most a batch past the stop. The first batch is a
// single row: nothing is known about sizes yet, and a page of huge events then costs no
// transfer beyond what it sends. Batches are separate statements; the log is append-only
// with seqs committed in order, so a later batch sees a superset of what an earlier one
// saw, never a gap.
func (q *Queries) StreamEvents(ctx context.Context, sessionID string, p EventListParams, sink func(wire.Event) (stop bool, err error)) (bool, error) {
	sent, last, bodyBytes := 0, p.AfterSeq, 0
	batch := streamBatchMax
	if p.MaxBytes > 0 {
		batch = 1
	}
	for sent < p.Limit {
		batch = min(batch, p.Limit-sent, streamBatchMax)
		sql, args := eventsQuery(sessionID, p, last, batch)
		rows, err := q.db.Query(ctx, sql, args...)
		if err != nil {
			return false, fmt.Errorf("list events: %w", err)
		}
		n, stop := 0, false
		for rows.Next() {
			e, err := scanEvent(rows)
			if err != nil {
				rows.Close()
				return false, fmt.Errorf("list events: %w", err)
			}
			n, sent, last, bodyBytes = n+1, sent+1, e.Seq, bodyBytes+len(e.Body)
			if stop, err = sink(e); err != nil {
				rows.Close()
				return false, err
			}
			if stop {
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, fmt.Errorf("list events: %w", err)
		}
		if stop {
			break
		}
		if n < batch {
			// The log ran out before the batch did.
			return false, nil
		}
		batch = streamBatchMax
		if p.MaxBytes > 0 {
			// Enough rows of the average size seen to fill what is left of the bound, plus
			// the one that crosses it.
			avg := max(bodyBytes/sent, 1)
			batch = max((p.MaxBytes-bodyBytes)/avg+1, 1)
		}
	}
	// Whether anything follows, without reading a body.
	sql, args := eventsQuery(sessionID, p, last, 1)
	var more bool
	if err := q.db.QueryRow(ctx, `SELECT EXISTS (`+strings.Replace(sql, eventColumns, "1", 1)+`)`, args...).Scan(&more); err != nil {
		return false, fmt.Errorf("list events: probe for more: %w", err)
	}
	return more, nil
}

// eventsQuery selects up to limit events matching p strictly after seq after in p's order.
func eventsQuery(sessionID string, p EventListParams, after int64, limit int) (string, []any) {
	var b sqlBuilder
	b.where("session_id = %s", sessionID)
	if len(p.Types) > 0 {
		b.where("type = ANY(%s)", p.Types)
	}
	for _, f := range []struct {
		op string
		t  *time.Time
	}{{">", p.ProcessedGT}, {">=", p.ProcessedGTE}, {"<", p.ProcessedLT}, {"<=", p.ProcessedLTE}} {
		if f.t != nil {
			b.where("processed_at "+f.op+" %s", *f.t)
		}
	}
	dir, op := "ASC", ">"
	if p.Desc {
		dir, op = "DESC", "<"
	}
	if after > 0 {
		b.where("seq "+op+" %s", after)
	}
	return `SELECT ` + eventColumns + ` FROM events` + b.clause() + ` ORDER BY seq ` + dir + ` LIMIT ` + strconv.Itoa(limit), b.args
}

// EventsAfter returns up to limit events with seq > after, in log order: the read of a live
// stream after a wake-up.
func (q *Queries) EventsAfter(ctx context.Context, sessionID string, after int64, limit int) ([]wire.Event, bool, error) {
	return q.collectEvents(ctx, `SELECT `+eventColumns+` FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT `+strconv.Itoa(limit+1),
		[]any{sessionID, after}, limit)
}

func (q *Queries) collectEvents(ctx context.Context, sql string, args []any, limit int) ([]wire.Event, bool, error) {
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list events: %w", err)
	}
	out, more := trim(out, limit, false)
	return out, more, nil
}

// GetEvent returns one event of a session by id.
func (q *Queries) GetEvent(ctx context.Context, sessionID, eventID string) (wire.Event, error) {
	e, err := scanEvent(q.db.QueryRow(ctx, `SELECT `+eventColumns+` FROM events WHERE session_id = $1 AND id = $2`, sessionID, eventID))
	if err != nil {
		return wire.Event{}, fmt.Errorf("get event %s: %w", eventID, classify(err))
	}
	return e, nil
}

// EventReferencing returns the first event of one of types whose body field equals id, e.g.
// the user.tool_confirmation that answers a tool_use; ErrNotFound when none.
func (q *Queries) EventReferencing(ctx context.Context, sessionID string, types []string, field, id string) (wire.Event, error) {
	e, err := scanEvent(q.db.QueryRow(ctx, `SELECT `+eventColumns+` FROM events
		WHERE session_id = $1 AND type = ANY($2) AND body->>$3 = $4 ORDER BY seq LIMIT 1`, sessionID, types, field, id))
	if err != nil {
		return wire.Event{}, fmt.Errorf("find event referencing %s: %w", id, classify(err))
	}
	return e, nil
}

// notify queues a wake-up for the session's subscribers (TopicEvents).
func (q *Queries) notify(ctx context.Context, sessionID string) error {
	if _, err := q.db.Exec(ctx, `SELECT pg_notify($1, $2)`, string(TopicEvents), sessionID); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
