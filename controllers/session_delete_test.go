package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
)

// tearingDown is an API whose session has a sandbox whose teardown has not finished (it
// keeps failing, say): every BeginDelete starts it again and the session stays.
type tearingDown struct {
	API
	begun int
}

func (a *tearingDown) BeginDelete(context.Context, string, string) (bool, error) {
	a.begun++
	return false, nil
}

func (a *tearingDown) SessionDeleted(context.Context, string, string) (bool, error) {
	return false, nil
}

// A Session whose teardown does not finish is looked at again soon at first and then less
// and less often, never more than once a minute in the end: each look starts the teardown
// again, and a teardown that fails for good was restarted every second, forever.
func TestAnUnfinishedDeleteIsRecheckedWithBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		deleting time.Duration // since the resource's deletion began
		want     time.Duration
	}{
		{deleting: 0, want: time.Second},
		{deleting: time.Second, want: time.Second},
		{deleting: 10 * time.Second, want: 5 * time.Second},
		{deleting: time.Minute, want: 30 * time.Second},
		{deleting: 10 * time.Minute, want: time.Minute},
		{deleting: 24 * time.Hour, want: time.Minute},
	}
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	for _, tt := range tests {
		t.Run(tt.deleting.String(), func(t *testing.T) {
			t.Parallel()
			s := &v1alpha1.Session{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s", Finalizers: []string{v1alpha1.Finalizer},
					// Whole seconds, as the apiserver keeps it; a little slack for the test's own time.
					DeletionTimestamp: &metav1.Time{Time: time.Now().Add(-tt.deleting).Truncate(time.Second)}},
				Status: v1alpha1.SessionStatus{WorkspaceID: "wrkspc_1", SessionID: "sesn_1"},
			}
			cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s).WithStatusSubresource(s).Build()
			api := &tearingDown{}
			r := &SessionReconciler{Client: cl, API: api}
			res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "s"}})
			require.NoError(t, err)
			require.Equal(t, 1, api.begun)
			require.InDelta(t, tt.want, res.RequeueAfter, float64(time.Second))
			var got v1alpha1.Session
			require.NoError(t, cl.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "s"}, &got))
			require.Contains(t, got.Finalizers, v1alpha1.Finalizer, "kept until the session is gone")
		})
	}
}
