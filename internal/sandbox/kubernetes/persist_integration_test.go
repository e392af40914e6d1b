//go:build integration

package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
)

func persistent(c *kubernetes.Config) { c.PersistentWorkspace = true }

// pod returns the binding's pod, nil if there is none.
func (w *world) pod(t *testing.T, name string) *corev1.Pod {
	var pod corev1.Pod
	err := w.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &pod
}

// claimGone reports whether the claim is deleted (envtest runs no controller that removes a
// claim's protection finalizer, so a deleted claim may stay terminating).
func (w *world) claimGone(t *testing.T, name string) bool {
	var pvc corev1.PersistentVolumeClaim
	err := w.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &pvc)
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return pvc.DeletionTimestamp != nil
}

// suspended waits for the binding to be suspended with its pod gone.
func (w *world) suspended(t *testing.T, name string) *v1alpha1.SandboxBinding {
	require.Eventually(t, func() bool {
		b := w.bindingOf(t, name)
		return b.Status.Phase == v1alpha1.SandboxSuspended && b.Status.ExternalID == "" && w.pod(t, name) == nil
	}, 20*time.Second, 50*time.Millisecond, "suspended: the pod deleted")
	return w.bindingOf(t, name)
}

// TestPersistentWorkspaces: a binding with a claim is suspended by Stop (pod deleted, claim
// kept) and resumed by Attach on a new pod with its files; an emptyDir one is never
// suspended; destroying deletes the claim.
func TestPersistentWorkspaces(t *testing.T) {
	w := newWorld(t)

	t.Run("ASuspendedBindingResumesWithItsFiles", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t, persistent)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		b := w.bindingOf(t, ref.ExternalID)
		require.True(t, b.Spec.Workspace.Persistent)
		claimName := b.Status.WorkspaceClaim
		require.Equal(t, ref.ExternalID+"-workspace", claimName)
		var pvc corev1.PersistentVolumeClaim
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, &pvc))
		require.True(t, metav1.IsControlledBy(&pvc, b), "the binding owns its claim")
		require.Equal(t, b.Spec.SessionID, pvc.Labels[v1alpha1.LabelSessionID])
		first := w.pod(t, ref.ExternalID)
		require.Equal(t, claimName, volume(first, "workspace").PersistentVolumeClaim.ClaimName, "the pod mounts the claim")

		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "notes/kept.txt", []byte("survives a suspension")))
		_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "echo made by bash > made.txt"})
		require.NoError(t, err)

		require.NoError(t, p.Stop(ctx, ref))
		b = w.suspended(t, ref.ExternalID)
		require.True(t, b.Spec.Suspended)
		cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
		require.Equal(t, metav1.ConditionFalse, cond.Status)
		require.Equal(t, v1alpha1.ReasonSuspended, cond.Reason)
		require.Empty(t, b.Status.Endpoint, "nothing to talk to")
		require.False(t, w.claimGone(t, claimName), "the claim is kept")
		dir := w.kubelet.ClaimDir(claimName)
		require.NotEmpty(t, dir)
		data, err := os.ReadFile(filepath.Join(dir, "notes", "kept.txt"))
		require.NoError(t, err)
		require.Equal(t, "survives a suspension", string(data), "the claim's directory outlives the pod")
		require.NoError(t, p.Stop(ctx, ref), "stopping a suspended sandbox again is a no-op")

		// A restarted worker (a fresh provider) resumes it on attaching.
		sb, err = w.provider(t, persistent).Attach(ctx, ref)
		require.NoError(t, err)
		got, err := sb.ReadFile(ctx, "notes/kept.txt")
		require.NoError(t, err)
		require.Equal(t, "survives a suspension", string(got))
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat made.txt"})
		require.NoError(t, err)
		require.Equal(t, "made by bash\n", string(res.Output))

		b = w.bindingOf(t, ref.ExternalID)
		second := w.pod(t, ref.ExternalID)
		require.NotNil(t, second)
		require.False(t, b.Spec.Suspended)
		require.Equal(t, v1alpha1.SandboxRunning, b.Status.Phase)
		require.NotEqual(t, first.UID, second.UID, "a new pod")
		require.Equal(t, string(second.UID), b.Status.ExternalID, "whose UID is the binding's now")

		// The resumed pod is guarded as the first was: deleted behind our back, it is gone.
		require.NoError(t, w.Client.Delete(ctx, second))
		require.Eventually(t, func() bool { return w.bindingOf(t, ref.ExternalID).Status.Phase == v1alpha1.SandboxFailed }, 20*time.Second, 50*time.Millisecond)
		_, err = p.Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone)
		require.ErrorIs(t, p.Stop(ctx, ref), sandbox.ErrGone, "a gone sandbox is not suspended")
	})

	t.Run("SuspendingAndResumingAtOnceEndsRunning", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t, persistent)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "a.txt", []byte("a")))
		// The idle sweep and an acquisition racing: the attach must not take the old pod's
		// Ready for the new one's.
		require.NoError(t, p.Stop(ctx, ref))
		sb, err = p.Attach(ctx, ref)
		require.NoError(t, err)
		got, err := sb.ReadFile(ctx, "a.txt")
		require.NoError(t, err)
		require.Equal(t, "a", string(got))
		require.Equal(t, v1alpha1.SandboxRunning, w.bindingOf(t, ref.ExternalID).Status.Phase)
	})

	t.Run("AnEmptyDirSandboxIsNotSuspended", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		before := w.pod(t, ref.ExternalID)
		require.NotNil(t, volume(before, "workspace").EmptyDir)
		require.NoError(t, p.Stop(ctx, ref), "not an error: the sweep goes on")
		b := w.bindingOf(t, ref.ExternalID)
		require.False(t, b.Spec.Suspended, "its pod would take its files along")
		require.Equal(t, before.UID, w.pod(t, ref.ExternalID).UID, "still running")
		require.Equal(t, v1alpha1.SandboxRunning, b.Status.Phase)

		// Nor can anyone else suspend it: the apiserver refuses.
		b.Spec.Suspended = true
		err = w.Client.Update(ctx, b)
		require.True(t, apierrors.IsInvalid(err), "%v", err)
		require.ErrorContains(t, err, "only a binding with a persistent workspace can be suspended")
	})

	t.Run("DestroyDeletesTheClaim", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t, persistent)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		claimName := w.bindingOf(t, ref.ExternalID).Status.WorkspaceClaim
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "x.txt", []byte("x")))
		require.NoError(t, p.Stop(ctx, ref))
		w.suspended(t, ref.ExternalID)
		require.NotEmpty(t, w.kubelet.ClaimDir(claimName))

		require.NoError(t, p.Destroy(ctx, ref), "destroying a suspended sandbox (the retention sweep)")
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID}, &v1alpha1.SandboxBinding{})) &&
				w.claimGone(t, claimName) && w.kubelet.ClaimDir(claimName) == ""
		}, 20*time.Second, 50*time.Millisecond, "the finalizer deletes the claim, and its files go with it")
		_, err = p.Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone)
	})

	t.Run("AClaimDeletedWhileSuspendedIsGoneNotReplaced", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t, persistent)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		claimName := w.bindingOf(t, ref.ExternalID).Status.WorkspaceClaim
		require.NoError(t, p.Stop(ctx, ref))
		w.suspended(t, ref.ExternalID)
		require.NoError(t, w.Client.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName}}))

		_, err = p.Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone, "a new claim would be empty")
		b := w.bindingOf(t, ref.ExternalID)
		require.Equal(t, v1alpha1.SandboxFailed, b.Status.Phase)
		require.Equal(t, v1alpha1.ReasonClaimGone, meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady).Reason)
		require.Nil(t, w.pod(t, ref.ExternalID), "no pod on a lost workspace")
	})
}

func volume(pod *corev1.Pod, name string) corev1.Volume {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	return corev1.Volume{}
}
