//go:build integration

package turns_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker/runnertest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// dockerFixture is the sandbox fixture over the docker provider with deployment label
// deployment; every container a test makes through it is removed afterwards.
type dockerFixture struct {
	sandboxFixture
	cli      *client.Client
	provider *docker.Provider
	registry *sandbox.Registry
}

func newDockerFixture(t *testing.T, deployment string) dockerFixture {
	t.Helper()
	f := newSandboxFixtureWith(t, plainEnv)
	cli, err := client.New(client.FromEnv)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	_, err = cli.ImageInspect(t.Context(), docker.DefaultImage)
	require.NoError(t, err, "the sandbox image is missing: run make sandbox-image")
	runner, err := runnertest.Path() // what the containers run: this test binary cannot
	require.NoError(t, err)
	p, err := docker.New(docker.Config{Deployment: deployment, Runner: runner})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	reg, err := sandbox.NewRegistry(p)
	require.NoError(t, err)
	// Every use touches, as once the touch interval has passed: the tests age the activity
	// in the database rather than waiting.
	f.manager = sandbox.NewManager(reg, f.engine.Sandboxes(), f.engine.Sandboxes(), sandbox.WithTouchInterval(time.Nanosecond))
	return dockerFixture{sandboxFixture: f, cli: cli, provider: p, registry: reg}
}

// create makes a container for session id directly through the provider, removed after the test.
func (f dockerFixture) create(t *testing.T, id string) sandbox.Ref {
	t.Helper()
	ref, err := f.provider.Create(t.Context(), sandbox.SpecFor(id, wire.EnvironmentConfig{Type: "cloud"}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.provider.Destroy(context.Background(), ref)) })
	return ref
}

// acquire acquires the session's sandbox through the manager; its container is removed
// after the test.
func (f dockerFixture) acquire(t *testing.T, id string) sandbox.Sandbox {
	t.Helper()
	sb, err := f.manager.Acquire(t.Context(), id)
	require.NoError(t, err)
	ref, err := f.engine.SandboxRef(t.Context(), id)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.provider.Destroy(context.Background(), ref)) })
	return sb
}

// age makes the session's last sandbox activity d old.
func (f dockerFixture) age(t *testing.T, id string, d time.Duration) {
	t.Helper()
	_, err := f.st.Pool().Exec(t.Context(), `UPDATE sandbox_bindings SET last_active_at = now() - $2::interval WHERE session_id = $1`, id, d)
	require.NoError(t, err)
}

// running reports whether the session's container runs; exists is false once it is removed.
func (f dockerFixture) running(t *testing.T, ref sandbox.Ref) (running, exists bool) {
	t.Helper()
	info, err := f.cli.ContainerInspect(t.Context(), ref.ExternalID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return false, false
	}
	require.NoError(t, err)
	return info.Container.State.Running, true
}

func (f dockerFixture) ref(t *testing.T, id string) sandbox.Ref {
	t.Helper()
	b, err := f.engine.Sandboxes().Binding(t.Context(), id)
	require.NoError(t, err)
	return b.Ref
}

// A long orphan grace keeps the idle tests off the containers other tests of the shared
// deployment label make.
const noOrphans = 1000 * time.Hour

func TestIdleStopKeepsTheWorkspaceAndFollowsActivity(t *testing.T) {
	t.Parallel()
	f := newDockerFixture(t, "test")
	ctx := t.Context()
	idle, busy := f.newSess(t), f.newSess(t)
	sb := f.acquire(t, idle)
	require.NoError(t, sb.WriteFile(ctx, "kept.txt", []byte("survives a stop")))
	f.acquire(t, busy)
	sweeper := &sandbox.Sweeper{Registry: f.registry, Store: f.engine.Sandboxes(), IdleStop: time.Hour, OrphanGrace: noOrphans}

	res, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{}, res, "sandboxes used just now are not idle")

	f.age(t, idle, 2*time.Hour)
	f.age(t, busy, 30*time.Minute)
	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Stopped: 1}, res)
	running, exists := f.running(t, f.ref(t, idle))
	require.True(t, exists)
	require.False(t, running, "idle longer than the idle stop: stopped")
	running, _ = f.running(t, f.ref(t, busy))
	require.True(t, running, "used within the idle stop: still running")

	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{}, res, "a stopped sandbox is not stopped again")

	// The cached client is stale: the touch finds the stop, and the sandbox starts again.
	sb, err = f.manager.Acquire(ctx, idle)
	require.NoError(t, err)
	got, err := sb.ReadFile(ctx, "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "survives a stop", string(got))
	running, _ = f.running(t, f.ref(t, idle))
	require.True(t, running)

	// The acquisition reset the clock, and so does a use through Sandbox.
	f.age(t, busy, 2*time.Hour)
	_, err = f.manager.Sandbox(ctx, busy)
	require.NoError(t, err)
	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{}, res, "both sandboxes were just used")

	// A worker that restarts (no cached client) attaches and starts a stopped sandbox too.
	f.age(t, idle, 2*time.Hour)
	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Stopped: 1}, res)
	fresh := sandbox.NewManager(f.registry, f.engine.Sandboxes(), f.engine.Sandboxes())
	sb, err = fresh.Sandbox(ctx, idle)
	require.NoError(t, err)
	got, err = sb.ReadFile(ctx, "kept.txt")
	require.NoError(t, err)
	require.Equal(t, "survives a stop", string(got))
}

