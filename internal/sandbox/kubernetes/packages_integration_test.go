//go:build integration

package kubernetes_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
)

// npmOffline keeps npm off the network: the test installs a package from a local directory.
var npmOffline = map[string]string{
	"NPM_CONFIG_OFFLINE": "true", "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/",
	"NPM_CONFIG_UPDATE_NOTIFIER": "false", "NPM_CONFIG_AUDIT": "false", "NPM_CONFIG_FUND": "false",
}

// localNPMPackage is a package npm installs from a directory: a program ma-hello.
func localNPMPackage(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "ma-hello", "version": "1.0.0", "bin": {"ma-hello": "hello.js"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.js"), []byte("#!/usr/bin/env node\nconsole.log('hello from ma-hello');\n"), 0o755))
	return dir
}

func testPackages(t *testing.T, w *world) {
	t.Run("InstalledOnceAtStartAsTheSandboxsUser", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		s := spec()
		s.Packages = map[string][]string{"npm": {localNPMPackage(t)}}
		s.Env = npmOffline
		ref, err := p.Create(ctx, s)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
		sb, err := p.Attach(ctx, ref)
		require.NoError(t, err)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Command: "ma-hello"})
		require.NoError(t, err)
		require.Equal(t, "hello from ma-hello\n", string(res.Output), "every command finds what was installed")
		res, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "ls -A"})
		require.NoError(t, err)
		require.Empty(t, string(res.Output), "nothing of the install lands in the workspace")

		// A retried acquisition adopts the binding and does not install again: what the
		// first install put in place is removed, and stays removed.
		res, err = sb.Exec(ctx, sandbox.ExecRequest{Command: `rm -rf "$MA_PACKAGES_DIR/bin/ma-hello" "$MA_PACKAGES_DIR/lib/node_modules/ma-hello"`})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, string(res.Output))
		again, err := w.provider(t).Create(ctx, s)
		require.NoError(t, err)
		require.Equal(t, ref, again)
		res, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "command -v ma-hello || echo none"})
		require.NoError(t, err)
		require.Equal(t, "none\n", string(res.Output), "the install ran once")
	})

	t.Run("AFailedInstallFailsCreateWithItsOutputAndLeavesNothing", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		s := spec()
		s.Packages = map[string][]string{"npm": {filepath.Join(t.TempDir(), "no-such-package")}}
		s.Env = npmOffline
		_, err := p.Create(ctx, s)
		require.ErrorIs(t, err, sandbox.ErrSetup)
		require.ErrorIs(t, err, kubernetes.ErrPackages)
		require.ErrorContains(t, err, "the npm installer exited with status")
		require.ErrorContains(t, err, "no-such-package", "the installer's output says why")
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &v1alpha1.SandboxBinding{}))
		}, 20*time.Second, 50*time.Millisecond, "the binding (and with it the pod) is deleted")
	})

	t.Run("AManagerTheImageLacksFailsClearly", func(t *testing.T) {
		if _, err := exec.LookPath("gem"); err == nil {
			t.Skip("the test's kubelet runs commands on this machine, which has gem")
		}
		p := w.provider(t)
		s := spec()
		s.Packages = map[string][]string{"gem": {"rake"}}
		_, err := p.Create(t.Context(), s)
		require.ErrorIs(t, err, sandbox.ErrSetup)
		require.ErrorContains(t, err, "gem is not installed in the sandbox image")
	})

	t.Run("AptIsRefusedBeforeAnythingIsMade", func(t *testing.T) {
		ctx := t.Context()
		p := w.provider(t)
		s := spec()
		s.Packages = map[string][]string{"apt": {"jq"}}
		_, err := p.Create(ctx, s)
		require.ErrorIs(t, err, sandbox.ErrSetup)
		require.ErrorContains(t, err, "apt packages need root")
		require.True(t, apierrors.IsNotFound(w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &v1alpha1.SandboxBinding{})))
	})
}
