package sandbox_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// specs builds every session's spec from one environment.
type specs struct{ env wire.EnvironmentConfig }

func (s specs) SandboxSpec(_ context.Context, sessionID string) (sandbox.Spec, error) {
	return sandbox.SpecFor(sessionID, s.env), nil
}

// flaky wraps a provider: its hooks run around Create.
type flaky struct {
	sandbox.Provider
	mu         sync.Mutex
	creates    int
	beforeMake func(spec sandbox.Spec)
	failAfterN int // the first failAfterN creates make the sandbox, then report a timeout
}

func (f *flaky) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Ref, error) {
	f.mu.Lock()
	f.creates++
	n := f.creates
	f.mu.Unlock()
	if f.beforeMake != nil {
		f.beforeMake(spec)
	}
	ref, err := f.Provider.Create(ctx, spec)
	if err == nil && n <= f.failAfterN {
		return sandbox.Ref{}, context.DeadlineExceeded // made, but the answer was lost
	}
	return ref, err
}

// sandboxesUnder counts the session directories a local provider root holds.
func sandboxesUnder(t *testing.T, root string) int {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "sess-") {
			n++
		}
	}
	return n
}

type fixture struct {
	root     string
	provider *flaky
	bindings *sandboxtest.Bindings
	manager  *sandbox.Manager
}

func newFixture(t *testing.T, opts ...sandbox.ManagerOption) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{root: root, provider: &flaky{Provider: local.New(root)}, bindings: sandboxtest.NewBindings()}
	reg, err := sandbox.NewRegistry(f.provider)
	require.NoError(t, err)
	f.manager = sandbox.NewManager(reg, f.bindings, specs{}, opts...)
	return f
}

func TestAcquireWritesAPendingBindingBeforeCreating(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const session = "sesn_pending"
	f.provider.beforeMake = func(spec sandbox.Spec) {
		b := get(t, f.bindings, session)
		require.Equal(t, sandbox.BindingPending, b.State, "the binding exists before the sandbox")
		require.Equal(t, spec.Name, b.Name, "under the name Create is idempotent on")
		require.Equal(t, local.Name, b.Ref.Provider)
		require.Empty(t, b.Ref.ExternalID)
	}
	sb, err := f.manager.Acquire(t.Context(), session)
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(t.Context(), "a.txt", []byte("a")))

	b := get(t, f.bindings, session)
	require.Equal(t, sandbox.BindingReady, b.State)
	require.NotEmpty(t, b.Ref.ExternalID)
	require.Equal(t, sandbox.NameFor(session), b.Name)
	require.Equal(t, sandbox.SpecFor(session, wire.EnvironmentConfig{}).Hash(), b.SpecHash)
	require.Equal(t, []string{"insert pending", "ready"}, f.bindings.Writes())

	// Later runs reuse it, and so does a restarted worker (a new manager, nothing cached).
	again, err := f.manager.Acquire(t.Context(), session)
	require.NoError(t, err)
	data, err := again.ReadFile(t.Context(), "a.txt")
	require.NoError(t, err)
	require.Equal(t, "a", string(data))
	reg, err := sandbox.NewRegistry(local.New(f.root))
	require.NoError(t, err)
	restarted := sandbox.NewManager(reg, f.bindings, specs{})
	bound, err := restarted.Bound(t.Context(), session)
	require.NoError(t, err)
	require.True(t, bound)
	sb2, err := restarted.Sandbox(t.Context(), session)
	require.NoError(t, err)
	data, err = sb2.ReadFile(t.Context(), "a.txt")
	require.NoError(t, err)
	require.Equal(t, "a", string(data))
	require.Equal(t, 1, f.provider.creates, "one create for every run of the session")
	require.Equal(t, 1, sandboxesUnder(t, f.root))
}

func TestACreateThatFailedAfterThePendingWriteIsAdoptedOnRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.provider.failAfterN = 2
	const session = "sesn_lost_create"

	for range 2 {
		_, err := f.manager.Acquire(t.Context(), session)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, sandbox.BindingPending, get(t, f.bindings, session).State)
		bound, err := f.manager.Bound(t.Context(), session)
		require.NoError(t, err)
		require.False(t, bound, "a pending binding still needs acquiring")
	}
	sb, err := f.manager.Acquire(t.Context(), session)
	require.NoError(t, err)
	require.NotNil(t, sb)
	require.Equal(t, 3, f.provider.creates)
	require.Equal(t, 1, sandboxesUnder(t, f.root), "the retries adopted the first attempt's sandbox")
	require.Equal(t, []string{"insert pending", "ready"}, f.bindings.Writes())
}

