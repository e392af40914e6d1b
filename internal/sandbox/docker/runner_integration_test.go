//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker/runnertest"
)

// TestWorkersFillANewRunnerVolumeInTurn: workers that start on a new binary at once (an
// upgrade) fill its runner volume one at a time. Were two to write it, one would rewrite
// the binary while a container already runs it ("text file busy"). Each provider here is
// such a worker; the binary is a copy of the runner with bytes appended (an ELF runs with
// trailing data), so its volume is new to the engine.
func TestWorkersFillANewRunnerVolumeInTurn(t *testing.T) {
	t.Parallel()
	cli := engine(t)
	built, err := runnertest.Path()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "managed-agents")
	copyFile(t, built, bin)
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "\nrunner-fill-test-%d-%s\n", os.Getpid(), t.Name())
	require.NoError(t, err)
	require.NoError(t, f.Close())

	const workers = 4
	providers := make([]*docker.Provider, workers)
	for i := range providers {
		providers[i] = newProvider(t, docker.Config{Runner: bin})
	}
	volume := docker.RunnerVolume(providers[0])
	t.Cleanup(func() { _, _ = cli.VolumeRemove(context.Background(), volume, client.VolumeRemoveOptions{}) })

	var wg sync.WaitGroup
	outs := make([]string, workers)
	errs := make([]error, workers)
	for i, p := range providers {
		wg.Go(func() {
			_, sb := newSandbox(t, p)
			res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "echo served"})
			outs[i], errs[i] = string(res.Output), err
		})
	}
	wg.Wait()
	for i := range providers {
		require.NoError(t, errs[i], "worker %d", i)
		require.Equal(t, "served\n", outs[i], "worker %d", i)
	}
	_, err = cli.ContainerInspect(t.Context(), volume+"-fill", client.ContainerInspectOptions{})
	require.Error(t, err, "the fill container (the lock) is removed")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
