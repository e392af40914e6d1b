//go:build integration

package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// sweepStore is a sweep store in which only the sessions of kept have a (ready) binding.
type sweepStore struct{ kept map[string]sandbox.Ref }

func (sweepStore) SweepIdle(context.Context, time.Duration, bool, func(context.Context, sandbox.Binding) error) (int, error) {
	return 0, nil
}

func (s sweepStore) BindingsOf(_ context.Context, ids []string) (map[string]sandbox.AgedBinding, error) {
	out := map[string]sandbox.AgedBinding{}
	for _, id := range ids {
		if ref, ok := s.kept[id]; ok {
			out[id] = sandbox.AgedBinding{Binding: sandbox.Binding{SessionID: id, Ref: ref, State: sandbox.BindingReady}, Since: time.Hour}
		}
	}
	return out, nil
}

// testSweep: the worker's orphan sweep removes, through the kubernetes provider's List and
// Destroy, the binding of a session that has no sandbox binding row any more, and keeps the
// one a session is bound to.
func testSweep(t *testing.T, w *world) {
	ctx := t.Context()
	p := w.provider(t)
	orphan, kept := spec(), spec()
	orphanRef, err := p.Create(ctx, orphan)
	require.NoError(t, err)
	keptRef, err := p.Create(ctx, kept)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), keptRef) })

	registry, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	sweeper := &sandbox.Sweeper{Registry: registry, Store: sweepStore{kept: map[string]sandbox.Ref{kept.SessionID: keptRef}}, OrphanGrace: time.Nanosecond}
	res, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Orphans, 1)
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: orphanRef.ExternalID}, &v1alpha1.SandboxBinding{}))
	}, 20*time.Second, 50*time.Millisecond, "the orphan's binding is deleted")
	require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: keptRef.ExternalID}, &v1alpha1.SandboxBinding{}), "the bound one stays")
}
