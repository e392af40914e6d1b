//go:build integration

package kubernetes_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
)

// newPool creates a warm pool whose template is the one w.provider writes into bindings, so
// the provider's sandboxes claim from it.
func (w *world) newPool(t testing.TB, name string, replicas int32) *v1alpha1.SandboxWarmPool {
	pool := &v1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SandboxWarmPoolSpec{Replicas: replicas, Template: v1alpha1.SandboxPodTemplate{
			Image: "sandbox:test", Port: w.kubelet.Port(), RuntimeClassName: ptr.To("gvisor")}}}
	require.NoError(t, w.Client.Create(t.Context(), pool))
	t.Cleanup(func() {
		// Pools of one template serve the same bindings: the next test must not find this one.
		ctx := context.Background()
		require.NoError(t, client.IgnoreNotFound(w.Client.Delete(ctx, pool)))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKeyFromObject(pool), &v1alpha1.SandboxWarmPool{}))
		}, 30*time.Second, 20*time.Millisecond)
	})
	return pool
}

// waitPool waits until the pool's status satisfies ok and returns it.
func (w *world) waitPool(t testing.TB, name string, ok func(*v1alpha1.SandboxWarmPool) bool) *v1alpha1.SandboxWarmPool {
	t.Helper()
	var pool v1alpha1.SandboxWarmPool
	require.Eventually(t, func() bool {
		require.NoError(t, w.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &pool))
		return ok(&pool)
	}, 30*time.Second, 20*time.Millisecond)
	return &pool
}

func filled(n int32) func(*v1alpha1.SandboxWarmPool) bool {
	return func(p *v1alpha1.SandboxWarmPool) bool {
		return p.Status.ReadyReplicas == n && p.Status.Replicas == n && meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	}
}

// unclaimed are the pool's pods (by UID) as the apiserver has them.
func (w *world) unclaimed(t *testing.T, pool string) map[types.UID]corev1.Pod {
	var pods corev1.PodList
	require.NoError(t, w.Client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelWarmPool: pool}))
	out := map[types.UID]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.UID] = p
		}
	}
	return out
}

