package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionRecord is a session row.
type SessionRecord struct {
	ID            string
	WorkspaceID   string
	AgentID       string
	AgentVersion  int64
	EnvironmentID string
	Title         *string
	Metadata      map[string]string
	// Agent is the resolved agent snapshot (wire.SessionAgent) the session runs with.
	Agent         json.RawMessage
	Status        string
	StopReason    json.RawMessage
	Usage         json.RawMessage
	ActiveSeconds float64
	LastSeq       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
	ArchivedAt    *time.Time
	TerminatedAt  *time.Time
	// VaultIDs are the vaults credentials are resolved from, in order.
	VaultIDs []string
}

const sessionColumns = `t.id, t.workspace_id, t.agent_id, t.agent_version, t.environment_id, t.title, t.metadata, t.agent,
	t.status, t.stop_reason, t.usage, t.active_seconds, t.last_seq, t.created_at, t.updated_at, t.archived_at, t.terminated_at, t.vault_ids`

// scanSession scans sessionColumns, then any further columns into more.
func scanSession(row pgx.Row, more ...any) (SessionRecord, error) {
	var r SessionRecord
	err := row.Scan(append([]any{&r.ID, &r.WorkspaceID, &r.AgentID, &r.AgentVersion, &r.EnvironmentID, &r.Title, &r.Metadata, &r.Agent,
		&r.Status, &r.StopReason, &r.Usage, &r.ActiveSeconds, &r.LastSeq, &r.CreatedAt, &r.UpdatedAt, &r.ArchivedAt, &r.TerminatedAt, &r.VaultIDs},
		more...)...)
	return r, err
}

// InsertSession creates a session row.
func (q *Queries) InsertSession(ctx context.Context, r SessionRecord) error {
	_, err := q.db.Exec(ctx, `INSERT INTO sessions (id, workspace_id, agent_id, agent_version, environment_id, title, metadata, agent,
		status, stop_reason, usage, created_at, updated_at, vault_ids) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$12,$13)`,
		r.ID, r.WorkspaceID, r.AgentID, r.AgentVersion, r.EnvironmentID, r.Title, nonNilMap(r.Metadata), r.Agent,
		r.Status, nullJSON(r.StopReason), r.Usage, r.CreatedAt, nonNilStrings(r.VaultIDs))
	if err != nil {
		return fmt.Errorf("insert session: %w", classify(err))
	}
	return nil
}

// GetSession returns a session of the workspace. forUpdate locks the row, which also
// serializes appends to its log.
func (q *Queries) GetSession(ctx context.Context, workspaceID, id string, forUpdate bool) (SessionRecord, error) {
	sql := `SELECT ` + sessionColumns + ` FROM sessions t WHERE t.id = $1 AND t.workspace_id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	r, err := scanSession(q.db.QueryRow(ctx, sql, id, workspaceID))
	if err != nil {
		return SessionRecord{}, fmt.Errorf("get session %s: %w", id, classify(err))
	}
	return r, nil
}

// LockSessionWithEnvironment is GetSession with forUpdate and GetEnvironment of the
// session's environment, sent as one batch: one round trip.
func (q *Queries) LockSessionWithEnvironment(ctx context.Context, workspaceID, id string) (SessionRecord, EnvironmentRecord, error) {
	var (
		sess SessionRecord
		env  EnvironmentRecord
		b    pgx.Batch
	)
	b.Queue(`SELECT `+sessionColumns+` FROM sessions t WHERE t.id = $1 AND t.workspace_id = $2 FOR UPDATE`, id, workspaceID).
		QueryRow(func(row pgx.Row) (err error) {
			if sess, err = scanSession(row); err != nil {
				return fmt.Errorf("get session %s: %w", id, classify(err))
			}
			return nil
		})
	b.Queue(`SELECT `+environmentColumns+` FROM environments t
		WHERE t.id = (SELECT environment_id FROM sessions WHERE id = $1) AND t.workspace_id = $2`, id, workspaceID).
		QueryRow(func(row pgx.Row) (err error) {
			env, err = scanEnvironment(row)
			if errors.Is(err, pgx.ErrNoRows) && sess.ID != "" {
				// Not ErrNotFound: that would say the session is missing. An environment
				// sessions reference cannot be deleted, so this is a broken database.
				return fmt.Errorf("session %s: its environment %s is missing", id, sess.EnvironmentID)
			}
			if err != nil {
				return fmt.Errorf("get environment of session %s: %w", id, classify(err))
			}
			return nil
		})
	if err := q.db.SendBatch(ctx, &b).Close(); err != nil {
		return SessionRecord{}, EnvironmentRecord{}, err
	}
	return sess, env, nil
}

// SessionExists reports whether the session row exists (in any workspace).
func (q *Queries) SessionExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("check session: %w", err)
	}
	return ok, nil
}

// UpdateSession writes the mutable columns of r.
func (q *Queries) UpdateSession(ctx context.Context, r SessionRecord) error {
	_, err := q.db.Exec(ctx, updateSessionSQL, updateSessionArgs(r)...)
	if err != nil {
		return fmt.Errorf("update session: %w", classify(err))
	}
	return nil
}

const updateSessionSQL = `UPDATE sessions SET title = $2, metadata = $3, agent = $4, status = $5, stop_reason = $6,
		usage = $7, active_seconds = $8, updated_at = $9, archived_at = $10, terminated_at = $11 WHERE id = $1`

func updateSessionArgs(r SessionRecord) []any {
	return []any{r.ID, r.Title, nonNilMap(r.Metadata), r.Agent, r.Status, nullJSON(r.StopReason), r.Usage, r.ActiveSeconds,
		r.UpdatedAt, r.ArchivedAt, r.TerminatedAt}
}

// DeleteSession removes a session and, by cascade, its events, and wakes its live streams
// so they can send session.deleted. A session that still has a sandbox binding is
// ErrReferenced: the sandbox must be torn down first. Its self-hosted work stops with it.
func (q *Queries) DeleteSession(ctx context.Context, id string) error {
	if err := q.StopSessionWork(ctx, id, true, time.Now()); err != nil {
		return err
	}
	if _, err := q.db.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete session: %w", classify(err))
	}
	return q.notify(ctx, id)
}

// SessionListParams filters the sessions list.
type SessionListParams struct {
	ListParams
	AgentID      string
	AgentVersion int64
	Statuses     []string
}

// ListSessions returns one page of sessions.
func (q *Queries) ListSessions(ctx context.Context, workspaceID string, p SessionListParams) ([]SessionRecord, bool, error) {
	var b sqlBuilder
	b.where("t.workspace_id = %s", workspaceID)
	if p.AgentID != "" {
		b.where("t.agent_id = %s", p.AgentID)
	}
	if p.AgentVersion > 0 {
		b.where("t.agent_version = %s", p.AgentVersion)
	}
	if len(p.Statuses) > 0 {
		b.where("t.status = ANY(%s)", p.Statuses)
	}
	suffix, reversed := b.page(p.ListParams, "t.archived_at")
	rows, err := q.db.Query(ctx, `SELECT `+sessionColumns+` FROM sessions t`+suffix, b.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SessionRecord, error) { return scanSession(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list sessions: %w", err)
	}
	out, more := trim(out, p.Limit, reversed)
	return out, more, nil
}

// nullJSON stores an empty raw message as SQL NULL rather than invalid JSON.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