func TestTeardown(t *testing.T) {
	t.Parallel()
	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		_, err := f.manager.Acquire(t.Context(), "sesn_1")
		require.NoError(t, err)
		require.Equal(t, 1, sandboxesUnder(t, f.root))
		require.NoError(t, f.manager.Teardown(t.Context(), "sesn_1"))
		require.Zero(t, sandboxesUnder(t, f.root))
		_, err = f.bindings.Binding(t.Context(), "sesn_1")
		require.ErrorIs(t, err, sandbox.ErrNoBinding)
		require.Zero(t, f.manager.CachedClients())
		require.NoError(t, f.manager.Teardown(t.Context(), "sesn_1"), "nothing left to tear down")
	})
	t.Run("pending", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.provider.failAfterN = 1
		_, err := f.manager.Acquire(t.Context(), "sesn_1")
		require.Error(t, err)
		require.Equal(t, 1, sandboxesUnder(t, f.root), "the lost attempt made one")
		require.NoError(t, f.manager.Teardown(t.Context(), "sesn_1"))
		require.Zero(t, sandboxesUnder(t, f.root), "a pending binding's sandbox is found by name and destroyed")
		_, err = f.bindings.Binding(t.Context(), "sesn_1")
		require.ErrorIs(t, err, sandbox.ErrNoBinding)
	})
	// A deployment that switched providers (helm upgrade --set sandbox.provider=kubernetes
	// after sessions were made on local) cannot reach the old sandboxes; deleting such a
	// session must still finish, with one warning naming what was left behind, and never
	// fail the same way again.
	for _, state := range []string{sandbox.BindingReady, sandbox.BindingPending} {
		t.Run("foreign provider, "+state, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			f := newFixture(t, sandbox.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			ref := sandbox.Ref{Provider: "docker"}
			if state == sandbox.BindingReady {
				ref.ExternalID = "c0ffee"
			}
			_, err := f.bindings.InsertBinding(t.Context(), sandbox.Binding{SessionID: "sesn_1", Name: "ma-n", State: state, Ref: ref})
			require.NoError(t, err)
			if state == sandbox.BindingReady {
				_, err = f.manager.Sandbox(t.Context(), "sesn_1")
				require.ErrorIs(t, err, sandbox.ErrUnknownProvider, "nothing here can attach it either")
			}

			require.NoError(t, f.manager.Teardown(t.Context(), "sesn_1"), "nothing this deployment can tear down is not an error")
			_, err = f.bindings.Binding(t.Context(), "sesn_1")
			require.ErrorIs(t, err, sandbox.ErrNoBinding, "the binding goes, so the session's delete can finish")
			require.Equal(t, 0, f.provider.creates, "the default provider is never asked to adopt it")
			require.NoError(t, f.manager.Teardown(t.Context(), "sesn_1"), "and a second teardown has nothing to do")

			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			require.Len(t, lines, 1, "one warning: %s", logs.String())
			require.Contains(t, lines[0], "level=WARN")
			require.Contains(t, lines[0], "provider=docker")
			require.Contains(t, lines[0], "sandbox="+cmp.Or(ref.ExternalID, "ma-n"))
			require.Contains(t, lines[0], "session_id=sesn_1")
		})
	}
}

func TestAGoneSandboxIsDroppedFromTheCacheAndNeverReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	sb, err := f.manager.Acquire(ctx, "sesn_gone")
	require.NoError(t, err)
	require.Equal(t, 1, f.manager.CachedClients())
	require.NoError(t, f.provider.Destroy(ctx, get(t, f.bindings, "sesn_gone").Ref))

	_, err = sb.ReadFile(ctx, "x")
	require.ErrorIs(t, err, sandbox.ErrGone)
	require.Zero(t, f.manager.CachedClients(), "ErrGone drops the cached client")

	_, err = f.manager.Sandbox(ctx, "sesn_gone")
	require.ErrorIs(t, err, sandbox.ErrGone)
	require.ErrorContains(t, err, "no longer exists")
	_, err = f.manager.Acquire(ctx, "sesn_gone")
	require.ErrorIs(t, err, sandbox.ErrGone, "acquisition fails instead of making a new one")
	require.Equal(t, 1, f.provider.creates)
	require.Zero(t, sandboxesUnder(t, f.root))
}

// unreachable fails every call with a transport error.
type unreachable struct{ sandbox.Sandbox }

func (unreachable) ReadFile(context.Context, string) ([]byte, error) {
	return nil, fmt.Errorf("read: %w", sandbox.ErrUnavailable)
}

type unreachableProvider struct{ sandbox.Provider }

func (p unreachableProvider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Attach(ctx, ref)
	return unreachable{sb}, err
}

