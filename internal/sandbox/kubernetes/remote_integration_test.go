//go:build integration

package kubernetes_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
)

// counting is a provider that counts what the controller and the worker ask of it.
type counting struct {
	sandbox.Provider
	mu                        sync.Mutex
	creates, attach, destroys int
	failCreates               int // the next creates fail after the sandbox was made (a lost answer)
	made                      map[string]bool
}

func (c *counting) Create(ctx context.Context, s sandbox.Spec) (sandbox.Ref, error) {
	ref, err := c.Provider.Create(ctx, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates++
	if err == nil {
		if c.made == nil {
			c.made = map[string]bool{}
		}
		c.made[ref.ExternalID] = true
	}
	if err == nil && c.failCreates > 0 {
		c.failCreates--
		return sandbox.Ref{}, sandbox.ErrUnavailable
	}
	return ref, err
}

func (c *counting) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	c.mu.Lock()
	c.attach++
	c.mu.Unlock()
	return c.Provider.Attach(ctx, ref)
}

func (c *counting) Destroy(ctx context.Context, ref sandbox.Ref) error {
	c.mu.Lock()
	c.destroys++
	c.mu.Unlock()
	return c.Provider.Destroy(ctx, ref)
}

func (c *counting) counts() (int, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates, c.attach, c.destroys
}

func (c *counting) sandboxes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.made)
}

// TestRemoteProviderThroughABinding: a binding naming a remote provider has the controller
// create the sandbox there (once, adopting after a lost answer), the worker attach by the
// recorded id, and the binding's deletion destroy it. The provider here is the local one
// under the binding's provider name: this test is about the binding, the remote clients have
// their own against their fakes.
func TestRemoteProviderThroughABinding(t *testing.T) {
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	remote := &counting{Provider: local.New(t.TempDir()), failCreates: 1}
	c.RunSandboxController(t, sandboxPods, func(r *controllers.SandboxBindingReconciler) {
		r.Remote = map[string]controllers.RemoteSandboxes{local.Name: remote}
	})
	cfg := kubernetes.Config{Client: c.Client, Namespace: ns, Image: "template-1", PollInterval: 20 * time.Millisecond, ReadyTimeout: time.Minute,
		Provider: local.Name, Remote: map[string]sandbox.Provider{local.Name: remote}}
	p, err := kubernetes.New(cfg)
	require.NoError(t, err)
	ctx := t.Context()

	s := spec()
	ref, err := p.Create(ctx, s)
	require.NoError(t, err)
	require.Equal(t, sandbox.Ref{Provider: kubernetes.Name, ExternalID: s.Name}, ref, "the worker stores the binding, not the remote id")
	var b v1alpha1.SandboxBinding
	require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &b))
	require.Equal(t, local.Name, b.Spec.Provider)
	require.Equal(t, v1alpha1.SandboxRunning, b.Status.Phase)
	require.NotEmpty(t, b.Status.ExternalID)
	require.Equal(t, controllers.RemoteEndpoint(local.Name, b.Status.ExternalID), b.Status.Endpoint)
	cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady)
	require.Equal(t, v1alpha1.ReasonRemoteReady, cond.Reason)
	creates, _, _ := remote.counts()
	// At least the lost one and its retry (a status write that lost a race retries too):
	// every create adopted the one sandbox.
	require.GreaterOrEqual(t, creates, 2, "the lost answer was retried")
	require.Equal(t, 1, remote.sandboxes(), "and adopted the same sandbox")

	sb, err := p.Attach(ctx, ref)
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(ctx, "a.txt", []byte("remote")))
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "cat a.txt"})
	require.NoError(t, err)
	require.Equal(t, "remote", string(res.Output))
	_, attaches, _ := remote.counts()
	require.Equal(t, 1, attaches, "the worker attached through its own client, by the id")

	// A second create of the same session adopts the binding: no new remote sandbox.
	_, err = p.Create(ctx, s)
	require.NoError(t, err)
	again, _, _ := remote.counts()
	require.Equal(t, creates, again, "the controller creates once per binding: after the id is recorded, never again")

	// Deleting the binding (the session's teardown) destroys the remote sandbox.
	require.NoError(t, p.Destroy(ctx, ref))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &v1alpha1.SandboxBinding{}))
	}, 30*time.Second, 20*time.Millisecond)
	_, _, destroys := remote.counts()
	require.Equal(t, 1, destroys)
	_, err = remote.Provider.Attach(ctx, sandbox.Ref{Provider: local.Name, ExternalID: b.Status.ExternalID})
	require.ErrorIs(t, err, sandbox.ErrGone, "the remote sandbox is gone")
	_, err = p.Attach(ctx, ref)
	require.ErrorIs(t, err, sandbox.ErrGone)

	// A binding naming a provider the controller has no client of waits, NotConfigured.
	other := spec()
	cfg.Provider = "daytona"
	cfg.Remote = map[string]sandbox.Provider{"daytona": remote}
	p2, err := kubernetes.New(cfg)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = p2.Create(cctx, other)
	require.Error(t, err)
	_, cond2 := readyCondition(t, c.Client, other.Name)
	require.Equal(t, v1alpha1.ReasonNotConfigured, cond2.Reason)
	require.Contains(t, cond2.Message, "MANAGED_AGENT_CONTROLLER_SANDBOX_PROVIDERS")
}
