package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/managed-agents/managed-agents/internal/ids"
)

func hashKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// Workspace is a tenant: every resource belongs to exactly one.
type Workspace struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// APIKey is what is stored of an API key: never the secret, only its digest and a hint.
type APIKey struct {
	ID string
	// WorkspaceID is empty for an admin key, which belongs to no workspace.
	WorkspaceID string
	Label       string
	// Hint identifies the key to a person (its prefix and last characters) without
	// revealing it.
	Hint  string
	Admin bool
	// EnvironmentID confines the key to one self-hosted environment (an environment key).
	EnvironmentID string
	CreatedBy     string
	// EndedBy names who revoked the key or set its end (rotation), for the audit trail.
	EndedBy   string
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// NewAPIKey is a key to store.
type NewAPIKey struct {
	WorkspaceID string // empty for an admin key
	Secret      string
	Label       string
	Hint        string
	Admin       bool
	// EnvironmentID makes an environment key (APIKey.EnvironmentID).
	EnvironmentID string
	CreatedBy     string
	ExpiresAt     *time.Time
}

const apiKeyColumns = `id, coalesce(workspace_id, ''), label, hint, admin, coalesce(environment_id, ''), created_by, ended_by, created_at, expires_at, revoked_at`

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.WorkspaceID, &k.Label, &k.Hint, &k.Admin, &k.EnvironmentID, &k.CreatedBy, &k.EndedBy, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt)
	return k, err
}

// CreateWorkspace creates a workspace and returns its id.
func (q *Queries) CreateWorkspace(ctx context.Context, name string) (string, error) {
	id := ids.New(ids.Workspace)
	if _, err := q.db.Exec(ctx, `INSERT INTO workspaces (id, name) VALUES ($1, $2)`, id, name); err != nil {
		return "", fmt.Errorf("insert workspace: %w", err)
	}
	return id, nil
}

// ListWorkspaces returns every workspace, oldest first.
func (q *Queries) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	rows, err := q.db.Query(ctx, `SELECT id, name, created_at FROM workspaces ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Workspace, error) {
		var w Workspace
		return w, r.Scan(&w.ID, &w.Name, &w.CreatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

// CreateAPIKey stores the digest of key for the workspace (a key with no label, hint or
// expiry: tests and EnsureAPIKey use it).
func (q *Queries) CreateAPIKey(ctx context.Context, workspaceID, key string) error {
	_, err := q.InsertAPIKey(ctx, NewAPIKey{WorkspaceID: workspaceID, Secret: key})
	return err
}

// InsertAPIKey stores a key's digest and description and returns what was stored.
func (q *Queries) InsertAPIKey(ctx context.Context, k NewAPIKey) (APIKey, error) {
	var ws *string
	if k.WorkspaceID != "" {
		ws = &k.WorkspaceID
	}
	var env *string
	if k.EnvironmentID != "" {
		env = &k.EnvironmentID
	}
	row := q.db.QueryRow(ctx, `INSERT INTO api_keys (id, workspace_id, key_hash, label, hint, admin, created_by, expires_at, environment_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+apiKeyColumns,
		ids.New(ids.APIKey), ws, hashKey(k.Secret), k.Label, k.Hint, k.Admin, k.CreatedBy, k.ExpiresAt, env)
	key, err := scanAPIKey(row)
	if err != nil {
		return APIKey{}, fmt.Errorf("insert api key: %w", classify(err))
	}
	return key, nil
}

// KeyBySecret returns the key whose secret is key, revoked and expired ones included (the
// caller decides), or ErrNotFound.
func (q *Queries) KeyBySecret(ctx context.Context, key string) (APIKey, error) {
	k, err := scanAPIKey(q.db.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE key_hash = $1`, hashKey(key)))
	if err != nil {
		return APIKey{}, fmt.Errorf("look up api key: %w", classify(err))
	}
	return k, nil
}

// APIKeyForUpdate returns one key, locked until the transaction ends (two rotations of one
// key must not both succeed), or ErrNotFound.
func (q *Queries) APIKeyForUpdate(ctx context.Context, id string) (APIKey, error) {
	k, err := scanAPIKey(q.db.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return APIKey{}, fmt.Errorf("look up api key %s: %w", id, classify(err))
	}
	return k, nil
}

// ListAPIKeys returns the keys of a workspace (every key, admin keys included, when
// workspaceID is empty), oldest first.
func (q *Queries) ListAPIKeys(ctx context.Context, workspaceID string) ([]APIKey, error) {
	rows, err := q.db.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys
		WHERE $1 = '' OR workspace_id = $1 ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) { return scanAPIKey(r) })
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// EndAPIKey makes a key stop working at `at` (now or later): a revocation when at is now,
// a grace period otherwise. An earlier end is never pushed back. Every API process is told in
// the same transaction (TopicKeys), so a key revoked now is refused everywhere at once.
func (q *Queries) EndAPIKey(ctx context.Context, id string, at time.Time, revoke bool, by string) (APIKey, error) {
	var row pgx.Row
	if revoke {
		row = q.db.QueryRow(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2),
			ended_by = CASE WHEN revoked_at IS NULL THEN $3 ELSE ended_by END
			WHERE id = $1 RETURNING `+apiKeyColumns, id, at, by)
	} else {
		row = q.db.QueryRow(ctx, `UPDATE api_keys SET expires_at = least(coalesce(expires_at, $2), $2), ended_by = $3
			WHERE id = $1 RETURNING `+apiKeyColumns, id, at, by)
	}
	k, err := scanAPIKey(row)
	if err != nil {
		return APIKey{}, fmt.Errorf("end api key %s: %w", id, classify(err))
	}
	if _, err := q.db.Exec(ctx, `SELECT pg_notify($1, $2)`, string(TopicKeys), id); err != nil {
		return APIKey{}, fmt.Errorf("notify key change: %w", err)
	}
	return k, nil
}

