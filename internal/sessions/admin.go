package sessions

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/store"
)

// Workspace and APIKey are what the admin operations return.
type (
	Workspace = store.Workspace
	APIKey    = store.APIKey
)

// Actor names who performs an admin action, for the audit log: the admin key's hint, or
// "admin CLI" for the command line.
type Actor string

// maxKeyLabelLen bounds a key's label.
const maxKeyLabelLen = 256

// KeyRequest describes a key to create.
type KeyRequest struct {
	// WorkspaceID is required unless Admin.
	WorkspaceID string
	Label       string
	ExpiresAt   *time.Time
	// Admin makes a key that authorises the admin API and nothing else.
	Admin bool
	// EnvironmentID makes an environment key: one that authorises the work queue of this
	// self-hosted environment of the workspace and the sessions it hands out, and nothing
	// else (docs/self-hosted-environments.md).
	EnvironmentID string
}

// NewKey is a created key: Secret is shown once and never stored.
type NewKey struct {
	APIKey
	Secret string
}

// CreateWorkspace creates a workspace.
func (s *Service) CreateWorkspace(ctx context.Context, actor Actor, name string) (Workspace, error) {
	if err := checkLen("name", name, 1, maxNameLen); err != nil {
		return Workspace{}, err
	}
	id, err := s.store.CreateWorkspace(ctx, name)
	if err != nil {
		return Workspace{}, err
	}
	s.audit(ctx, actor, "workspace.create", slog.String("workspace_id", id), slog.String("name", name))
	return Workspace{ID: id, Name: name, CreatedAt: s.now()}, nil
}

// ListWorkspaces returns every workspace, oldest first.
func (s *Service) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	return s.store.ListWorkspaces(ctx)
}

// CreateKey creates an API key and returns it with its secret, which is never shown again.
func (s *Service) CreateKey(ctx context.Context, actor Actor, req KeyRequest) (NewKey, error) {
	if err := checkLen("label", req.Label, 0, maxKeyLabelLen); err != nil {
		return NewKey{}, err
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.now()) {
		return NewKey{}, invalidf("expires_at: must be in the future")
	}
	switch {
	case req.Admin && req.WorkspaceID != "":
		return NewKey{}, invalidf("an admin key belongs to no workspace: give workspace_id or admin, not both")
	case !req.Admin && req.WorkspaceID == "":
		return NewKey{}, invalidf("workspace_id: required")
	case !req.Admin:
		if !ids.HasPrefix(req.WorkspaceID, ids.Workspace) {
			return NewKey{}, notFoundf("workspace %s not found", req.WorkspaceID)
		}
		ok, err := s.store.WorkspaceExists(ctx, req.WorkspaceID)
		if err != nil {
			return NewKey{}, err
		}
		if !ok {
			return NewKey{}, notFoundf("workspace %s not found", req.WorkspaceID)
		}
	}
	if req.EnvironmentID != "" {
		if err := s.checkKeyEnvironment(ctx, req.WorkspaceID, req.EnvironmentID); err != nil {
			return NewKey{}, err
		}
	}
	secret := NewKeySecret()
	k, err := s.store.InsertAPIKey(ctx, store.NewAPIKey{WorkspaceID: req.WorkspaceID, Secret: secret, Label: req.Label,
		Hint: generatedHint(secret), Admin: req.Admin, EnvironmentID: req.EnvironmentID, CreatedBy: string(actor), ExpiresAt: req.ExpiresAt})
	if err != nil {
		return NewKey{}, err
	}
	s.audit(ctx, actor, "key.create", keyAttrs(k)...)
	return NewKey{APIKey: k, Secret: secret}, nil
}

// ListKeys returns a workspace's keys, or every key when workspaceID is empty.
func (s *Service) ListKeys(ctx context.Context, workspaceID string) ([]APIKey, error) {
	return s.store.ListAPIKeys(ctx, workspaceID)
}