// TestWarmPool: a SandboxWarmPool keeps ready pods that the provider's sandboxes claim
// instead of waiting for a pod of their own.
func TestWarmPool(t *testing.T) {
	w := newWorld(t)

	t.Run("ASessionClaimsAReadyPodAndThePoolRefills", func(t *testing.T) {
		ctx := t.Context()
		w.newPool(t, "claims", 2)
		pool := w.waitPool(t, "claims", filled(2))
		require.Equal(t, "agents.managed-agents.io/sandbox-warm-pool=claims", pool.Status.Selector)
		warm := w.unclaimed(t, "claims")
		require.Len(t, warm, 2)
		for _, p := range warm {
			require.Equal(t, pool.Status.TemplateHash, p.Labels[v1alpha1.LabelTemplateHash])
			require.NotContains(t, p.Labels, v1alpha1.LabelSessionID, "an unclaimed pod belongs to no session")
			require.True(t, metav1.IsControlledBy(&p, pool))
		}
		var np networkingv1.NetworkPolicy
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "claims-warmpool"}, &np))
		require.Empty(t, np.Spec.Ingress, "unclaimed pods are fenced off both ways")
		require.Empty(t, np.Spec.Egress)

		p := w.provider(t)
		s := spec()
		ref, err := p.Create(ctx, s)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		b := w.bindingOf(t, ref.ExternalID)
		require.Equal(t, "claims", b.Status.WarmPool)
		var pod corev1.Pod
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.PodName}, &pod))
		require.Contains(t, warm, pod.UID, "the pod kept its UID: it was claimed, not made")
		require.Equal(t, string(pod.UID), b.Status.ExternalID)
		require.True(t, metav1.IsControlledBy(&pod, b), "the binding owns it now")
		require.Len(t, pod.OwnerReferences, 1)
		require.Equal(t, s.SessionID, pod.Labels[v1alpha1.LabelSessionID])
		require.Equal(t, ref.ExternalID, pod.Labels[v1alpha1.LabelSandboxBinding], "so the binding's policy selects it")
		require.NotContains(t, pod.Labels, v1alpha1.LabelWarmPool)
		require.Equal(t, "claims", pod.Annotations[v1alpha1.AnnotationClaimedFrom])
		var secret corev1.Secret
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.TokenSecret}, &secret))
		require.Equal(t, pod.Name+"-token", secret.Name)
		require.True(t, metav1.IsControlledBy(&secret, &pod), "the token is the pod's, and goes with it")
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID}, &np))
		require.True(t, metav1.IsControlledBy(&np, b))

		var events corev1.EventList
		require.Eventually(t, func() bool {
			require.NoError(t, w.Client.List(ctx, &events, client.InNamespace(ns)))
			for _, e := range events.Items {
				if e.InvolvedObject.Name == ref.ExternalID && e.Reason == "Claimed" {
					return true
				}
			}
			return false
		}, 10*time.Second, 50*time.Millisecond, "an event says the sandbox was claimed warm")

		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "claimed.txt", []byte("warm")))
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat claimed.txt && echo -n \" $HOME\""})
		require.NoError(t, err)
		require.Equal(t, "warm "+w.kubelet.Dir(pod.UID), string(res.Output), "tools run in the claimed pod")

		require.Eventually(t, func() bool {
			refilled := w.unclaimed(t, "claims")
			_, again := refilled[pod.UID]
			return len(refilled) == 2 && !again
		}, 30*time.Second, 20*time.Millisecond, "the pool refilled with a new pod")
		w.waitPool(t, "claims", filled(2))
	})

	t.Run("ConcurrentSessionsNeverShareAPod", func(t *testing.T) {
		ctx := t.Context()
		// A second controller, as during a leader handover: two caches, two reconcilers
		// claiming from the same pool at the same time.
		stop := w.RunSandboxController(t, sandboxPods)
		defer stop()
		const pods, sessions = 3, 8
		w.newPool(t, "race", pods)
		w.waitPool(t, "race", filled(pods))
		p := w.provider(t)
		refs := make([]sandbox.Ref, sessions)
		var wg sync.WaitGroup
		errs := make([]error, sessions)
		for i := range sessions {
			wg.Go(func() { refs[i], errs[i] = p.Create(ctx, spec()) })
		}
		wg.Wait()
		owner := map[types.UID]string{}
		warm := 0
		for i, ref := range refs {
			require.NoError(t, errs[i])
			t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
			b := w.bindingOf(t, ref.ExternalID)
			if b.Status.WarmPool != "" {
				warm++
			}
			var pod corev1.Pod
			require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.PodName}, &pod))
			require.True(t, metav1.IsControlledBy(&pod, b))
			require.NotContains(t, owner, pod.UID, "pod %s claimed by %s and %s", pod.Name, owner[pod.UID], b.Name)
			owner[pod.UID] = b.Name
			sb, err := p.Attach(ctx, ref)
			require.NoError(t, err)
			require.NoError(t, sb.WriteFile(ctx, "who", []byte(b.Name)))
		}
		require.Positive(t, warm, "some sessions started warm")
		t.Logf("%d of %d sessions claimed a warm pod", warm, sessions)
		// Each sandbox has its own workspace: nobody overwrote another's file.
		for _, ref := range refs {
			sb, err := p.Attach(ctx, ref)
			require.NoError(t, err)
			got, err := sb.ReadFile(ctx, "who")
			require.NoError(t, err)
			require.Equal(t, ref.ExternalID, string(got))
		}
		stop()
		for _, ref := range refs {
			require.NoError(t, p.Destroy(ctx, ref))
		}
		require.Eventually(t, func() bool {
			var list corev1.PodList
			require.NoError(t, w.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{v1alpha1.LabelSandboxBinding}))
			for _, pod := range list.Items {
				if _, ours := owner[pod.UID]; ours {
					return false
				}
			}
			return true
		}, 30*time.Second, 50*time.Millisecond, "destroying the sandboxes deleted every pod they held")
		w.waitPool(t, "race", filled(pods))
	})

	t.Run("AnotherTemplateGetsAPodOfItsOwn", func(t *testing.T) {
		ctx := t.Context()
		w.newPool(t, "other", 1)
		w.waitPool(t, "other", filled(1))
		before := w.unclaimed(t, "other")
		for name, mod := range map[string]func(*kubernetes.Config){
			"image":           func(c *kubernetes.Config) { c.Image = "sandbox:other" },
			"service account": func(c *kubernetes.Config) { c.ServiceAccountName = "sandbox" },
		} {
			p := w.provider(t, mod)
			ref, err := p.Create(ctx, spec())
			require.NoError(t, err, name)
			b := w.bindingOf(t, ref.ExternalID)
			require.Empty(t, b.Status.WarmPool, name)
			require.Equal(t, b.Name, b.Status.PodName, "%s: a cold pod, named after the binding", name)
			require.NoError(t, p.Destroy(ctx, ref))
		}
		s := spec()
		s.Env = map[string]string{"GREETING": "hi"}
		p := w.provider(t)
		ref, err := p.Create(ctx, s)
		require.NoError(t, err)
		require.Empty(t, w.bindingOf(t, ref.ExternalID).Status.WarmPool, "env cannot be injected into a running pod")
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo $GREETING"})
		require.NoError(t, err)
		require.Equal(t, "hi\n", string(res.Output))
		require.NoError(t, p.Destroy(ctx, ref))
		require.Equal(t, before, w.unclaimed(t, "other"), "the pool's pod was not touched")
	})

	t.Run("AClaimedPodDeletedBehindOurBackIsGoneNotReplaced", func(t *testing.T) {
		ctx := t.Context()
		w.newPool(t, "gone", 1)
		w.waitPool(t, "gone", filled(1))
		p := w.provider(t)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		b := w.bindingOf(t, ref.ExternalID)
		require.Equal(t, "gone", b.Status.WarmPool)
		require.NoError(t, w.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b.Status.PodName}}))
		require.Eventually(t, func() bool { return w.bindingOf(t, ref.ExternalID).Status.Phase == v1alpha1.SandboxFailed }, 20*time.Second, 50*time.Millisecond)
		b = w.bindingOf(t, ref.ExternalID)
		require.Equal(t, v1alpha1.ReasonPodGone, meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady).Reason)
		_, err = p.Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone)
		var pods corev1.PodList
		require.NoError(t, w.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSandboxBinding: ref.ExternalID}))
		require.Empty(t, pods.Items, "neither a cold pod nor another claimed one")
		require.NoError(t, p.Destroy(ctx, ref))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.TokenSecret}, &corev1.Secret{}))
		}, 20*time.Second, 50*time.Millisecond, "the claimed pod's Secret goes with the binding")
	})

	t.Run("DeletingThePoolDeletesItsUnclaimedPodsOnly", func(t *testing.T) {
		ctx := t.Context()
		pool := w.newPool(t, "doomed", 2)
		w.waitPool(t, "doomed", filled(2))
		p := w.provider(t)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		b := w.bindingOf(t, ref.ExternalID)
		require.Equal(t, "doomed", b.Status.WarmPool)
		w.waitPool(t, "doomed", filled(2))
		warm := w.unclaimed(t, "doomed")

		require.NoError(t, w.Client.Delete(ctx, pool))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKeyFromObject(pool), &v1alpha1.SandboxWarmPool{}))
		}, 20*time.Second, 50*time.Millisecond)
		for _, pod := range warm {
			err := w.Client.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{})
			require.True(t, apierrors.IsNotFound(err), "unclaimed pod %s deleted: %v", pod.Name, err)
			err = w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod.Name + "-token"}, &corev1.Secret{})
			require.True(t, apierrors.IsNotFound(err), "and its token: %v", err)
		}
		require.True(t, apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "doomed-warmpool"}, &networkingv1.NetworkPolicy{})))
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.TokenSecret}, &corev1.Secret{}), "the claimed pod's token stays")

		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err, "the claimed pod is the binding's and stays")
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "echo still here"})
		require.NoError(t, err)
		require.Equal(t, "still here\n", string(res.Output))
	})

	t.Run("ScalingToZeroEmptiesThePool", func(t *testing.T) {
		ctx := t.Context()
		w.newPool(t, "scaled", 2)
		pool := w.waitPool(t, "scaled", filled(2))
		pool.Spec.Replicas = 0
		require.NoError(t, w.Client.Update(ctx, pool))
		w.waitPool(t, "scaled", func(p *v1alpha1.SandboxWarmPool) bool {
			return p.Status.Replicas == 0 && p.Status.ObservedGeneration == p.Generation
		})
		require.Eventually(t, func() bool { return len(w.unclaimed(t, "scaled")) == 0 }, 20*time.Second, 50*time.Millisecond)
		p := w.provider(t)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		require.Empty(t, w.bindingOf(t, ref.ExternalID).Status.WarmPool, "an empty pool gives nothing: cold")
		require.NoError(t, p.Destroy(ctx, ref))
	})
}

