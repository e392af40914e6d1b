//go:build integration

package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
)

// One Temporal dev server per test binary; every env gets its own task queue, so each env's
// worker only runs its own database's sessions.
var (
	temporalOnce sync.Once
	temporalSrv  *durable.DevServer
	temporalErr  error
)

func sharedTemporal(t testing.TB) client.Client {
	t.Helper()
	temporalOnce.Do(func() {
		temporalSrv, temporalErr = durable.StartDevServer(context.Background(), durable.DevServerOptions{})
	})
	require.NoError(t, temporalErr)
	return temporalSrv.Client()
}

// stopSharedTemporal is called by TestMain after the tests.
func stopSharedTemporal() {
	if temporalSrv != nil {
		_ = temporalSrv.Stop()
	}
}

// fastRetry keeps rescheduling tests quick.
var fastRetry = durable.ModelRetry{MaxRetries: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

// newRunningEnv is newEnv plus the durable runner: the API wakes sessions on the env's own
// task queue, where a Temporal worker with the fake model and the local sandbox runs them.
func newRunningEnv(t testing.TB, configure ...func(*app.Config)) *env {
	t.Helper()
	tc := sharedTemporal(t)
	cfg := workerConfig(t, configure...)
	e := newAPIEnv(t, cfg, tc)
	e.runWorker(t, cfg, tc)
	return e
}

// attachWorker starts a worker for an env whose API runs no sessions (newEnv), on a task
// queue of its own: only its sweep finds what the API committed, as when workers come up
// after the API.
func (e *env) attachWorker(t testing.TB, configure ...func(*app.Config)) {
	t.Helper()
	e.runWorker(t, workerConfig(t, configure...), sharedTemporal(t))
}

// workerConfig is a worker's configuration on a fresh task queue of the shared Temporal dev
// server, with the fake model and the local sandbox.
func workerConfig(t testing.TB, configure ...func(*app.Config)) app.Config {
	cfg := app.Config{TaskQueue: "e2e-" + ids.New(""), SandboxDir: t.TempDir(), ModelRetry: fastRetry}
	for _, c := range configure {
		c(&cfg)
	}
	return cfg
}

func (e *env) runWorker(t testing.TB, cfg app.Config, tc client.Client) {
	t.Helper()
	e.sandboxDir = cfg.SandboxDir
	e.startWorker = func() *app.Worker {
		w, err := app.NewWorker(cfg, tc, e.api.Store, e.api.Previews, discardLogger())
		require.NoError(t, err)
		require.NoError(t, w.Start(context.Background()))
		return w
	}
	e.worker = e.startWorker()
	t.Cleanup(func() { e.worker.Stop() })
}

// restartWorker replaces the env's worker with a fresh one, as after a worker restart: no
// cached sandbox clients, nothing in memory.
func (e *env) restartWorker() {
	e.worker.Stop()
	e.worker = e.startWorker()
}

func discardLogger() *slog.Logger {
	if os.Getenv("E2E_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
