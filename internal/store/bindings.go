package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Binding states (the sandbox_bindings.state column).
const (
	BindingPending = "pending"
	BindingReady   = "ready"
)

// Binding is a session's sandbox: pending (Provider and Name known, ExternalID empty) until
// the provider's Create returned, then ready.
type Binding struct {
	SessionID  string
	Provider   string
	Name       string
	ExternalID string
	SpecHash   string
	State      string
}

// GetBinding returns a session's sandbox binding or ErrNotFound.
func (q *Queries) GetBinding(ctx context.Context, sessionID string) (Binding, error) {
	b := Binding{SessionID: sessionID}
	err := q.db.QueryRow(ctx, `SELECT provider, name, external_id, spec_hash, state FROM sandbox_bindings WHERE session_id = $1`, sessionID).
		Scan(&b.Provider, &b.Name, &b.ExternalID, &b.SpecHash, &b.State)
	if err != nil {
		return Binding{}, fmt.Errorf("get sandbox binding: %w", classify(err))
	}
	return b, nil
}

// InsertBinding records a session's sandbox; a second binding for the session is
// ErrDuplicate, one for a session that does not exist ErrReferenced.
func (q *Queries) InsertBinding(ctx context.Context, b Binding) error {
	_, err := q.db.Exec(ctx, `INSERT INTO sandbox_bindings (session_id, provider, name, external_id, spec_hash, state) VALUES ($1, $2, $3, $4, $5, $6)`,
		b.SessionID, b.Provider, b.Name, b.ExternalID, b.SpecHash, b.State)
	if err != nil {
		return fmt.Errorf("insert sandbox binding: %w", classify(err))
	}
	return nil
}

