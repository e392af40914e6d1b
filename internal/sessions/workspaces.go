package sessions

import (
	"context"
	"errors"

	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// EnsureWorkspace returns the workspace named name, creating it on first use. The
// Kubernetes controller keeps one workspace per namespace this way.
func (s *Service) EnsureWorkspace(ctx context.Context, name string) (string, error) {
	if err := checkLen("workspace name", name, 1, maxNameLen); err != nil {
		return "", err
	}
	return s.store.EnsureWorkspace(ctx, name)
}

// WorkspaceExists reports whether the workspace id exists.
func (s *Service) WorkspaceExists(ctx context.Context, id string) (bool, error) {
	return s.store.WorkspaceExists(ctx, id)
}

// SessionByKey returns the session of the workspace created with the idempotency key,
// whatever request created it; found is false when there is none. The controller uses it to
// adopt the session an earlier attempt created before it retries the create, so a spec
// changed in between cannot turn the retry into a KindKeyReused error.
func (s *Service) SessionByKey(ctx context.Context, workspaceID, key string) (sess wire.Session, found bool, err error) {
	rec, _, err := s.store.SessionByExternalKey(ctx, workspaceID, key)
	if errors.Is(err, store.ErrNotFound) {
		return wire.Session{}, false, nil
	}
	if err != nil {
		return wire.Session{}, false, err
	}
	sess, err = s.sessionFromRecord(rec)
	return sess, err == nil, err
}
