//go:build integration

package turns_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
)

// TestIdleSweepSuspendsSandboxPods is the idle sweep over the kubernetes provider with a
// persistent workspace: PostgreSQL's activity clock, the SandboxBinding controller on
// envtest, the test's kubelet. An idle sandbox is suspended (pod deleted, claim kept), the
// session's next use resumes it with its files, and retention deletes binding and claim.
func TestIdleSweepSuspendsSandboxPods(t *testing.T) {
	t.Parallel()
	const ns = "sandboxes"
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	kubelet := kubetest.Start(t, c.Client, ns)
	c.RunSandboxController(t, controllers.SandboxPods{SandboxdImage: "managed-agents:test",
		Workers: controllers.PodPeer{Selector: map[string]string{"app.kubernetes.io/component": "worker"}}})
	p, err := kubernetes.New(kubernetes.Config{Client: c.Client, Namespace: ns, Image: "sandbox:test", Port: kubelet.Port(),
		PersistentWorkspace: true, PollInterval: 20 * time.Millisecond, ReadyTimeout: time.Minute})
	require.NoError(t, err)
	reg, err := sandbox.NewRegistry(p)
	require.NoError(t, err)

	f := newSandboxFixtureWith(t, plainEnv)
	f.manager = sandbox.NewManager(reg, f.engine.Sandboxes(), f.engine.Sandboxes(), sandbox.WithTouchInterval(time.Nanosecond))
	d := dockerFixture{sandboxFixture: f} // for age and ref
	ctx := t.Context()
	idle, old := f.newSess(t), f.newSess(t)
	sb, err := f.manager.Acquire(ctx, idle)
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(ctx, "kept.txt", []byte("survives an idle stop")))
	_, err = f.manager.Acquire(ctx, old)
	require.NoError(t, err)
	ref := d.ref(t, idle)
	podOf := func(name string) *corev1.Pod {
		var pod corev1.Pod
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod)
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		return &pod
	}
	bindingOf := func(name string) *v1alpha1.SandboxBinding {
		var b v1alpha1.SandboxBinding
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b))
		return &b
	}
	first := podOf(ref.ExternalID)
	require.NotNil(t, first)

	sweeper := &sandbox.Sweeper{Registry: reg, Store: f.engine.Sandboxes(), IdleStop: time.Hour, Retention: 48 * time.Hour, OrphanGrace: noOrphans}
	d.age(t, idle, 2*time.Hour)
	res, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Stopped: 1}, res)
	require.Eventually(t, func() bool {
		return bindingOf(ref.ExternalID).Status.Phase == v1alpha1.SandboxSuspended && podOf(ref.ExternalID) == nil
	}, 20*time.Second, 50*time.Millisecond, "the idle sandbox's pod is deleted")
	require.NotEmpty(t, kubelet.ClaimDir(bindingOf(ref.ExternalID).Status.WorkspaceClaim), "its claim is kept")
	require.NotNil(t, podOf(d.ref(t, old).ExternalID), "the other still runs")

	// The session's next use finds the stop (the cached client is stale) and resumes it.
	sb, err = f.manager.Acquire(ctx, idle)
	require.NoError(t, err)
	got, err := sb.ReadFile(ctx, "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "survives an idle stop", string(got))
	second := podOf(ref.ExternalID)
	require.NotNil(t, second)
	require.NotEqual(t, first.UID, second.UID, "on a new pod")

	// A restarted worker (no cached client) resumes it too.
	d.age(t, idle, 2*time.Hour)
	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Stopped: 1}, res)
	restarted := sandbox.NewManager(reg, f.engine.Sandboxes(), f.engine.Sandboxes())
	sb, err = restarted.Sandbox(ctx, idle)
	require.NoError(t, err)
	got, err = sb.ReadFile(ctx, "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "survives an idle stop", string(got))

	// Retention destroys the binding, and with it pod and claim.
	oldRef := d.ref(t, old)
	claim := bindingOf(oldRef.ExternalID).Status.WorkspaceClaim
	d.age(t, old, 72*time.Hour)
	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Destroyed: 1}, res)
	require.Eventually(t, func() bool {
		var pvc corev1.PersistentVolumeClaim
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc)
		claimGone := apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil)
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: oldRef.ExternalID}, &v1alpha1.SandboxBinding{})) &&
			podOf(oldRef.ExternalID) == nil && claimGone
	}, 20*time.Second, 50*time.Millisecond, "binding, pod and claim deleted")
	_, err = f.manager.Acquire(ctx, old)
	require.ErrorIs(t, err, sandbox.ErrGone, "never silently replaced")
}
