package docker

import "github.com/managed-agents/managed-agents/internal/sandbox"

// WarmSpec makes the pool keep spec warm, as a Create of it would.
func WarmSpec(p *Provider, spec sandbox.Spec) { p.pool.seen(spec) }

// PoolReady is how many started, unclaimed containers the pool holds for spec.
func PoolReady(p *Provider, spec sandbox.Spec) int {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return len(p.pool.ready[p.pool.key(spec)])
}