func TestATransportErrorDropsTheCachedClient(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	reg, err := sandbox.NewRegistry(unreachableProvider{local.New(root)})
	require.NoError(t, err)
	m := sandbox.NewManager(reg, sandboxtest.NewBindings(), specs{})
	sb, err := m.Acquire(t.Context(), "sesn_net")
	require.NoError(t, err)
	require.Equal(t, 1, m.CachedClients())
	_, err = sb.ReadFile(t.Context(), "x")
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.Zero(t, m.CachedClients())
	_, err = m.Sandbox(t.Context(), "sesn_net")
	require.NoError(t, err, "the next use attaches a fresh client")
	require.Equal(t, 1, m.CachedClients())
}

func TestAFileErrorKeepsTheCachedClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sb, err := f.manager.Acquire(t.Context(), "sesn_file")
	require.NoError(t, err)
	_, err = sb.ReadFile(t.Context(), "missing")
	require.ErrorIs(t, err, sandbox.ErrNotExist)
	_, err = sb.ReadFile(t.Context(), "../outside")
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
	require.Equal(t, 1, f.manager.CachedClients(), "the sandbox answered: its client is fine")
}

func TestTheClientCacheIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sandbox.WithCacheSize(2))
	ctx := t.Context()
	for i := range 5 {
		_, err := f.manager.Acquire(ctx, fmt.Sprintf("sesn_%d", i))
		require.NoError(t, err)
		require.LessOrEqual(t, f.manager.CachedClients(), 2)
	}
	require.Equal(t, 2, f.manager.CachedClients())
	// An evicted session's sandbox is attached again from its binding, not recreated.
	sb, err := f.manager.Sandbox(ctx, "sesn_0")
	require.NoError(t, err)
	require.NotNil(t, sb)
	require.Equal(t, 5, f.provider.creates)
	require.Equal(t, 5, sandboxesUnder(t, f.root))
}

func TestCachedClientsKeepTheirCapabilities(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sb, err := f.manager.Acquire(t.Context(), "sesn_caps")
	require.NoError(t, err)
	_, ok := sb.(sandbox.FileSearcher)
	require.True(t, ok, "the manager's wrapper must not hide optional capabilities")
	require.NoError(t, sb.WriteFile(t.Context(), "d/f.txt", []byte("x\n")))
	res, err := sb.(sandbox.FileSearcher).FindFiles(t.Context(), sandbox.FindRequest{Pattern: "**"})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join("d", "f.txt")}, res.Paths)
}

func get(t *testing.T, b *sandboxtest.Bindings, sessionID string) sandbox.Binding {
	t.Helper()
	got, err := b.Binding(t.Context(), sessionID)
	require.NoError(t, err)
	return got
}

// goneOnDestroy is a provider whose sandboxes were removed behind the server's back.
type goneOnDestroy struct{ sandbox.Provider }

func (goneOnDestroy) Destroy(context.Context, sandbox.Ref) error { return sandbox.ErrGone }

// A sandbox already gone is destroyed as far as teardown goes: the binding is removed, so the
// session's delete can finish instead of failing for good.
func TestTeardownOfAGoneSandboxRemovesTheBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	bindings := sandboxtest.NewBindings()
	reg, err := sandbox.NewRegistry(goneOnDestroy{local.New(root)})
	require.NoError(t, err)
	m := sandbox.NewManager(reg, bindings, specs{})
	_, err = m.Acquire(ctx, "sesn_gone")
	require.NoError(t, err)
	require.NoError(t, m.Teardown(ctx, "sesn_gone"))
	_, err = bindings.Binding(ctx, "sesn_gone")
	require.ErrorIs(t, err, sandbox.ErrNoBinding)
}

type setupFails struct{ sandbox.Provider }

func (setupFails) Create(context.Context, sandbox.Spec) (sandbox.Ref, error) {
	return sandbox.Ref{}, fmt.Errorf("install packages: %w", sandbox.ErrSetup)
}

// A session whose sandbox could never be set up can still be deleted: its pending binding
// goes, with nothing to destroy.
func TestTeardownAfterAFailedSetupRemovesTheBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bindings := sandboxtest.NewBindings()
	reg, err := sandbox.NewRegistry(setupFails{local.New(t.TempDir())})
	require.NoError(t, err)
	m := sandbox.NewManager(reg, bindings, specs{})
	_, err = m.Acquire(ctx, "sesn_setup")
	require.ErrorIs(t, err, sandbox.ErrSetup)
	require.Equal(t, sandbox.BindingPending, get(t, bindings, "sesn_setup").State)
	require.NoError(t, m.Teardown(ctx, "sesn_setup"))
	_, err = bindings.Binding(ctx, "sesn_setup")
	require.ErrorIs(t, err, sandbox.ErrNoBinding)
}
