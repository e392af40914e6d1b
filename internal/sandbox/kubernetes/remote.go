package kubernetes

import (
	"context"
	"fmt"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// attachRemote attaches the sandbox of a binding that names a remote provider: the
// controller created it there and recorded its id; this worker reaches it through its own
// client of that provider, by the id, as it would a sandbox it made itself.
func (p *Provider) attachRemote(ctx context.Context, b *v1alpha1.SandboxBinding) (sandbox.Sandbox, error) {
	remote, ok := p.cfg.Remote[b.Spec.Provider]
	if !ok {
		return nil, fmt.Errorf("sandbox binding %s names provider %q, which this worker has no client of (set MANAGED_AGENT_KUBERNETES_PROVIDER=%s and its settings)",
			b.Name, b.Spec.Provider, b.Spec.Provider)
	}
	sb, err := remote.Attach(ctx, sandbox.Ref{Provider: b.Spec.Provider, ExternalID: b.Status.ExternalID})
	if err != nil {
		return nil, fmt.Errorf("attach the %s sandbox %s of binding %s: %w", b.Spec.Provider, b.Status.ExternalID, b.Name, err)
	}
	return sb, nil
}

// stopRemote pauses an idle remote sandbox when its provider can (Stop, for the idle sweep).
func (p *Provider) stopRemote(ctx context.Context, b *v1alpha1.SandboxBinding) error {
	remote, ok := p.cfg.Remote[b.Spec.Provider]
	if !ok {
		return nil
	}
	st, ok := remote.(sandbox.Stopper)
	if !ok || b.Status.ExternalID == "" {
		return nil
	}
	return st.Stop(ctx, sandbox.Ref{Provider: b.Spec.Provider, ExternalID: b.Status.ExternalID})
}
