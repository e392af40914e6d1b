//go:build integration

package kubernetes_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

const ns = "sandboxes"

var sandboxPods = controllers.SandboxPods{
	SandboxdImage: "managed-agents:test",
	Workers:       controllers.PodPeer{Namespace: "agents", Selector: map[string]string{"app.kubernetes.io/component": "worker"}},
}

// world is one apiserver with the SandboxBinding controller and the test's kubelet.
type world struct {
	*kubetest.Cluster
	kubelet *kubetest.Kubelet
}

func newWorld(t testing.TB) *world {
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	// The RuntimeClass admission plugin refuses pods naming a class that does not exist.
	require.NoError(t, c.Client.Create(t.Context(), &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}))
	w := &world{Cluster: c, kubelet: kubetest.Start(t, c.Client, ns)}
	pods := sandboxPods
	startEgress(t, &pods)
	c.RunSandboxController(t, pods)
	return w
}

func (w *world) provider(t testing.TB, mod ...func(*kubernetes.Config)) *kubernetes.Provider {
	cfg := kubernetes.Config{Client: w.Client, Namespace: ns, Image: "sandbox:test", Port: w.kubelet.Port(),
		RuntimeClassName: "gvisor", PollInterval: 20 * time.Millisecond, ReadyTimeout: time.Minute}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := kubernetes.New(cfg)
	require.NoError(t, err)
	return p
}

var sessions atomic.Int64

