//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// BenchmarkExecTrue is the overhead of one command: exec create, attach, the wrapper script
// and the exit inspection around `true`.
func BenchmarkExecTrue(b *testing.B) {
	_, sb := newSandbox(b, newProvider(b, docker.Config{}))
	for b.Loop() {
		res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"})
		require.NoError(b, err)
		require.Zero(b, res.ExitCode)
	}
}

// BenchmarkFileWriteRead1MB writes and reads back 1 MB.
func BenchmarkFileWriteRead1MB(b *testing.B) {
	_, sb := newSandbox(b, newProvider(b, docker.Config{}))
	data := make([]byte, 1<<20)
	for b.Loop() {
		require.NoError(b, sb.WriteFile(b.Context(), "f.bin", data))
		got, err := sb.ReadFile(b.Context(), "f.bin")
		require.NoError(b, err)
		require.Len(b, got, len(data))
	}
}

// BenchmarkCreateStartDestroy is a cold acquisition: volume, container create and start,
// then the removal of both.
func BenchmarkCreateStartDestroy(b *testing.B) {
	p := newProvider(b, docker.Config{})
	n := 0
	for b.Loop() {
		n++
		spec := sandbox.SpecFor(fmt.Sprintf("sesn_bench_%d_%d", os.Getpid(), n), wire.EnvironmentConfig{Type: "cloud"})
		ref, err := p.Create(b.Context(), spec)
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, p.Destroy(context.Background(), ref))
		b.StartTimer()
	}
}