func TestRetentionDestroysAndTheNextAcquisitionFails(t *testing.T) {
	t.Parallel()
	f := newDockerFixture(t, "test")
	ctx := t.Context()
	old, recent := f.newSess(t), f.newSess(t)
	f.acquire(t, old)
	f.acquire(t, recent)
	oldRef := f.ref(t, old)
	f.age(t, old, 72*time.Hour)
	f.age(t, recent, 47*time.Hour)

	sweeper := &sandbox.Sweeper{Registry: f.registry, Store: f.engine.Sandboxes(), IdleStop: time.Hour, Retention: 48 * time.Hour, OrphanGrace: noOrphans}
	res, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Destroyed: 1, Stopped: 1}, res, "the old one destroyed, the recent one only stopped")
	_, exists := f.running(t, oldRef)
	require.False(t, exists, "destroyed")
	running, exists := f.running(t, f.ref(t, recent))
	require.True(t, exists)
	require.False(t, running)

	_, err = f.manager.Acquire(ctx, old)
	require.ErrorIs(t, err, sandbox.ErrGone, "the cached client is dropped and the acquisition fails")
	require.ErrorContains(t, err, "retention")
	_, err = f.manager.Sandbox(ctx, old)
	require.ErrorIs(t, err, sandbox.ErrGone)
	restarted := sandbox.NewManager(f.registry, f.engine.Sandboxes(), f.engine.Sandboxes())
	_, err = restarted.Acquire(ctx, old)
	require.ErrorIs(t, err, sandbox.ErrGone, "never silently replaced")
	bound, err := restarted.Bound(ctx, old)
	require.NoError(t, err)
	require.True(t, bound, "the tool call, not a new acquisition, reports the loss")

	_, err = f.manager.Acquire(ctx, recent)
	require.NoError(t, err, "the stopped one starts again")

	require.NoError(t, f.manager.Teardown(ctx, old), "teardown of an expired sandbox only removes the binding")
	_, err = f.engine.Sandboxes().Binding(ctx, old)
	require.ErrorIs(t, err, sandbox.ErrNoBinding)
}

func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	// A deployment label of its own: the sweep below removes what has no binding, and must
	// not reach containers other tests of the label "test" are using.
	deployment := fmt.Sprintf("test-orphans-%d", os.Getpid())
	f := newDockerFixture(t, deployment)
	other := newDockerFixture(t, "test")
	ctx := t.Context()

	live := f.newSess(t)
	f.acquire(t, live)
	liveRef := f.ref(t, live)
	deleted := f.create(t, ids.New(ids.Session)) // a session that does not exist (any more)
	pending := f.newSess(t)
	_, err := f.engine.Sandboxes().InsertBinding(ctx, sandbox.Binding{SessionID: pending, Ref: sandbox.Ref{Provider: docker.Name},
		Name: sandbox.NameFor(pending), State: sandbox.BindingPending})
	require.NoError(t, err)
	pendingRef := f.create(t, pending) // a create whose binding was never made ready
	foreign := other.create(t, ids.New(ids.Session))

	// Within the grace nothing is removed: a binding may be being written.
	sweeper := &sandbox.Sweeper{Registry: f.registry, Store: f.engine.Sandboxes(), OrphanGrace: time.Hour}
	res, err := sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{}, res)

	sweeper.OrphanGrace = time.Nanosecond
	res, err = sweeper.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, sandbox.SweepResult{Orphans: 2}, res)
	for _, c := range []struct {
		name string
		ref  sandbox.Ref
		kept bool
	}{
		{"live binding", liveRef, true},
		{"no session", deleted, false},
		{"pending past the grace", pendingRef, false},
		{"another deployment", foreign, true},
	} {
		_, exists := f.running(t, c.ref)
		require.Equal(t, c.kept, exists, c.name)
	}
	_, err = f.manager.Sandbox(ctx, live)
	require.NoError(t, err, "the live session keeps its sandbox")
}