func spec() sandbox.Spec {
	return sandbox.SpecFor(fmt.Sprintf("sesn_kube_%d", sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
}

func (w *world) bindingOf(t testing.TB, name string) *v1alpha1.SandboxBinding {
	var b v1alpha1.SandboxBinding
	require.NoError(t, w.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &b))
	return &b
}

// TestKubernetesProvider runs everything on one apiserver (starting one takes seconds).
func TestKubernetesProvider(t *testing.T) {
	w := newWorld(t)

	t.Run("Contract", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{
			New: func(t *testing.T) sandbox.Provider { return w.provider(t) },
			Forged: []sandbox.Ref{
				{Provider: kubernetes.Name, ExternalID: "ma-../../etc"},
				{Provider: kubernetes.Name, ExternalID: "kube-system"},
				{Provider: kubernetes.Name, ExternalID: "MA-00000000000000000000000000000000"},
			},
		})
	})

	t.Run("Tools", func(t *testing.T) {
		p := w.provider(t)
		toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
			ref, err := p.Create(t.Context(), spec())
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
			sb, err := p.Attach(t.Context(), ref)
			require.NoError(t, err)
			return sb
		})
	})

	t.Run("ThePodIsRestrictedAndFenced", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		s := spec()
		s.Egress = sandbox.Egress{Mode: sandbox.EgressFull}
		ref, err := p.Create(ctx, s)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		b := w.bindingOf(t, ref.ExternalID)

		var pod corev1.Pod
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID}, &pod))
		require.True(t, metav1.IsControlledBy(&pod, b), "the binding owns its pod")
		require.Equal(t, s.SessionID, pod.Labels[v1alpha1.LabelSessionID])
		require.Equal(t, "gvisor", *pod.Spec.RuntimeClassName)
		require.False(t, *pod.Spec.AutomountServiceAccountToken)
		require.True(t, *pod.Spec.SecurityContext.RunAsNonRoot)
		require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.Spec.SecurityContext.SeccompProfile.Type)
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
			require.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
			require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
		}
		require.Equal(t, "managed-agents:test", pod.Spec.InitContainers[0].Image)
		require.Equal(t, "sandbox:test", pod.Spec.Containers[0].Image)
		// The environment names no resources: the controller's defaults, requested and limited.
		res := pod.Spec.Containers[0].Resources
		for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
			require.Zero(t, list.Cpu().Cmp(resource.MustParse(controllers.DefaultSandboxCPU)), "cpu %s", list.Cpu())
			require.Zero(t, list.Memory().Cmp(resource.MustParse(controllers.DefaultSandboxMemory)), "memory %s", list.Memory())
		}

		var secret corev1.Secret
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.TokenSecret}, &secret))
		require.True(t, metav1.IsControlledBy(&secret, b))
		require.Len(t, secret.Data[v1alpha1.TokenSecretKey], 64)

		var np networkingv1.NetworkPolicy
		require.NoError(t, w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID}, &np))
		require.True(t, metav1.IsControlledBy(&np, b))
		require.Equal(t, []networkingv1.NetworkPolicyEgressRule{{}}, np.Spec.Egress, "full egress")
		require.Equal(t, map[string]string{"app.kubernetes.io/component": "worker"}, np.Spec.Ingress[0].From[0].PodSelector.MatchLabels)

		require.Equal(t, v1alpha1.SandboxRunning, b.Status.Phase)
		require.Equal(t, string(pod.UID), b.Status.ExternalID)
		require.Equal(t, fmt.Sprintf("http://127.0.0.1:%d", w.kubelet.Port()), b.Status.Endpoint)
		require.True(t, meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionReady))

		// An edited policy is put back.
		np.Spec.Egress = nil
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		require.NoError(t, w.Client.Update(ctx, &np))
		require.Eventually(t, func() bool {
			var again networkingv1.NetworkPolicy
			require.NoError(t, w.Client.Get(ctx, client.ObjectKeyFromObject(&np), &again))
			return len(again.Spec.PolicyTypes) == 2 && len(again.Spec.Egress) == 1
		}, 10*time.Second, 50*time.Millisecond)
	})

	t.Run("DestroyDeletesThePodTheSecretAndThePolicy", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		b := w.bindingOf(t, ref.ExternalID)
		require.NoError(t, p.Destroy(ctx, ref))
		require.Eventually(t, func() bool {
			for _, obj := range []client.Object{&v1alpha1.SandboxBinding{}, &corev1.Pod{}, &networkingv1.NetworkPolicy{}} {
				if !apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ExternalID}, obj)) {
					return false
				}
			}
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.TokenSecret}, &corev1.Secret{}))
		}, 20*time.Second, 50*time.Millisecond, "the finalizer deletes what the binding made (envtest has no garbage collector)")
	})

	t.Run("APodDeletedBehindOurBackIsGoneNotReplaced", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		ref, err := p.Create(ctx, spec())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(ctx, "work.txt", []byte("precious")))

		require.NoError(t, w.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ref.ExternalID}}))
		require.Eventually(t, func() bool {
			b := w.bindingOf(t, ref.ExternalID)
			return b.Status.Phase == v1alpha1.SandboxFailed
		}, 20*time.Second, 50*time.Millisecond)
		b := w.bindingOf(t, ref.ExternalID)
		require.Equal(t, v1alpha1.ReasonPodGone, meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady).Reason)

		// Once the pod's daemon stops answering (the test's kubelet notices the deletion within
		// a poll), the live client's transport error is checked against the binding: gone.
		require.Eventually(t, func() bool {
			_, err = sb.ReadFile(ctx, "work.txt")
			return err != nil
		}, 10*time.Second, 20*time.Millisecond)
		require.ErrorIs(t, err, sandbox.ErrGone, "the live client sees the sandbox gone")
		_, err = p.Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone, "and so does the next acquisition")
		_, err = w.provider(t).Attach(ctx, ref)
		require.ErrorIs(t, err, sandbox.ErrGone, "and a restarted worker")

		time.Sleep(500 * time.Millisecond) // give a wrong controller the time to recreate it
		var pods corev1.PodList
		require.NoError(t, w.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSandboxBinding: ref.ExternalID}))
		require.Empty(t, pods.Items, "no second pod: its workspace would be silently empty")

		var events corev1.EventList
		require.Eventually(t, func() bool {
			require.NoError(t, w.Client.List(ctx, &events, client.InNamespace(ns)))
			for _, e := range events.Items {
				if e.InvolvedObject.Name == ref.ExternalID && e.Reason == v1alpha1.ReasonPodGone {
					return true
				}
			}
			return false
		}, 10*time.Second, 100*time.Millisecond, "a warning event says what happened")

		require.NoError(t, p.Destroy(ctx, ref), "a gone sandbox is still destroyed")
	})

	t.Run("Packages", func(t *testing.T) { testPackages(t, w) })
	t.Run("EgressProxy", func(t *testing.T) { testEgressProxy(t, w) })
	t.Run("Sweep", func(t *testing.T) { testSweep(t, w) })

	t.Run("AnImageThatCannotBePulledFailsCreateAndLeavesNothing", func(t *testing.T) {
		ctx := t.Context()
		// Long enough for the kubelet to report the pull failure under load, short for a test.
		p := w.provider(t, func(c *kubernetes.Config) { c.ReadyTimeout = 8 * time.Second })
		s := spec()
		s.Image = kubetest.UnpullablePrefix + "nothing:here"
		_, err := p.Create(ctx, s)
		require.ErrorIs(t, err, sandbox.ErrSetup)
		require.ErrorContains(t, err, "ImagePullBackOff")
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &v1alpha1.SandboxBinding{}))
		}, 20*time.Second, 50*time.Millisecond)
	})

	t.Run("ListNamesTheSessions", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		s := spec()
		ref, err := p.Create(ctx, s)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		list, err := p.List(ctx)
		require.NoError(t, err)
		found := false
		for _, r := range list {
			if r.Ref == ref {
				found = true
				require.Equal(t, s.SessionID, r.SessionID)
				require.WithinDuration(t, time.Now(), r.Created, time.Minute)
			}
		}
		require.True(t, found, "the sweep sees the binding")
	})
}

// TestAnInterruptedCreateIsAdopted: a worker killed mid-acquisition (here: its Create's
// context ends while the controller is down) leaves a binding the retried Create adopts;
// there is never a second one.
func TestAnInterruptedCreateIsAdopted(t *testing.T) {
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	k := kubetest.Start(t, c.Client, ns)
	p, err := kubernetes.New(kubernetes.Config{Client: c.Client, Namespace: ns, Image: "sandbox:test", Port: k.Port(), PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	s := spec()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := p.Create(ctx, s); done <- err }()
	var first v1alpha1.SandboxBinding
	require.Eventually(t, func() bool {
		return c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: s.Name}, &first) == nil
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	c.RunSandboxController(t, sandboxPods)
	ref, err := p.Create(t.Context(), s)
	require.NoError(t, err)
	var list v1alpha1.SandboxBindingList
	require.NoError(t, c.Client.List(t.Context(), &list, client.InNamespace(ns)))
	require.Len(t, list.Items, 1)
	require.Equal(t, first.UID, list.Items[0].UID, "the retried create adopted the first binding")
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo ok"})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Output))
}
