package turns

import (
	"context"
	"errors"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/store"
)

// ErrNoBinding means the session has no sandbox yet.
var ErrNoBinding = sandbox.ErrNoBinding

// SandboxRef returns the stored reference of a session's ready sandbox, or ErrNoBinding
// (also while its acquisition is pending).
func (s *Service) SandboxRef(ctx context.Context, sessionID string) (sandbox.Ref, error) {
	b, err := s.Sandboxes().Binding(ctx, sessionID)
	if err != nil {
		return sandbox.Ref{}, err
	}
	if b.State != sandbox.BindingReady {
		return sandbox.Ref{}, ErrNoBinding
	}
	return b.Ref, nil
}

// bindingOf maps a stored binding to the sandbox package's.
func bindingOf(b store.Binding) sandbox.Binding {
	return sandbox.Binding{
		SessionID: b.SessionID, Ref: sandbox.Ref{Provider: b.Provider, ExternalID: b.ExternalID},
		Name: b.Name, SpecHash: b.SpecHash, State: b.State,
	}
}

func notFoundAsNoBinding(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrNoBinding
	}
	return err
}