// WorkspaceForKey returns the workspace of a valid (not revoked, not expired, not admin)
// API key, or ErrNotFound.
func (q *Queries) WorkspaceForKey(ctx context.Context, key string) (string, error) {
	var ws string
	err := q.db.QueryRow(ctx, `SELECT workspace_id FROM api_keys WHERE key_hash = $1 AND NOT admin
		AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, hashKey(key)).Scan(&ws)
	if err != nil {
		return "", fmt.Errorf("look up api key: %w", classify(err))
	}
	return ws, nil
}

// EnsureAPIKey returns the workspace of k.Secret (also with ErrKeyEnded, so a caller can
// run on without the key), binding a new key to the oldest workspace
// named name (created if there is none). serve, dev and the controller use it for
// MANAGED_AGENT_API_KEY: a configured key keeps its data across restarts, and a changed key
// reaches the same data while the key it replaces (the workspace's other configured keys)
// stops working. A revoked or expired key is not brought back: ErrKeyEnded.
func (s *Store) EnsureAPIKey(ctx context.Context, k NewAPIKey, name string) (string, error) {
	var ws string
	err := s.InTx(ctx, func(q *Queries) error {
		// Serialize concurrent first starts so one key never gets two workspaces.
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('managed_agents.ensure_api_key'))`); err != nil {
			return fmt.Errorf("lock api keys: %w", err)
		}
		found, err := q.KeyBySecret(ctx, k.Secret)
		if err == nil {
			ws = found.WorkspaceID
			if found.Admin || found.RevokedAt != nil || (found.ExpiresAt != nil && !found.ExpiresAt.After(time.Now())) {
				return fmt.Errorf("%w: %s (%s)", ErrKeyEnded, found.ID, found.Hint)
			}
			if found.Hint == "" && k.Hint != "" {
				// A key stored before keys had hints (migration 00008).
				if _, err := q.db.Exec(ctx, `UPDATE api_keys SET hint = $2 WHERE id = $1`, found.ID, k.Hint); err != nil {
					return fmt.Errorf("record the key's hint: %w", err)
				}
			}
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		if ws, err = q.ensureWorkspace(ctx, name); err != nil {
			return err
		}
		k.WorkspaceID, k.CreatedBy, k.Admin = ws, ConfiguredKey, false
		if _, err := q.InsertAPIKey(ctx, k); err != nil {
			return err
		}
		return q.revokeOtherConfiguredKeys(ctx, ws, k.Secret)
	})
	return ws, err
}

// ConfiguredKey is the creator recorded for a key that came from MANAGED_AGENT_API_KEY.
const ConfiguredKey = "MANAGED_AGENT_API_KEY"

func (q *Queries) revokeOtherConfiguredKeys(ctx context.Context, ws, keep string) error {
	rows, err := q.db.Query(ctx, `UPDATE api_keys SET revoked_at = now(), ended_by = 'replaced by a new MANAGED_AGENT_API_KEY'
		WHERE workspace_id = $1 AND created_by = $2 AND key_hash <> $3 AND revoked_at IS NULL RETURNING id`,
		ws, ConfiguredKey, hashKey(keep))
	if err != nil {
		return fmt.Errorf("revoke replaced configured keys: %w", err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("revoke replaced configured keys: %w", err)
	}
	for _, id := range ended {
		if _, err := q.db.Exec(ctx, `SELECT pg_notify($1, $2)`, string(TopicKeys), id); err != nil {
			return fmt.Errorf("notify key change: %w", err)
		}
	}
	return nil
}

// ErrKeyEnded is returned for a configured key that was revoked, has expired or is an admin key.
var ErrKeyEnded = errors.New("the configured API key was revoked, has expired or is an admin key")

// EnsureWorkspace returns the id of the oldest workspace named name, creating it when there
// is none. The controller maps each Kubernetes namespace to the workspace named after it;
// the advisory lock makes concurrent first uses of one name agree on a single workspace.
func (s *Store) EnsureWorkspace(ctx context.Context, name string) (string, error) {
	var ws string
	err := s.InTx(ctx, func(q *Queries) error {
		var err error
		ws, err = q.ensureWorkspace(ctx, name)
		return err
	})
	return ws, err
}

func (q *Queries) ensureWorkspace(ctx context.Context, name string) (string, error) {
	if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('managed_agents.ensure_workspace'), hashtext($1))`, name); err != nil {
		return "", fmt.Errorf("lock workspace name: %w", err)
	}
	var ws string
	err := q.db.QueryRow(ctx, `SELECT id FROM workspaces WHERE name = $1 ORDER BY created_at, id LIMIT 1`, name).Scan(&ws)
	if err == nil {
		return ws, nil
	}
	if err = classify(err); !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("look up workspace %q: %w", name, err)
	}
	return q.CreateWorkspace(ctx, name)
}

// WorkspaceExists reports whether a workspace with the id exists.
func (s *Store) WorkspaceExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up workspace: %w", classify(err))
	}
	return ok, nil
}
