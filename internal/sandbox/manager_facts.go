package sandbox

import "context"

// Spec is the spec of the session's sandbox as Acquire would make it now: its environment's
// with the effective egress resolved against the deployment's ceiling. It is for what tells
// the model where it runs (the agent's harness preamble); it creates nothing.
func (m *Manager) Spec(ctx context.Context, sessionID string) (Spec, error) {
	return m.spec(ctx, sessionID)
}

// DefaultProvider is the name of the provider new sandboxes are made with.
func (m *Manager) DefaultProvider() string { return m.registry.Default().Name() }