// RevokeKey ends a key now, on every API process (its open streams end too). Revoking a
// revoked key changes nothing.
func (s *Service) RevokeKey(ctx context.Context, actor Actor, keyID string) (APIKey, error) {
	var k APIKey
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		var err error
		k, err = q.EndAPIKey(ctx, keyID, s.now(), true, string(actor))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return APIKey{}, notFoundf("key %s not found", keyID)
	}
	if err != nil {
		return APIKey{}, err
	}
	// This process drops the key now; the NOTIFY reaches the others (and this one again,
	// harmlessly) a moment later.
	s.keys.Notify(ctx, keyID)
	s.audit(ctx, actor, "key.revoke", keyAttrs(k)...)
	return k, nil
}

// RotateKey creates a key like keyID (workspace, label, admin flag, expiry) and ends keyID:
// now when grace is zero, else after grace, so clients can move over.
func (s *Service) RotateKey(ctx context.Context, actor Actor, keyID string, grace time.Duration) (NewKey, APIKey, error) {
	if grace < 0 || grace > 30*24*time.Hour {
		return NewKey{}, APIKey{}, invalidf("grace: must be between 0 and 720h")
	}
	secret := NewKeySecret()
	var created, old APIKey
	err := s.store.InTx(ctx, func(q *store.Queries) error {
		cur, err := q.APIKeyForUpdate(ctx, keyID)
		if err != nil {
			return err
		}
		if !usable(cur, s.now()) {
			return invalidf("key %s was revoked or has expired: create a new key instead", keyID)
		}
		if created, err = q.InsertAPIKey(ctx, store.NewAPIKey{WorkspaceID: cur.WorkspaceID, Secret: secret, Label: cur.Label,
			Hint: generatedHint(secret), Admin: cur.Admin, EnvironmentID: cur.EnvironmentID, CreatedBy: string(actor), ExpiresAt: cur.ExpiresAt}); err != nil {
			return err
		}
		old, err = q.EndAPIKey(ctx, keyID, s.now().Add(grace), grace == 0, string(actor))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return NewKey{}, APIKey{}, notFoundf("key %s not found", keyID)
	}
	if err != nil {
		return NewKey{}, APIKey{}, err
	}
	s.keys.Notify(ctx, keyID)
	s.audit(ctx, actor, "key.rotate", append(keyAttrs(old), slog.String("new_key_id", created.ID), slog.Duration("grace", grace))...)
	return NewKey{APIKey: created, Secret: secret}, old, nil
}

func keyAttrs(k APIKey) []slog.Attr {
	return []slog.Attr{slog.String("key_id", k.ID), slog.String("key", k.Hint), slog.String("workspace_id", k.WorkspaceID), slog.String("environment_id", k.EnvironmentID), slog.Bool("admin", k.Admin)}
}

// audit logs an admin action at info with who did it; it is the audit trail.
func (s *Service) audit(ctx context.Context, actor Actor, action string, attrs ...slog.Attr) {
	s.logger.LogAttrs(ctx, slog.LevelInfo, "admin action", append([]slog.Attr{slog.String("action", action), slog.String("actor", string(actor))}, attrs...)...)
}

// checkKeyEnvironment: an environment key is for a self-hosted environment of the key's own
// workspace that is not archived. Another workspace's environment is not found, as everywhere.
func (s *Service) checkKeyEnvironment(ctx context.Context, workspaceID, environmentID string) error {
	if workspaceID == "" {
		return invalidf("environment_id: an environment key belongs to a workspace: give workspace_id")
	}
	env, err := s.store.GetEnvironment(ctx, workspaceID, environmentID, false)
	if errors.Is(err, store.ErrNotFound) {
		return notFoundf("environment %s not found", environmentID)
	}
	if err != nil {
		return err
	}
	cfg, err := environmentConfig(env)
	if err != nil {
		return err
	}
	if cfg.Type != "self_hosted" {
		return invalidf("environment_id: environment %s is not self_hosted; only a self-hosted environment has a work queue", environmentID)
	}
	if env.ArchivedAt != nil {
		return invalidf("environment_id: environment %s is archived", environmentID)
	}
	return nil
}
