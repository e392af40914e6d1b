//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var poolDeployments atomic.Int64

// newPoolProvider returns a started provider with a warm pool of size under a deployment of
// its own, so the test can tell its pool's containers from every other test's. Its cleanup
// stops the pool twice (a stop must be idempotent) and checks nothing of the deployment is
// left on the engine.
func newPoolProvider(t *testing.T, size int, img string) (*docker.Provider, string) {
	t.Helper()
	cli := engine(t)
	deployment := fmt.Sprintf("test-pool-%d-%d", os.Getpid(), poolDeployments.Add(1))
	p, err := docker.New(docker.Config{Image: img, Deployment: deployment, WarmPool: size})
	require.NoError(t, err)
	require.NoError(t, p.WarmPool(nil).Start(t.Context()))
	t.Cleanup(func() {
		p.WarmPool(nil).Stop()
		p.WarmPool(nil).Stop()
		_ = p.Close()
		ctx := context.Background()
		filter := client.Filters{}.Add("label", docker.LabelDeployment+"="+deployment)
		left, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
		require.NoError(t, err)
		require.Empty(t, left.Items, "the pool's stop and the sessions' destroys leave no container")
		vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
		require.NoError(t, err)
		require.Empty(t, vols.Items, "nor any volume")
	})
	return p, deployment
}

func defaultSpec() sandbox.Spec {
	return sandbox.SpecFor(fmt.Sprintf("sesn_pool_%d_%d", os.Getpid(), sessions.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
}

// waitReady waits until the pool holds n started containers for spec.
func waitReady(t *testing.T, p *docker.Provider, spec sandbox.Spec, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return docker.PoolReady(p, spec) == n }, time.Minute, 10*time.Millisecond,
		"the pool refills to %d", n)
}

// poolContainers are the unclaimed pool containers of a deployment, by name.
func poolContainers(t *testing.T, deployment string) map[string]string {
	t.Helper()
	res, err := engine(t).ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", docker.LabelPool).Add("label", docker.LabelDeployment+"="+deployment)})
	require.NoError(t, err)
	out := map[string]string{}
	for _, c := range res.Items {
		for _, n := range c.Names {
			if n = strings.TrimPrefix(n, "/"); strings.HasPrefix(n, "ma-pool-") {
				out[n] = c.ID
			}
		}
	}
	return out
}

func TestWarmPoolClaim(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p, deployment := newPoolProvider(t, 2, image())
	spec := defaultSpec()
	waitReady(t, p, spec, 2)
	before := poolContainers(t, deployment)
	require.Len(t, before, 2)

	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	info, err := cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Contains(t, slices.Collect(maps.Values(before)), info.Container.ID, "a pool container was claimed")
	require.Equal(t, "/"+docker.ContainerName(spec.Name), info.Container.Name, "under the session's name")
	require.Equal(t, spec.Hash(), info.Container.Config.Labels[docker.LabelSpecHash])

	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	out, code := sh(t, sb, "ls -A /workspace; id -u; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
	require.Zero(t, code, out)
	require.Equal(t, "1000\nlo\n", out, "an empty workspace, the sandbox user, no network: as a cold sandbox")
	require.NoError(t, sb.WriteFile(t.Context(), "mine.txt", []byte("claimed")))

	// A retried Create (its first response lost) adopts the claimed container; it does not
	// claim the other one.
	again, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	require.Equal(t, ref, again)
	after := poolContainers(t, deployment)
	for name, id := range before {
		if id != info.Container.ID {
			require.Equal(t, id, after[name], "the other pool container is still the pool's")
		}
	}
	waitReady(t, p, spec, 2)

	// The orphan sweep sees the claimed container as the session's (through the claim) and
	// not the unclaimed ones.
	resources, err := p.List(t.Context())
	require.NoError(t, err)
	require.Len(t, resources, 1)
	require.Equal(t, []sandbox.Resource{{Ref: ref, SessionID: spec.SessionID, Created: resources[0].Created}}, resources)

	workspace := ""
	for _, m := range info.Container.Mounts {
		if m.Destination == docker.Workspace {
			workspace = m.Name
		}
	}
	require.True(t, strings.HasPrefix(workspace, "ma-pool-"), workspace)
	require.NoError(t, p.Destroy(t.Context(), ref))
	_, err = cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.True(t, cerrdefs.IsNotFound(err))
	for _, vol := range []string{workspace, ref.ExternalID + "-claim"} {
		_, err = cli.VolumeInspect(t.Context(), vol, client.VolumeInspectOptions{})
		require.True(t, cerrdefs.IsNotFound(err), "destroy removes %s", vol)
	}
}

func TestWarmPoolConcurrentCreatesGetTheirOwnContainers(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p, _ := newPoolProvider(t, 3, image())
	waitReady(t, p, defaultSpec(), 3)
	const n = 5 // more than the pool holds: the rest are created cold
	specs := make([]sandbox.Spec, n)
	refs := make([]sandbox.Ref, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		specs[i] = defaultSpec()
		wg.Go(func() { refs[i], errs[i] = p.Create(t.Context(), specs[i]) })
	}
	wg.Wait()
	ids := map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i])
		ref := refs[i]
		t.Cleanup(func() { require.NoError(t, p.Destroy(context.Background(), ref)) })
		info, err := cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
		require.NoError(t, err)
		ids[info.Container.ID] = true
		sb, err := p.Attach(t.Context(), ref)
		require.NoError(t, err)
		require.NoError(t, sb.WriteFile(t.Context(), fmt.Sprintf("only-%d", i), nil))
	}
	require.Len(t, ids, n, "no container was given to two sessions")
	for i := range n {
		sb, err := p.Attach(t.Context(), refs[i])
		require.NoError(t, err)
		out, _ := sh(t, sb, "ls -A /workspace")
		require.Equal(t, fmt.Sprintf("only-%d\n", i), out, "each workspace is private")
	}
}

