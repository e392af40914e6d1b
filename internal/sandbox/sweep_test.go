package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
)

// idleBindings is a SweepStore whose every binding is idle: SweepIdle calls fn for each and
// marks those it succeeds for.
type idleBindings struct {
	bindings []sandbox.Binding
	marked   map[string]bool
}

func (s *idleBindings) SweepIdle(ctx context.Context, _ time.Duration, _ bool, fn func(context.Context, sandbox.Binding) error) (int, error) {
	var errs []error
	for _, b := range s.bindings {
		if s.marked[b.SessionID] {
			continue // marked stopped or expired: a later sweep does not see it again
		}
		if err := fn(ctx, b); err != nil {
			errs = append(errs, err)
			continue
		}
		s.marked[b.SessionID] = true
	}
	return len(s.marked), errors.Join(errs...)
}

func (s *idleBindings) BindingsOf(context.Context, []string) (map[string]sandbox.AgedBinding, error) {
	return nil, nil
}

// A sandbox of a provider this deployment does not run (it switched providers) cannot be
// stopped or destroyed from here: the idle sweeps mark it and go on, instead of failing on
// it at every sweep for as long as the binding lives.
func TestIdleSweepsPassOverAForeignProvider(t *testing.T) {
	t.Parallel()
	reg, err := sandbox.NewRegistry(local.New(t.TempDir()))
	require.NoError(t, err)
	tests := []struct {
		name string
		sw   sandbox.Sweeper
		want sandbox.SweepResult
	}{
		{name: "retention", sw: sandbox.Sweeper{Retention: time.Hour}, want: sandbox.SweepResult{Destroyed: 1}},
		{name: "idle stop", sw: sandbox.Sweeper{IdleStop: time.Hour}, want: sandbox.SweepResult{Stopped: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &idleBindings{marked: map[string]bool{}, bindings: []sandbox.Binding{
				{SessionID: "sesn_1", Name: "ma-1", State: sandbox.BindingReady, Ref: sandbox.Ref{Provider: "docker", ExternalID: "c0ffee"}}}}
			sw := tt.sw
			sw.Registry, sw.Store = reg, store
			for range 2 {
				res, err := sw.Sweep(t.Context())
				require.NoError(t, err)
				require.Equal(t, tt.want, res)
			}
			require.True(t, store.marked["sesn_1"])
		})
	}
}
