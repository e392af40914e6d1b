package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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
}

// AppendEvents appends events to a session's log in one statement and returns them with
// their ids and seqs. The seqs come from bumping sessions.last_seq in the same statement as
// the insert, so the row lock that orders concurrent appends is held until the events are
// committed, also outside a transaction: no reader can see a seq before every smaller one.
// Appends leave no gaps; only delivering a queued event (DeliverEvents) leaves its old seq
// unused. A wake-up NOTIFY is queued in the same transaction and is
// delivered only if it commits.
func (q *Queries) AppendEvents(ctx context.Context, sessionID string, evs []NewEvent, now time.Time) ([]wire.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	// The time PostgreSQL keeps, so what is returned equals what is read back later.
	now = now.UTC().Truncate(time.Microsecond)
	out := make([]wire.Event, len(evs))
	evIDs := make([]string, len(evs))
	types := make([]string, len(evs))
	bodies := make([]string, len(evs))
	processed := make([]*time.Time, len(evs))
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
	}
	var last int64
	err := q.db.QueryRow(ctx, `WITH s AS (UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq),
		ins AS (INSERT INTO events (session_id, seq, id, type, body, processed_at, created_at)
			SELECT $1, s.last_seq - $2 + u.n, u.i, u.t, u.b::jsonb, u.p, $7
			FROM s, unnest($3::text[], $4::text[], $5::text[], $6::timestamptz[]) WITH ORDINALITY AS u(i, t, b, p, n))
		SELECT last_seq FROM s`,
		sessionID, len(evs), evIDs, types, bodies, processed, now).Scan(&last)
	if err != nil {
		return nil, fmt.Errorf("append events: %w", classify(err))
	}
	for i := range out {
		out[i].Seq = last - int64(len(evs)) + int64(i) + 1
	}
	if err := q.notify(ctx, sessionID, last); err != nil {
		return nil, err
	}
	return out, nil
}

// EventListParams selects a page of a session's log.
type EventListParams struct {
	Limit int
	Desc  bool
	// AfterSeq continues strictly after this seq in the list's order (0 = from the start).
	AfterSeq int64
	Types    []string
	// The processed_at window (API.md §2.5: created_at[...] filters compare processed_at).
	ProcessedGT, ProcessedGTE, ProcessedLT, ProcessedLTE *time.Time
}

const eventColumns = `id, type, processed_at, body, seq, created_at`

func scanEvent(row pgx.Row) (wire.Event, error) {
	var e wire.Event
	var body []byte
	err := row.Scan(&e.ID, &e.Type, &e.ProcessedAt, &body, &e.Seq, &e.CreatedAt)
	e.Body = body
	return e, err
}

// ListEvents returns one page of a session's log in log order.
func (q *Queries) ListEvents(ctx context.Context, sessionID string, p EventListParams) ([]wire.Event, bool, error) {
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
	if p.AfterSeq > 0 {
		b.where("seq "+op+" %s", p.AfterSeq)
	}
	sql := `SELECT ` + eventColumns + ` FROM events` + b.clause() + ` ORDER BY seq ` + dir + ` LIMIT ` + strconv.Itoa(p.Limit+1)
	return q.collectEvents(ctx, sql, b.args, p.Limit)
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

// notify queues a wake-up for the session's subscribers; seq -1 means deleted.
func (q *Queries) notify(ctx context.Context, sessionID string, seq int64) error {
	if _, err := q.db.Exec(ctx, `SELECT pg_notify($1, $2)`, string(TopicEvents), sessionID+":"+strconv.FormatInt(seq, 10)); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
