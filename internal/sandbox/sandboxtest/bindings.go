package sandboxtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// Bindings is an in-memory sandbox.BindingStore for tests of the Manager and its callers.
// It records its writes in order, so a test can check the pending-first protocol.
type Bindings struct {
	mu     sync.Mutex
	rows   map[string]sandbox.Binding
	writes []string
}

var _ sandbox.BindingStore = (*Bindings)(nil)

// NewBindings returns an empty store.
func NewBindings() *Bindings { return &Bindings{rows: map[string]sandbox.Binding{}} }

// Binding implements sandbox.BindingStore.
func (m *Bindings) Binding(_ context.Context, sessionID string) (sandbox.Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.rows[sessionID]
	if !ok {
		return sandbox.Binding{}, fmt.Errorf("session %s: %w", sessionID, sandbox.ErrNoBinding)
	}
	return b, nil
}

// InsertBinding implements sandbox.BindingStore.
func (m *Bindings) InsertBinding(_ context.Context, b sandbox.Binding) (sandbox.Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rows[b.SessionID]; ok {
		return old, nil
	}
	m.rows[b.SessionID] = b
	m.writes = append(m.writes, "insert "+b.State)
	return b, nil
}

// MarkReady implements sandbox.BindingStore.
func (m *Bindings) MarkReady(_ context.Context, sessionID string, ref sandbox.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.rows[sessionID]
	if !ok {
		return fmt.Errorf("session %s has no binding to mark ready", sessionID)
	}
	b.Ref, b.State = ref, sandbox.BindingReady
	m.rows[sessionID] = b
	m.writes = append(m.writes, "ready")
	return nil
}

// DeleteBinding implements sandbox.BindingStore.
func (m *Bindings) DeleteBinding(_ context.Context, sessionID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, sessionID)
	m.writes = append(m.writes, "delete")
	return nil
}

// Writes lists the writes so far: "insert pending", "ready", "delete".
func (m *Bindings) Writes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.writes...)
}
