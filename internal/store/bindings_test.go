//go:build integration

package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBindingLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sid := f.newSession(t)

	_, err := f.st.GetBinding(ctx, sid)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, f.st.MarkBindingReady(ctx, sid, "x"), ErrNotFound)

	pending := Binding{SessionID: sid, Provider: "local", Name: "ma-1", SpecHash: "h", State: BindingPending}
	require.NoError(t, f.st.InsertBinding(ctx, pending))
	got, err := f.st.GetBinding(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, pending, got)
	require.ErrorIs(t, f.st.InsertBinding(ctx, pending), ErrDuplicate)

	require.NoError(t, f.st.MarkBindingReady(ctx, sid, "sess-1"))
	require.NoError(t, f.st.MarkBindingReady(ctx, sid, "sess-1"), "a retried mark is fine")
	got, err = f.st.GetBinding(ctx, sid)
	require.NoError(t, err)
	ready := pending
	ready.ExternalID, ready.State = "sess-1", BindingReady
	require.Equal(t, ready, got)

	require.ErrorIs(t, f.st.InsertBinding(ctx, Binding{SessionID: "sesn_missing", Provider: "local", Name: "n", State: BindingPending}), ErrReferenced)
	require.NoError(t, f.st.DeleteBinding(ctx, sid))
	require.NoError(t, f.st.DeleteBinding(ctx, sid), "deleting twice is fine")
	_, err = f.st.GetBinding(ctx, sid)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestWithTryLockRunsOneAtATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	ran, err := f.st.WithTryLock(ctx, "test.sweep", func(ctx context.Context) error {
		again, err := f.st.WithTryLock(ctx, "test.sweep", func(context.Context) error {
			t.Error("ran while the lock was held")
			return nil
		})
		require.NoError(t, err)
		require.False(t, again, "a second holder skips the round")
		return nil
	})
	require.NoError(t, err)
	require.True(t, ran)
	ran, err = f.st.WithTryLock(ctx, "test.sweep", func(context.Context) error { return nil })
	require.NoError(t, err)
	require.True(t, ran, "released after the first")
}