// BenchmarkProvider is the shared provider benchmark against envtest and the test's kubelet
// (which starts a pod within its 50ms poll): cold acquisition (binding, Secret, policy and
// pod made, the pod started, the binding Ready, attach), acquisition from a warm pool of two
// (the claim, attach), one `true` command and a 1 MB file write and read through sandboxd. On
// a real cluster the cold path adds scheduling, the image pull and the container start
// (seconds), which a claim skips.
func BenchmarkProvider(b *testing.B) {
	w := newWorld(b)
	p := w.provider(b)
	sandboxtest.Bench(b, p)

	w.newPool(b, "bench", 2)
	var names []string
	sandboxtest.BenchWarm(b, p, func(s sandbox.Spec) error {
		names = append(names, s.Name)
		w.waitPool(b, "bench", filled(2))
		return nil
	})
	// Every timed acquisition was a claim (the bindings are gone; their events stay).
	require.Eventually(b, func() bool {
		var events corev1.EventList
		require.NoError(b, w.Client.List(b.Context(), &events, client.InNamespace(ns)))
		claimed := map[string]bool{}
		for _, e := range events.Items {
			if e.Reason == "Claimed" {
				claimed[e.InvolvedObject.Name] = true
			}
		}
		for _, n := range names {
			if !claimed[n] {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "every warm acquisition claimed a pool pod")
}

// TestAClaimWhoseStatusWasLostIsFoundAgain: a controller that claimed a pool pod and died
// before writing the binding's status leaves a pod owned and labelled by the binding; the
// next controller takes that pod as the binding's instead of claiming or making another.
func TestAClaimWhoseStatusWasLostIsFoundAgain(t *testing.T) {
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	require.NoError(t, c.Client.Create(t.Context(), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}))
	w := &world{Cluster: c, kubelet: kubetest.Start(t, c.Client, ns)}
	ctx := t.Context()
	stop := c.RunSandboxController(t, sandboxPods)
	w.newPool(t, "lost", 2)
	pool := w.waitPool(t, "lost", filled(2))
	stop()

	s := spec()
	b := &v1alpha1.SandboxBinding{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns, Finalizers: []string{v1alpha1.Finalizer}},
		Spec: v1alpha1.SandboxBindingSpec{SessionID: s.SessionID, Image: "sandbox:test", Port: w.kubelet.Port(), RuntimeClassName: ptr.To("gvisor")}}
	require.NoError(t, c.Client.Create(ctx, b))
	var taken corev1.Pod
	for _, p := range w.unclaimed(t, "lost") {
		taken = p
	}
	// What the dead controller's claim wrote, and nothing more.
	taken.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SandboxBinding", Name: b.Name, UID: b.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	delete(taken.Labels, v1alpha1.LabelWarmPool)
	delete(taken.Labels, v1alpha1.LabelTemplateHash)
	taken.Labels[v1alpha1.LabelSandboxBinding], taken.Labels[v1alpha1.LabelSessionID] = b.Name, s.SessionID
	taken.Annotations = map[string]string{v1alpha1.AnnotationClaimedFrom: pool.Name}
	require.NoError(t, c.Client.Update(ctx, &taken))

	c.RunSandboxController(t, sandboxPods)
	require.Eventually(t, func() bool {
		got := w.bindingOf(t, b.Name)
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
	}, 30*time.Second, 20*time.Millisecond)
	got := w.bindingOf(t, b.Name)
	require.Equal(t, taken.Name, got.Status.PodName, "the claimed pod, found by its label")
	require.Equal(t, string(taken.UID), got.Status.ExternalID)
	require.Equal(t, "lost", got.Status.WarmPool)
	require.Equal(t, taken.Name+"-token", got.Status.TokenSecret)
	var pods corev1.PodList
	require.NoError(t, c.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSandboxBinding: b.Name}))
	require.Len(t, pods.Items, 1, "no second pod for the binding")
	w.waitPool(t, "lost", filled(2))

	// While this controller runs (cleanups run in reverse), the binding goes with its pod.
	require.NoError(t, c.Client.Delete(ctx, b))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKeyFromObject(&taken), &corev1.Pod{})) &&
			apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: taken.Name + "-token"}, &corev1.Secret{}))
	}, 30*time.Second, 20*time.Millisecond, "the finalizer deletes the claimed pod and its token")
	require.NoError(t, c.Client.Delete(ctx, pool))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKeyFromObject(pool), &v1alpha1.SandboxWarmPool{}))
	}, 30*time.Second, 20*time.Millisecond)
}
