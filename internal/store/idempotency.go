package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// sessionExternalKeyIndex is the unique index that makes keyed creates happen once.
const sessionExternalKeyIndex = "sessions_workspace_external_key"

// ErrExternalKeyTaken: another session of the workspace already has the external key (it is
// also ErrDuplicate).
var ErrExternalKeyTaken = fmt.Errorf("%w: session external key", ErrDuplicate)

// SetSessionExternalKey gives a session just inserted in the same transaction its external key
// and request hash. A concurrent transaction with the same key waits on the unique index; the
// one that commits second gets ErrExternalKeyTaken and must roll back.
func (q *Queries) SetSessionExternalKey(ctx context.Context, id, key, requestHash string) error {
	_, err := q.db.Exec(ctx, `UPDATE sessions SET external_key = $2, request_hash = $3 WHERE id = $1`, id, key, requestHash)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == sessionExternalKeyIndex {
		return fmt.Errorf("set session external key: %w", ErrExternalKeyTaken)
	}
	if err != nil {
		return fmt.Errorf("set session external key: %w", classify(err))
	}
	return nil
}

// SessionByExternalKey returns the session of the workspace created with key, and the hash of
// the request that created it.
func (q *Queries) SessionByExternalKey(ctx context.Context, workspaceID, key string) (SessionRecord, string, error) {
	var id, hash string
	if err := q.db.QueryRow(ctx, `SELECT id, request_hash FROM sessions WHERE workspace_id = $1 AND external_key = $2`,
		workspaceID, key).Scan(&id, &hash); err != nil {
		return SessionRecord{}, "", fmt.Errorf("get session by external key: %w", classify(err))
	}
	r, err := q.GetSession(ctx, workspaceID, id, false)
	return r, hash, err
}

// EventSend is the stored answer of a keyed send of client events.
type EventSend struct {
	SessionID   string
	Key         string
	RequestHash string
	// Response is the send's echoes ([]wire.Event) as first answered.
	Response  json.RawMessage
	CreatedAt time.Time
}

// GetEventSend returns the keyed send of a session, or ErrNotFound. Callers hold the
// session's row lock, which orders it after any earlier send with the key.
func (q *Queries) GetEventSend(ctx context.Context, sessionID, key string) (EventSend, error) {
	s := EventSend{SessionID: sessionID, Key: key}
	err := q.db.QueryRow(ctx, `SELECT request_hash, response, created_at FROM event_sends
		WHERE session_id = $1 AND idempotency_key = $2`, sessionID, key).Scan(&s.RequestHash, &s.Response, &s.CreatedAt)
	if err != nil {
		return EventSend{}, fmt.Errorf("get event send: %w", classify(err))
	}
	return s, nil
}

// InsertEventSend records a keyed send's answer.
func (q *Queries) InsertEventSend(ctx context.Context, s EventSend) error {
	_, err := q.db.Exec(ctx, `INSERT INTO event_sends (session_id, idempotency_key, request_hash, response, created_at)
		VALUES ($1, $2, $3, $4, $5)`, s.SessionID, s.Key, s.RequestHash, s.Response, s.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert event send: %w", classify(err))
	}
	return nil
}
