package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvironmentRecord is an environment row.
type EnvironmentRecord struct {
	ID          string
	WorkspaceID string
	Name        string
	Description *string
	Config      json.RawMessage
	Scope       string
	Metadata    map[string]string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ArchivedAt  *time.Time
}

const environmentColumns = `t.id, t.workspace_id, t.name, t.description, t.config, t.scope, t.metadata, t.created_at, t.updated_at, t.archived_at`

func scanEnvironment(row pgx.Row) (EnvironmentRecord, error) {
	var r EnvironmentRecord
	err := row.Scan(&r.ID, &r.WorkspaceID, &r.Name, &r.Description, &r.Config, &r.Scope, &r.Metadata, &r.CreatedAt, &r.UpdatedAt, &r.ArchivedAt)
	return r, err
}

// InsertEnvironment creates an environment; a name already used in the workspace is ErrDuplicate.
func (q *Queries) InsertEnvironment(ctx context.Context, r EnvironmentRecord) error {
	_, err := q.db.Exec(ctx, `INSERT INTO environments (id, workspace_id, name, description, config, scope, metadata, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
		r.ID, r.WorkspaceID, r.Name, r.Description, r.Config, r.Scope, nonNilMap(r.Metadata), r.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert environment: %w", classify(err))
	}
	return nil
}

// GetEnvironment returns an environment of the workspace, optionally locking it.
func (q *Queries) GetEnvironment(ctx context.Context, workspaceID, id string, forUpdate bool) (EnvironmentRecord, error) {
	sql := `SELECT ` + environmentColumns + ` FROM environments t WHERE t.id = $1 AND t.workspace_id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	r, err := scanEnvironment(q.db.QueryRow(ctx, sql, id, workspaceID))
	if err != nil {
		return EnvironmentRecord{}, fmt.Errorf("get environment %s: %w", id, classify(err))
	}
	return r, nil
}

// UpdateEnvironment writes every mutable column of r.
func (q *Queries) UpdateEnvironment(ctx context.Context, r EnvironmentRecord) error {
	_, err := q.db.Exec(ctx, `UPDATE environments SET name = $2, description = $3, config = $4, scope = $5, metadata = $6,
		updated_at = $7, archived_at = $8 WHERE id = $1`,
		r.ID, r.Name, r.Description, r.Config, r.Scope, nonNilMap(r.Metadata), r.UpdatedAt, r.ArchivedAt)
	if err != nil {
		return fmt.Errorf("update environment: %w", classify(err))
	}
	return nil
}

// DeleteEnvironment removes an environment; one that sessions reference is ErrReferenced.
func (q *Queries) DeleteEnvironment(ctx context.Context, id string) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM environments WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete environment: %w", classify(err))
	}
	return nil
}

// EnvironmentInUse reports whether any session references the environment.
func (q *Queries) EnvironmentInUse(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE environment_id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("check environment use: %w", err)
	}
	return ok, nil
}

// ListEnvironments returns one page of environments.
func (q *Queries) ListEnvironments(ctx context.Context, workspaceID string, p ListParams) ([]EnvironmentRecord, bool, error) {
	var b sqlBuilder
	b.where("t.workspace_id = %s", workspaceID)
	suffix, reversed := b.page(p, "t.archived_at")
	rows, err := q.db.Query(ctx, `SELECT `+environmentColumns+` FROM environments t`+suffix, b.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list environments: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EnvironmentRecord, error) { return scanEnvironment(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list environments: %w", err)
	}
	out, more := trim(out, p.Limit, reversed)
	return out, more, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
