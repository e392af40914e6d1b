//go:build integration

package controllers_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/durable"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
)

// devProcess is `dev` running in the test against envtest: API, worker and controller, with
// a private Temporal dev server and database.
type devProcess struct {
	addr, key string
	// stop ends dev and fails the test unless it stops cleanly within a minute; the test's
	// cleanup calls it too, so calling it is only needed to check the stop itself.
	stop func()
}

// startDev runs dev with an admin kubeconfig for env's cluster; configure adjusts the
// configuration (the sandbox provider, say) before it starts. It returns once /readyz is ok.
func startDev(t *testing.T, env *envtest.Environment, configure func(*app.Config)) devProcess {
	t.Helper()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "dev-admin", Groups: []string{"system:masters"}}, nil)
	require.NoError(t, err)
	kc, err := user.KubeConfig()
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kc, 0o600))

	temporal, err := durable.StartDevServer(context.Background(), durable.DevServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = temporal.Stop() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	key := "sk-dev-" + ids.New("")
	cfg := app.Config{Addr: addr, DataDir: t.TempDir(), DatabaseURL: pgtest.URL(t), TemporalAddress: temporal.FrontendHostPort(),
		TaskQueue: "dev-" + ids.New(""), SandboxDir: t.TempDir(), APIKey: key, LogFormat: "text", LogLevel: "error",
		Kubeconfig: kubeconfig, ControllerWorkspacePerNamespace: true}
	if configure != nil {
		configure(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunDev(ctx, cfg) }()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Error("dev did not stop")
		}
	})
	t.Cleanup(stop)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, wait, 50*time.Millisecond)
	return devProcess{addr: addr, key: key, stop: stop}
}
