// Package sandboxtest is the provider contract suite every sandbox provider runs (river's
// driver-test pattern): create, idempotent create on the spec's name, attach, re-attach from
// a fresh provider instance (a restarted worker), ErrGone after destroy, double destroy, and
// forged or foreign references. The built-in tools suite on top of a sandbox is
// tools/toolstest.
//
// It imports only sandbox, wire and testing packages.
package sandboxtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Harness is what the suite needs of a provider under test.
type Harness struct {
	// New returns a provider over the same backing resources every time it is called within
	// one test (the same root directory, the same daemon or account): a second instance is
	// how the suite restarts the worker.
	New func(t *testing.T) sandbox.Provider
	// Forged are references of this provider's name that it must refuse before touching
	// anything (path tricks, malformed ids); the suite adds foreign ones itself.
	Forged []sandbox.Ref
}

var names atomic.Int64

// spec returns a spec with a name no other test of the process uses.
func spec(t *testing.T) sandbox.Spec {
	n := names.Add(1)
	session := fmt.Sprintf("sesn_contract_%d", n)
	s := sandbox.SpecFor(session, wire.EnvironmentConfig{Type: "cloud"})
	s.Env = map[string]string{"CONTRACT": "yes"}
	return s
}

// Run runs the contract. Subtests run in parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	t.Run("CreateAttachDestroy", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := h.New(t)
		ref, err := p.Create(ctx, spec(t))
		require.NoError(t, err)
		require.Equal(t, p.Name(), ref.Provider, "a ref names the provider that made it")
		require.NotEmpty(t, ref.ExternalID)
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: `printf %s "$CONTRACT"`})
		require.NoError(t, err)
		require.Equal(t, "yes", string(res.Output), "the spec's environment reaches commands")
		require.NoError(t, p.Destroy(ctx, ref))
		_, err = p.Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone)
		require.NoError(t, p.Destroy(ctx, ref), "destroying twice is not an error")
		require.NoError(t, h.New(t).Destroy(ctx, ref), "nor destroying from another instance")
	})

	t.Run("CreateIsIdempotentOnTheName", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := h.New(t)
		s := spec(t)
		first, err := p.Create(ctx, s)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), first) })
		sb, err := p.Attach(ctx, first)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "made.txt", []byte("by the first attempt")))

		again, err := p.Create(ctx, s)
		require.NoError(t, err)
		require.Equal(t, first, again, "a retried create adopts what the first made")
		fresh, err := h.New(t).Create(ctx, s)
		require.NoError(t, err)
		require.Equal(t, first, fresh, "also from a fresh provider instance")
		adopted, err := p.Attach(ctx, again)
		require.NoError(t, err)
		data, err := adopted.ReadFile(ctx, "made.txt")
		require.NoError(t, err)
		require.Equal(t, "by the first attempt", string(data))

		other := spec(t)
		second, err := p.Create(ctx, other)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), second) })
		require.NotEqual(t, first.ExternalID, second.ExternalID, "another name is another sandbox")
		sb2, err := p.Attach(ctx, second)
		require.NoError(t, err)
		_, err = sb2.ReadFile(ctx, "made.txt")
		require.ErrorIs(t, err, sandbox.ErrNotExist, "sandboxes share nothing")
	})

	t.Run("ConcurrentCreatesMakeOne", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := spec(t)
		refs := make([]sandbox.Ref, 4)
		errs := make([]error, len(refs))
		var wg sync.WaitGroup
		for i := range refs {
			wg.Go(func() { refs[i], errs[i] = h.New(t).Create(ctx, s) })
		}
		wg.Wait()
		for i := range refs {
			require.NoError(t, errs[i])
			require.Equal(t, refs[0], refs[i])
		}
		require.NoError(t, h.New(t).Destroy(ctx, refs[0]))
	})

	t.Run("ReattachFromAFreshInstance", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := h.New(t)
		ref, err := p.Create(ctx, spec(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "kept.txt", []byte("kept")))

		again, err := h.New(t).Attach(ctx, ref)
		require.NoError(t, err)
		data, err := again.ReadFile(ctx, "kept.txt")
		require.NoError(t, err)
		require.Equal(t, "kept", string(data), "files persist across a worker restart")
		res, err := again.Exec(ctx, sandbox.ExecRequest{Command: `printf %s "$CONTRACT"`})
		require.NoError(t, err)
		require.Equal(t, "yes", string(res.Output), "and so does the spec's environment")
	})

	t.Run("ClientOfADestroyedSandboxReportsGone", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := h.New(t)
		ref, err := p.Create(ctx, spec(t))
		require.NoError(t, err)
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, p.Destroy(ctx, ref))
		_, err = sb.ReadFile(ctx, "anything")
		require.ErrorIs(t, err, sandbox.ErrGone)
		_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
		require.ErrorIs(t, err, sandbox.ErrGone)
	})

	t.Run("ForeignReferencesAreRefused", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := h.New(t)
		ref, err := p.Create(ctx, spec(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		foreign := sandbox.Ref{Provider: "not-" + p.Name(), ExternalID: ref.ExternalID}
		_, err = p.Attach(ctx, foreign)
		require.ErrorIs(t, err, sandbox.ErrForeignRef)
		require.ErrorIs(t, p.Destroy(ctx, foreign), sandbox.ErrForeignRef)
		_, err = p.Attach(ctx, ref)
		require.NoError(t, err, "refusing a foreign ref touched nothing")
	})

	t.Run("ForgedReferencesAreRefused", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := h.New(t)
		forged := append([]sandbox.Ref{{Provider: p.Name(), ExternalID: ""}}, h.Forged...)
		for _, ref := range forged {
			_, err := p.Attach(ctx, ref)
			require.ErrorIs(t, err, sandbox.ErrInvalidRef, "attach %+v", ref)
			require.ErrorIs(t, p.Destroy(ctx, ref), sandbox.ErrInvalidRef, "destroy %+v", ref)
		}
	})

	t.Run("CreateNeedsAName", func(t *testing.T) {
		t.Parallel()
		s := spec(t)
		s.Name = ""
		_, err := h.New(t).Create(t.Context(), s)
		require.Error(t, err, "without a name a retried create could not adopt")
	})
}
