package store

import (
	"context"
	"fmt"
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
