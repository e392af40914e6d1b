//go:build integration

package kubernetes_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
)

func readyCondition(t *testing.T, c client.Client, name string) (*v1alpha1.SandboxBinding, *metav1.Condition) {
	var b v1alpha1.SandboxBinding
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &b))
	return &b, meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
}

// TestSandboxBindingControllerRefusals: what the controller does when it cannot make a
// sandbox, seen on a binding written directly (as a worker would).
func TestSandboxBindingControllerRefusals(t *testing.T) {
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	ctx := t.Context()
	newBinding := func(session string) *v1alpha1.SandboxBinding {
		b := &v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: sandbox.NameFor(session), Namespace: ns},
			Spec: v1alpha1.SandboxBindingSpec{SessionID: session, Image: "sandbox:test"}}
		require.NoError(t, c.Client.Create(ctx, b))
		return b
	}

	t.Run("WithoutASandboxdImageNothingStarts", func(t *testing.T) {
		stop := c.RunSandboxController(t, controllers.SandboxPods{})
		defer stop()
		b := newBinding("sesn_no_image")
		require.Eventually(t, func() bool {
			_, cond := readyCondition(t, c.Client, b.Name)
			return cond != nil && cond.Reason == v1alpha1.ReasonNotConfigured
		}, 10*time.Second, 50*time.Millisecond)
		got, cond := readyCondition(t, c.Client, b.Name)
		require.Equal(t, v1alpha1.SandboxPending, got.Status.Phase)
		require.Contains(t, cond.Message, "MANAGED_AGENT_SANDBOXD_IMAGE")
		require.Contains(t, got.Finalizers, v1alpha1.Finalizer)
		var pods corev1.PodList
		require.NoError(t, c.Client.List(ctx, &pods, client.InNamespace(ns)))
		require.Empty(t, pods.Items)
	})

	t.Run("BindingsOutsideItsNamespaceGetNoPod", func(t *testing.T) {
		only := sandboxPods
		only.Namespace = "sandboxes-elsewhere"
		stop := c.RunSandboxController(t, only)
		defer stop()
		b := newBinding("sesn_other_namespace")
		require.Eventually(t, func() bool {
			_, cond := readyCondition(t, c.Client, b.Name)
			return cond != nil && cond.Reason == v1alpha1.ReasonNotConfigured
		}, 10*time.Second, 50*time.Millisecond)
		got, cond := readyCondition(t, c.Client, b.Name)
		require.Contains(t, cond.Message, "only in namespace sandboxes-elsewhere")
		require.NotContains(t, got.Finalizers, v1alpha1.Finalizer, "nothing made, nothing to finalize")
		var pods corev1.PodList
		require.NoError(t, c.Client.List(ctx, &pods, client.InNamespace(ns)))
		require.Empty(t, pods.Items)
		var secrets corev1.SecretList
		require.NoError(t, c.Client.List(ctx, &secrets, client.InNamespace(ns)))
		require.Empty(t, secrets.Items, "no token either")
		require.NoError(t, c.Client.Delete(ctx, b))
	})

	t.Run("APodItDidNotMakeIsNotAdopted", func(t *testing.T) {
		stop := c.RunSandboxController(t, sandboxPods)
		defer stop()
		name := sandbox.NameFor("sesn_squatted")
		squatter := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}
		require.NoError(t, c.Client.Create(ctx, squatter))
		b := newBinding("sesn_squatted")
		require.Eventually(t, func() bool {
			_, cond := readyCondition(t, c.Client, b.Name)
			return cond != nil && cond.Reason == v1alpha1.ReasonReconcileFailed
		}, 10*time.Second, 50*time.Millisecond)
		_, cond := readyCondition(t, c.Client, b.Name)
		require.Contains(t, cond.Message, "does not belong to sandbox binding")
		var pod corev1.Pod
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(squatter), &pod))
		require.Empty(t, pod.OwnerReferences, "the squatter is left alone")

		// Deleting the binding leaves the squatter too: the finalizer deletes only what the
		// binding owns.
		require.NoError(t, c.Client.Delete(ctx, b))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.SandboxBinding{}))
		}, 10*time.Second, 50*time.Millisecond)
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(squatter), &pod))
	})
}

// TestSandboxOrphansAreRemoved: pods, Secrets and NetworkPolicies labelled for a binding
// that no longer exists are removed by the controller (envtest has no garbage collector, as
// a cluster whose binding lost its finalizer has none for them); those of a live binding,
// and unlabelled ones, stay.
func TestSandboxOrphansAreRemoved(t *testing.T) {
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	ctx := t.Context()
	c.RunSandboxController(t, controllers.SandboxPods{}) // no image: bindings get no pods

	live := &v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: sandbox.NameFor("sesn_live"), Namespace: ns},
		Spec: v1alpha1.SandboxBindingSpec{SessionID: "sesn_live", Image: "sandbox:test"}}
	require.NoError(t, c.Client.Create(ctx, live))
	gone := sandbox.NameFor("sesn_gone")
	labelled := func(binding string) map[string]string {
		return map[string]string{v1alpha1.LabelSandboxBinding: binding, v1alpha1.LabelSessionID: "sesn_x"}
	}
	objects := func(name string, labels map[string]string) []client.Object {
		return []client.Object{
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-token", Namespace: ns, Labels: labels}},
			&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}},
		}
	}
	orphans := objects(gone, labelled(gone))
	kept := append(objects("ma-of-live", labelled(live.Name)), objects("unlabelled", nil)...)
	for _, obj := range append(slices.Clone(orphans), kept...) {
		require.NoError(t, c.Client.Create(ctx, obj))
	}
	for _, obj := range orphans {
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		}, 20*time.Second, 50*time.Millisecond, "%T %s is removed", obj, obj.GetName())
	}
	for _, obj := range kept {
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj), "%T %s stays", obj, obj.GetName())
	}
}
