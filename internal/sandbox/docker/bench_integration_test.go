//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/docker"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// BenchmarkExecTrue is the overhead of one command: exec create, attach, the wrapper script
// and the exit inspection around `true`.
func BenchmarkExecTrue(b *testing.B) {
	_, sb := newSandbox(b, newProvider(b, docker.Config{}))
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"})
		took = append(took, time.Since(start))
		require.NoError(b, err)
		require.Zero(b, res.ExitCode)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
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
