package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/ids"
)

func hashKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// CreateWorkspace creates a workspace and returns its id.
func (q *Queries) CreateWorkspace(ctx context.Context, name string) (string, error) {
	id := ids.New(ids.Workspace)
	if _, err := q.db.Exec(ctx, `INSERT INTO workspaces (id, name) VALUES ($1, $2)`, id, name); err != nil {
		return "", fmt.Errorf("insert workspace: %w", err)
	}
	return id, nil
}

// CreateAPIKey stores the digest of key for the workspace.
func (q *Queries) CreateAPIKey(ctx context.Context, workspaceID, key string) error {
	_, err := q.db.Exec(ctx, `INSERT INTO api_keys (id, workspace_id, key_hash) VALUES ($1, $2, $3)`,
		ids.New(ids.APIKey), workspaceID, hashKey(key))
	if err != nil {
		return fmt.Errorf("insert api key: %w", classify(err))
	}
	return nil
}

// WorkspaceForKey returns the workspace of an API key, or ErrNotFound.
func (q *Queries) WorkspaceForKey(ctx context.Context, key string) (string, error) {
	var ws string
	err := q.db.QueryRow(ctx, `SELECT workspace_id FROM api_keys WHERE key_hash = $1`, hashKey(key)).Scan(&ws)
	if err != nil {
		return "", fmt.Errorf("look up api key: %w", classify(err))
	}
	return ws, nil
}

// EnsureAPIKey returns the workspace of key, creating a workspace named name for it when the
// key is new. dev uses it so a configured key keeps its data across restarts.
func (s *Store) EnsureAPIKey(ctx context.Context, key, name string) (string, error) {
	var ws string
	err := s.InTx(ctx, func(q *Queries) error {
		// Serialize concurrent first starts so one key never gets two workspaces.
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('managed_agents.ensure_api_key'))`); err != nil {
			return fmt.Errorf("lock api keys: %w", err)
		}
		found, err := q.WorkspaceForKey(ctx, key)
		if err == nil {
			ws = found
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		if ws, err = q.CreateWorkspace(ctx, name); err != nil {
			return err
		}
		return q.CreateAPIKey(ctx, ws, key)
	})
	return ws, err
}

// EnsureWorkspace returns the id of the oldest workspace named name, creating it when there
// is none. The controller maps each Kubernetes namespace to the workspace named after it;
// the advisory lock makes concurrent first uses of one name agree on a single workspace.
func (s *Store) EnsureWorkspace(ctx context.Context, name string) (string, error) {
	var ws string
	err := s.InTx(ctx, func(q *Queries) error {
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('managed_agents.ensure_workspace'), hashtext($1))`, name); err != nil {
			return fmt.Errorf("lock workspace name: %w", err)
		}
		err := q.db.QueryRow(ctx, `SELECT id FROM workspaces WHERE name = $1 ORDER BY created_at, id LIMIT 1`, name).Scan(&ws)
		if err == nil {
			return nil
		}
		if err = classify(err); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("look up workspace %q: %w", name, err)
		}
		ws, err = q.CreateWorkspace(ctx, name)
		return err
	})
	return ws, err
}

// WorkspaceExists reports whether a workspace with the id exists.
func (s *Store) WorkspaceExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up workspace: %w", classify(err))
	}
	return ok, nil
}
