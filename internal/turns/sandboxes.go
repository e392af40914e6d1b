package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Sandboxes is what sandbox.Manager stores bindings through and reads specs from: the
// sandbox_bindings table and the session's environment.
type Sandboxes struct {
	store *store.Store
}

var (
	_ sandbox.BindingStore = Sandboxes{}
	_ sandbox.SpecSource   = Sandboxes{}
)

// Sandboxes returns the binding store and spec source of the sandbox manager.
func (s *Service) Sandboxes() Sandboxes { return Sandboxes{store: s.store} }

// Binding implements sandbox.BindingStore.
func (b Sandboxes) Binding(ctx context.Context, sessionID string) (sandbox.Binding, error) {
	rec, err := b.store.GetBinding(ctx, sessionID)
	if err != nil {
		return sandbox.Binding{}, notFoundAsNoBinding(err)
	}
	return bindingOf(rec), nil
}

// InsertBinding implements sandbox.BindingStore: if a concurrent or earlier attempt already
// wrote the session's binding, that one is returned. A session deleted meanwhile is
// ErrSessionGone.
func (b Sandboxes) InsertBinding(ctx context.Context, nb sandbox.Binding) (sandbox.Binding, error) {
	err := b.store.InsertBinding(ctx, store.Binding{
		SessionID: nb.SessionID, Provider: nb.Ref.Provider, Name: nb.Name, ExternalID: nb.Ref.ExternalID,
		SpecHash: nb.SpecHash, State: nb.State,
	})
	switch {
	case err == nil:
		return nb, nil
	case errors.Is(err, store.ErrDuplicate):
		return b.Binding(ctx, nb.SessionID)
	case errors.Is(err, store.ErrReferenced):
		return sandbox.Binding{}, ErrSessionGone
	}
	return sandbox.Binding{}, err
}

// MarkReady implements sandbox.BindingStore. A binding removed meanwhile (the session is
// being deleted) is ErrSessionGone.
func (b Sandboxes) MarkReady(ctx context.Context, sessionID string, ref sandbox.Ref) error {
	err := b.store.MarkBindingReady(ctx, sessionID, ref.ExternalID)
	if errors.Is(err, store.ErrNotFound) {
		return ErrSessionGone
	}
	return err
}

// DeleteBinding implements sandbox.BindingStore.
func (b Sandboxes) DeleteBinding(ctx context.Context, sessionID string) error {
	return b.store.DeleteBinding(ctx, sessionID)
}

// SandboxSpec implements sandbox.SpecSource: the spec of the session's environment as it is
// now.
func (b Sandboxes) SandboxSpec(ctx context.Context, sessionID string) (sandbox.Spec, error) {
	env, err := b.Environment(ctx, sessionID)
	if err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.SpecFor(sessionID, env), nil
}

// Environment returns the resolved config of the session's environment.
func (b Sandboxes) Environment(ctx context.Context, sessionID string) (wire.EnvironmentConfig, error) {
	sess, err := b.store.GetSessionByID(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return wire.EnvironmentConfig{}, ErrSessionGone
	}
	if err != nil {
		return wire.EnvironmentConfig{}, err
	}
	rec, err := b.store.GetEnvironment(ctx, sess.WorkspaceID, sess.EnvironmentID, false)
	if err != nil {
		return wire.EnvironmentConfig{}, fmt.Errorf("the environment of session %s: %w", sessionID, err)
	}
	var cfg wire.EnvironmentConfig
	if err := json.Unmarshal(rec.Config, &cfg); err != nil {
		return wire.EnvironmentConfig{}, fmt.Errorf("decode the config of environment %s: %w", rec.ID, err)
	}
	return cfg, nil
}