// MarkBindingReady records the external id of a session's binding and makes it ready;
// ErrNotFound if the session has no binding. Marking it ready again with the same id (a
// retried acquisition) is not an error.
func (q *Queries) MarkBindingReady(ctx context.Context, sessionID, externalID string) error {
	tag, err := q.db.Exec(ctx, `UPDATE sandbox_bindings SET external_id = $2, state = 'ready', updated_at = now() WHERE session_id = $1`,
		sessionID, externalID)
	if err != nil {
		return fmt.Errorf("mark sandbox binding ready: %w", classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("mark sandbox binding ready: %w", ErrNotFound)
	}
	return nil
}

// DeleteBinding removes a session's binding (no error if there is none).
func (q *Queries) DeleteBinding(ctx context.Context, sessionID string) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM sandbox_bindings WHERE session_id = $1`, sessionID); err != nil {
		return fmt.Errorf("delete sandbox binding: %w", err)
	}
	return nil
}

// BindingExpired is the state of a binding whose sandbox the retention sweep destroyed.
const BindingExpired = "expired"

// TouchBinding records that the session's sandbox is in use now and clears its stopped mark;
// it returns the binding's state and whether the idle sweep had stopped the sandbox. The row
// lock makes it wait for a sweep stopping the sandbox at that moment. ErrNotFound if the
// session has no binding.
func (q *Queries) TouchBinding(ctx context.Context, sessionID string) (state string, wasStopped bool, err error) {
	err = q.db.QueryRow(ctx, `WITH old AS (SELECT session_id, stopped FROM sandbox_bindings WHERE session_id = $1 FOR UPDATE)
		UPDATE sandbox_bindings b SET last_active_at = now(), stopped = false FROM old
		WHERE b.session_id = old.session_id RETURNING b.state, old.stopped`, sessionID).Scan(&state, &wasStopped)
	if err != nil {
		return "", false, fmt.Errorf("touch sandbox binding: %w", classify(err))
	}
	return state, wasStopped, nil
}

// IdleBindings returns up to limit sessions whose ready binding was last active longer than
// idle ago, oldest first; already stopped ones only if withStopped.
func (q *Queries) IdleBindings(ctx context.Context, idle time.Duration, withStopped bool, limit int) ([]string, error) {
	rows, err := q.db.Query(ctx, `SELECT session_id FROM sandbox_bindings
		WHERE state = 'ready' AND last_active_at < now() - $1::interval AND ($2 OR NOT stopped)
		ORDER BY last_active_at LIMIT $3`, idle, withStopped, limit)
	if err != nil {
		return nil, fmt.Errorf("list idle sandbox bindings: %w", classify(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list idle sandbox bindings: %w", classify(err))
	}
	return ids, nil
}

// LockIdleBinding locks the session's binding (q must be a transaction) if it is still
// ready and idle as IdleBindings found it; ok is false if it is not, or if another
// transaction (a touch, another sweep) holds it.
func (q *Queries) LockIdleBinding(ctx context.Context, sessionID string, idle time.Duration, withStopped bool) (b Binding, ok bool, err error) {
	b = Binding{SessionID: sessionID}
	err = q.db.QueryRow(ctx, `SELECT provider, name, external_id, spec_hash, state FROM sandbox_bindings
		WHERE session_id = $1 AND state = 'ready' AND last_active_at < now() - $2::interval AND ($3 OR NOT stopped)
		FOR UPDATE SKIP LOCKED`, sessionID, idle, withStopped).
		Scan(&b.Provider, &b.Name, &b.ExternalID, &b.SpecHash, &b.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return Binding{}, false, nil
	}
	if err != nil {
		return Binding{}, false, fmt.Errorf("lock idle sandbox binding: %w", classify(err))
	}
	return b, true, nil
}

// MarkBindingStopped records that the idle sweep stopped the session's sandbox.
func (q *Queries) MarkBindingStopped(ctx context.Context, sessionID string) error {
	if _, err := q.db.Exec(ctx, `UPDATE sandbox_bindings SET stopped = true WHERE session_id = $1`, sessionID); err != nil {
		return fmt.Errorf("mark sandbox binding stopped: %w", classify(err))
	}
	return nil
}

// MarkBindingExpired records that the retention sweep destroyed the session's sandbox.
func (q *Queries) MarkBindingExpired(ctx context.Context, sessionID string) error {
	if _, err := q.db.Exec(ctx, `UPDATE sandbox_bindings SET state = 'expired', stopped = false, updated_at = now() WHERE session_id = $1`, sessionID); err != nil {
		return fmt.Errorf("mark sandbox binding expired: %w", classify(err))
	}
	return nil
}

// AgedBinding is a binding with how long ago its state last changed (computed by the
// database, so a worker's clock does not matter).
type AgedBinding struct {
	Binding
	Since time.Duration
}

// BindingsOf returns the bindings of those sessions that have one, by session id.
func (q *Queries) BindingsOf(ctx context.Context, sessionIDs []string) (map[string]AgedBinding, error) {
	rows, err := q.db.Query(ctx, `SELECT session_id, provider, name, external_id, spec_hash, state,
		extract(epoch FROM now() - updated_at)::float8 FROM sandbox_bindings WHERE session_id = ANY($1)`, sessionIDs)
	if err != nil {
		return nil, fmt.Errorf("read sandbox bindings: %w", classify(err))
	}
	defer rows.Close()
	out := map[string]AgedBinding{}
	for rows.Next() {
		var b AgedBinding
		var secs float64
		if err := rows.Scan(&b.SessionID, &b.Provider, &b.Name, &b.ExternalID, &b.SpecHash, &b.State, &secs); err != nil {
			return nil, fmt.Errorf("read sandbox bindings: %w", classify(err))
		}
		b.Since = time.Duration(secs * float64(time.Second))
		out[b.SessionID] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sandbox bindings: %w", classify(err))
	}
	return out, nil
}

// WithTryLock runs fn while holding the session-level advisory lock named key, unless
// another connection (another worker) holds it: then it returns false without running fn.
func (s *Store) WithTryLock(ctx context.Context, key string, fn func(ctx context.Context) error) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("advisory lock %s: %w", key, err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&got); err != nil {
		return false, fmt.Errorf("advisory lock %s: %w", key, err)
	}
	if !got {
		return false, nil
	}
	defer func() {
		// A lock that cannot be released goes with its connection.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, key); err != nil {
			_ = conn.Conn().Close(context.Background()) // the pool drops a closed connection
		}
	}()
	return true, fn(ctx)
}
