package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrUnknownProvider is a Ref naming a provider this deployment does not run. It is
// permanent: retrying cannot make the provider appear, so callers must not retry it.
var ErrUnknownProvider = errors.New("unknown sandbox provider")

// Registry maps provider names to the deployment's providers (MANAGED_AGENT_SANDBOX picks
// the one new sandboxes are created with). Attach and Destroy go to the provider the stored
// Ref names, not the current default, so a deployment that switched providers still reaches
// the sandboxes made before.
type Registry struct {
	def       Provider
	providers map[string]Provider
}

// NewRegistry returns a registry that creates with def and also serves others' references.
func NewRegistry(def Provider, others ...Provider) (*Registry, error) {
	if def == nil {
		return nil, errors.New("sandbox registry: no default provider")
	}
	r := &Registry{def: def, providers: map[string]Provider{}}
	for _, p := range append([]Provider{def}, others...) {
		if p.Name() == "" {
			return nil, errors.New("sandbox registry: a provider has an empty name")
		}
		if _, dup := r.providers[p.Name()]; dup {
			return nil, fmt.Errorf("sandbox registry: provider %q registered twice", p.Name())
		}
		r.providers[p.Name()] = p
	}
	return r, nil
}

// Default is the provider new sandboxes are created with.
func (r *Registry) Default() Provider { return r.def }

// Provider returns the provider of that name, or an error wrapping ErrUnknownProvider.
func (r *Registry) Provider(name string) (Provider, error) {
	if p, ok := r.providers[name]; ok {
		return p, nil
	}
	names := slices.Sorted(maps.Keys(r.providers))
	return nil, fmt.Errorf("%w %q: this deployment runs %s", ErrUnknownProvider, name, strings.Join(names, ", "))
}

// Attach attaches through the provider ref names.
func (r *Registry) Attach(ctx context.Context, ref Ref) (Sandbox, error) {
	p, err := r.Provider(ref.Provider)
	if err != nil {
		return nil, fmt.Errorf("attach sandbox %s: %w", ref.ExternalID, err)
	}
	return p.Attach(ctx, ref)
}

// Destroy destroys through the provider ref names.
func (r *Registry) Destroy(ctx context.Context, ref Ref) error {
	p, err := r.Provider(ref.Provider)
	if err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", ref.ExternalID, err)
	}
	return p.Destroy(ctx, ref)
}

// Providers returns the deployment's providers, the default first.
func (r *Registry) Providers() []Provider {
	out := []Provider{r.def}
	for _, name := range slices.Sorted(maps.Keys(r.providers)) {
		if name != r.def.Name() {
			out = append(out, r.providers[name])
		}
	}
	return out
}