func TestWarmPoolConcurrentCreatesOfOneNameMakeOne(t *testing.T) {
	t.Parallel()
	p, _ := newPoolProvider(t, 2, image())
	other, _ := newPoolProvider(t, 2, image()) // another worker, its own pool
	spec := defaultSpec()
	waitReady(t, p, spec, 2)
	waitReady(t, other, spec, 2)
	refs := make([]sandbox.Ref, 6)
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i := range refs {
		prov := p
		if i%2 == 1 {
			prov = other
		}
		wg.Go(func() { refs[i], errs[i] = prov.Create(t.Context(), spec) })
	}
	wg.Wait()
	for i := range refs {
		require.NoError(t, errs[i])
		require.Equal(t, refs[0], refs[i])
	}
	sb, err := p.Attach(t.Context(), refs[0])
	require.NoError(t, err)
	out, _ := sh(t, sb, "echo ok")
	require.Equal(t, "ok\n", out)
	require.NoError(t, p.Destroy(t.Context(), refs[0]))
}

func TestWarmPoolRemovesContainersOfAnOldImage(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	// A tag of its own, moved to another image as make sandbox-image would.
	tag := fmt.Sprintf("managed-agents-sandbox:test-pool-%d", os.Getpid())
	_, err := cli.ImageTag(t.Context(), client.ImageTagOptions{Source: image(), Target: tag})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{}) })
	p, deployment := newPoolProvider(t, 1, tag)
	spec := defaultSpec()
	waitReady(t, p, spec, 1)
	old := poolContainers(t, deployment)

	_, err = cli.ImageTag(t.Context(), client.ImageTagOptions{Source: fakeManagerImage(t), Target: tag})
	require.NoError(t, err)
	docker.Reconcile(p)
	for name := range old {
		_, err := cli.ContainerInspect(t.Context(), name, client.ContainerInspectOptions{})
		require.True(t, cerrdefs.IsNotFound(err), "the container of the old image is removed")
	}
	waitReady(t, p, spec, 1)
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Destroy(context.Background(), ref)) })
	sb, err := p.Attach(t.Context(), ref)
	require.NoError(t, err)
	_, code := sh(t, sb, "test -x /usr/local/bin/fake-manager")
	require.Zero(t, code, "the new pool container runs the new image")
}

// orphanStore is a sweep store in which no session has a binding.
type orphanStore struct{}

func (orphanStore) SweepIdle(context.Context, time.Duration, bool, func(context.Context, sandbox.Binding) error) (int, error) {
	return 0, nil
}

func (orphanStore) BindingsOf(context.Context, []string) (map[string]sandbox.AgedBinding, error) {
	return map[string]sandbox.AgedBinding{}, nil
}

func TestOrphanSweepRemovesClaimedContainersButNotThePool(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	p, deployment := newPoolProvider(t, 1, image())
	spec := defaultSpec()
	waitReady(t, p, spec, 1)
	ref, err := p.Create(t.Context(), spec)
	require.NoError(t, err)
	waitReady(t, p, spec, 1)
	pooled := poolContainers(t, deployment)

	registry, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	sweeper := &sandbox.Sweeper{Registry: registry, Store: orphanStore{}, OrphanGrace: time.Nanosecond}
	res, err := sweeper.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.Orphans, "the claimed container's session has no binding")
	_, err = cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	require.True(t, cerrdefs.IsNotFound(err))
	require.Equal(t, pooled, poolContainers(t, deployment), "the unclaimed pool container is not the sweep's")
}

// The provider contract holds when every Create may claim from a warm pool: each instance
// keeps one container warm for the suite's spec.
func TestProviderContractWithWarmPool(t *testing.T) {
	t.Parallel()
	engine(t)
	suiteSpec := sandbox.SpecFor("sesn_any", wire.EnvironmentConfig{Type: "cloud"})
	suiteSpec.Env = map[string]string{"CONTRACT": "yes"} // as sandboxtest's specs
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			p, _ := newPoolProvider(t, 1, image())
			docker.WarmSpec(p, suiteSpec)
			waitReady(t, p, suiteSpec, 1)
			return p
		},
	})
}
