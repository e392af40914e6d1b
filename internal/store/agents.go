package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AgentRecord is one version of an agent.
type AgentRecord struct {
	ID            string
	WorkspaceID   string
	Version       int64
	LatestVersion int64
	Config        json.RawMessage
	CreatedAt     time.Time
	// VersionCreatedAt is when this version was written: the version's updated_at.
	VersionCreatedAt time.Time
	ArchivedAt       *time.Time
}

const agentColumns = `a.id, a.workspace_id, v.version, a.latest_version, v.config, a.created_at, v.created_at, a.archived_at`

func scanAgent(row pgx.Row) (AgentRecord, error) {
	var r AgentRecord
	err := row.Scan(&r.ID, &r.WorkspaceID, &r.Version, &r.LatestVersion, &r.Config, &r.CreatedAt, &r.VersionCreatedAt, &r.ArchivedAt)
	return r, err
}

// InsertAgent creates an agent at version 1.
func (q *Queries) InsertAgent(ctx context.Context, id, workspaceID string, config json.RawMessage, now time.Time) error {
	if _, err := q.db.Exec(ctx, `INSERT INTO agents (id, workspace_id, latest_version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)`,
		id, workspaceID, now); err != nil {
		return fmt.Errorf("insert agent: %w", classify(err))
	}
	if _, err := q.db.Exec(ctx, `INSERT INTO agent_versions (agent_id, version, config, created_at) VALUES ($1, 1, $2, $3)`,
		id, config, now); err != nil {
		return fmt.Errorf("insert agent version: %w", classify(err))
	}
	return nil
}

// GetAgent returns version (0 = latest) of an agent in the workspace. With forUpdate the agent
// row is locked until the transaction ends, serializing concurrent updates.
func (q *Queries) GetAgent(ctx context.Context, workspaceID, id string, version int64, forUpdate bool) (AgentRecord, error) {
	if forUpdate {
		// Lock in a statement of its own: FOR UPDATE on the join below would, after waiting
		// for a concurrent update, recheck the new latest_version against the old version
		// row and find nothing. The read that follows takes a fresh snapshot.
		var locked string
		err := q.db.QueryRow(ctx, `SELECT id FROM agents WHERE id = $1 AND workspace_id = $2 FOR UPDATE`, id, workspaceID).Scan(&locked)
		if err != nil {
			return AgentRecord{}, fmt.Errorf("lock agent %s: %w", id, classify(err))
		}
	}
	sql := `SELECT ` + agentColumns + ` FROM agents a JOIN agent_versions v ON v.agent_id = a.id
		AND v.version = CASE WHEN $3 = 0 THEN a.latest_version ELSE $3 END
		WHERE a.id = $1 AND a.workspace_id = $2`
	r, err := scanAgent(q.db.QueryRow(ctx, sql, id, workspaceID, version))
	if err != nil {
		return AgentRecord{}, fmt.Errorf("get agent %s: %w", id, classify(err))
	}
	return r, nil
}

// AgentExists reports whether the agent exists in the workspace (any version).
func (q *Queries) AgentExists(ctx context.Context, workspaceID, id string) (bool, error) {
	var ok bool
	err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND workspace_id = $2)`, id, workspaceID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check agent: %w", err)
	}
	return ok, nil
}

// InsertAgentVersion appends a version and makes it the latest.
func (q *Queries) InsertAgentVersion(ctx context.Context, id string, version int64, config json.RawMessage, now time.Time) error {
	if _, err := q.db.Exec(ctx, `INSERT INTO agent_versions (agent_id, version, config, created_at) VALUES ($1, $2, $3, $4)`,
		id, version, config, now); err != nil {
		return fmt.Errorf("insert agent version: %w", classify(err))
	}
	if _, err := q.db.Exec(ctx, `UPDATE agents SET latest_version = $2, updated_at = $3 WHERE id = $1`, id, version, now); err != nil {
		return fmt.Errorf("update agent head: %w", err)
	}
	return nil
}

// ArchiveAgent sets archived_at once; archiving again keeps the first timestamp.
func (q *Queries) ArchiveAgent(ctx context.Context, id string, now time.Time) error {
	if _, err := q.db.Exec(ctx, `UPDATE agents SET archived_at = COALESCE(archived_at, $2) WHERE id = $1`, id, now); err != nil {
		return fmt.Errorf("archive agent: %w", err)
	}
	return nil
}

// ListAgents returns the latest version of each agent, one page.
func (q *Queries) ListAgents(ctx context.Context, workspaceID string, p ListParams) ([]AgentRecord, bool, error) {
	var b sqlBuilder
	b.where("t.workspace_id = %s", workspaceID)
	suffix, reversed := b.page(p, "t.archived_at")
	sql := `SELECT t.id, t.workspace_id, v.version, t.latest_version, v.config, t.created_at, v.created_at, t.archived_at
		FROM agents t JOIN agent_versions v ON v.agent_id = t.id AND v.version = t.latest_version` + suffix
	return collectAgents(ctx, q, sql, b.args, p.Limit, reversed)
}

// ListAgentVersions returns an agent's versions newest first; after is the version to
// continue below (0 = from the latest).
func (q *Queries) ListAgentVersions(ctx context.Context, workspaceID, id string, after int64, limit int) ([]AgentRecord, bool, error) {
	sql := `SELECT ` + agentColumns + ` FROM agents a JOIN agent_versions v ON v.agent_id = a.id
		WHERE a.id = $1 AND a.workspace_id = $2 AND ($3 = 0 OR v.version < $3)
		ORDER BY v.version DESC LIMIT ` + fmt.Sprint(limit+1)
	return collectAgents(ctx, q, sql, []any{id, workspaceID, after}, limit, false)
}

func collectAgents(ctx context.Context, q *Queries, sql string, args []any, limit int, reversed bool) ([]AgentRecord, bool, error) {
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list agents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AgentRecord, error) { return scanAgent(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list agents: %w", err)
	}
	out, more := trim(out, limit, reversed)
	return out, more, nil
}
