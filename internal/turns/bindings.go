package turns

import (
	"context"
	"errors"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/store"
)

// ErrNoBinding means the session has no sandbox yet.
var ErrNoBinding = errors.New("session has no sandbox")

// SandboxRef returns the stored reference of a session's sandbox, or ErrNoBinding.
func (s *Service) SandboxRef(ctx context.Context, sessionID string) (sandbox.Ref, error) {
	b, err := s.store.GetBinding(ctx, sessionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return sandbox.Ref{}, ErrNoBinding
		}
		return sandbox.Ref{}, err
	}
	return sandbox.Ref{Provider: b.Provider, ExternalID: b.ExternalID}, nil
}

// BindSandbox records a session's sandbox. If the session already has one (a concurrent or
// retried acquisition won), the stored reference is returned and bound is false: the caller
// must destroy the sandbox it created.
func (s *Service) BindSandbox(ctx context.Context, sessionID string, ref sandbox.Ref, specHash string) (stored sandbox.Ref, bound bool, err error) {
	err = s.store.InsertBinding(ctx, store.Binding{SessionID: sessionID, Provider: ref.Provider, ExternalID: ref.ExternalID, SpecHash: specHash})
	switch {
	case err == nil:
		return ref, true, nil
	case errors.Is(err, store.ErrDuplicate):
		stored, err = s.SandboxRef(ctx, sessionID)
		return stored, false, err
	case errors.Is(err, store.ErrReferenced):
		return sandbox.Ref{}, false, ErrSessionGone
	}
	return sandbox.Ref{}, false, err
}

// UnbindSandbox forgets a session's sandbox after it was destroyed.
func (s *Service) UnbindSandbox(ctx context.Context, sessionID string) error {
	return s.store.DeleteBinding(ctx, sessionID)
}
