package docker

import (
	"context"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// WarmSpec makes the pool keep spec warm, as a Create of it would.
func WarmSpec(p *Provider, spec sandbox.Spec) { p.pool.seen(spec) }

// PoolReady is how many started, unclaimed containers the pool holds for spec.
func PoolReady(p *Provider, spec sandbox.Spec) int {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return len(p.pool.ready[p.pool.key(spec)])
}

// BuildContainer is the name of the container that builds the environment image of packages
// on the base image of that id.
func BuildContainer(baseID string, packages map[string][]string) string {
	return buildName(envKey(baseID, packages))
}

// Reconcile runs one of the pool's reconciliations with the engine now.
func Reconcile(p *Provider) { p.pool.reconcile(context.Background()) }

// UseRunner makes providers whose configuration names no runner run the binary at path: a
// test's executable is the test binary, not managed-agents.
func UseRunner(path string) { defaultRunner = func() (string, error) { return path, nil } }

// RunnerVolume is the runner volume of the provider's binary.
func RunnerVolume(p *Provider) string { return p.runner.bin.volume() }
