package sandbox_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
)

type acquisition struct {
	provider, mode string
	failed         bool
}

type acquisitions struct {
	mu  sync.Mutex
	got []acquisition
}

func (a *acquisitions) SandboxAcquired(provider, mode string, _ time.Duration, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, acquisition{provider, mode, err != nil})
}

func (a *acquisitions) list() []acquisition {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]acquisition(nil), a.got...)
}

// The first acquisition creates (cold); a cached client is no acquisition; a manager with
// nothing cached attaches the existing sandbox (warm).
func TestObserverSeesColdAndWarmAcquisitions(t *testing.T) {
	t.Parallel()
	obs := &acquisitions{}
	f := newFixture(t, sandbox.WithObserver(obs))
	const session = "sesn_observed"
	_, err := f.manager.Acquire(t.Context(), session)
	require.NoError(t, err)
	_, err = f.manager.Acquire(t.Context(), session)
	require.NoError(t, err)
	_, err = f.manager.Sandbox(t.Context(), session)
	require.NoError(t, err)
	require.Equal(t, []acquisition{{local.Name, sandbox.AcquiredCold, false}}, obs.list())

	reg, err := sandbox.NewRegistry(local.New(f.root))
	require.NoError(t, err)
	restarted := sandbox.NewManager(reg, f.bindings, specs{}, sandbox.WithObserver(obs))
	_, err = restarted.Sandbox(t.Context(), session)
	require.NoError(t, err)
	require.Equal(t, []acquisition{{local.Name, sandbox.AcquiredCold, false}, {local.Name, sandbox.AcquiredWarm, false}}, obs.list())
}
