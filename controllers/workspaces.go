package controllers

import (
	"context"
	"fmt"
	"sync"
)

// Workspaces maps a namespace to the API workspace its resources live in. Namespaces are
// the tenancy boundary: a namespace's Agents, Environments and Sessions live in its
// workspace only, so neither a resource in another namespace nor a REST client holding
// another workspace's key ever sees them.
//
// The mapping, in order: an explicit entry of Fixed (namespace → workspace id, for example
// `default` → the workspace of the deployment's API key, which is how `dev` and the Helm
// chart make the README's flow work); otherwise, when PerNamespace is set, the workspace
// named WorkspaceName(namespace), created on first use; otherwise the namespace is not
// served and its resources say so in a condition (reason NamespaceNotMapped).
type Workspaces struct {
	API          API
	Fixed        map[string]string
	PerNamespace bool

	mu    sync.Mutex
	cache map[string]string
}

// ErrNamespaceNotMapped is returned for a namespace that has no workspace.
type ErrNamespaceNotMapped struct{ Namespace string }

func (e ErrNamespaceNotMapped) Error() string {
	return fmt.Sprintf("namespace %s is not mapped to a workspace (MANAGED_AGENT_CONTROLLER_WORKSPACES) and per-namespace workspaces are off (MANAGED_AGENT_CONTROLLER_WORKSPACE_PER_NAMESPACE)", e.Namespace)
}

// WorkspaceName is the name of the workspace a namespace gets on first use.
func WorkspaceName(namespace string) string { return "kubernetes namespace " + namespace }

// For returns the namespace's workspace id.
func (w *Workspaces) For(ctx context.Context, namespace string) (string, error) {
	if id, ok := w.Fixed[namespace]; ok {
		return id, nil
	}
	if !w.PerNamespace {
		return "", ErrNamespaceNotMapped{Namespace: namespace}
	}
	w.mu.Lock()
	id, ok := w.cache[namespace]
	w.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := w.API.EnsureWorkspace(ctx, WorkspaceName(namespace))
	if err != nil {
		return "", fmt.Errorf("workspace of namespace %s: %w", namespace, err)
	}
	w.mu.Lock()
	if w.cache == nil {
		w.cache = map[string]string{}
	}
	w.cache[namespace] = id
	w.mu.Unlock()
	return id, nil
}
