package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Bench runs the provider benchmarks every provider reports the same way: a cold
// acquisition (Create + Attach of a new session's sandbox; its Destroy is not timed), one
// `true` command, and a 1 MB file write and read. Each reports the p50 and p99 of its
// operations besides the mean, since a tool call waits for the slow ones too. Every
// acquisition here is cold; BenchWarm measures one from a provider's warm pool.
func Bench(b *testing.B, p sandbox.Provider) {
	b.Run("AcquireCold", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			took = append(took, acquireOnce(b, p, benchSpec()))
		}
		reportPercentiles(b, took)
	})

	sb := benchSandbox(b, p)
	b.Run("ExecTrue", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			res, err := sb.Exec(b.Context(), sandbox.ExecRequest{Command: "true"})
			took = append(took, time.Since(start))
			require.NoError(b, err)
			require.Zero(b, res.ExitCode)
		}
		reportPercentiles(b, took)
	})

	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b.Run("WriteFile1MB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			err := sb.WriteFile(b.Context(), "bench/write.bin", data)
			took = append(took, time.Since(start))
			require.NoError(b, err)
		}
		reportPercentiles(b, took)
	})

	require.NoError(b, sb.WriteFile(b.Context(), "bench/read.bin", data))
	b.Run("ReadFile1MB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			got, err := sb.ReadFile(b.Context(), "bench/read.bin")
			took = append(took, time.Since(start))
			require.NoError(b, err)
			require.Len(b, got, len(data))
		}
		reportPercentiles(b, took)
	})
}

// BenchWarm is the acquisition of a new session's sandbox (Create + Attach, as AcquireCold)
// from a provider that keeps a warm pool: before each timed acquisition, ready (untimed)
// waits until the pool holds a container for the spec, so every one is a claim.
func BenchWarm(b *testing.B, p sandbox.Provider, ready func(sandbox.Spec) error) {
	b.Run("AcquireWarm", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			b.StopTimer()
			s := benchSpec()
			require.NoError(b, ready(s))
			b.StartTimer()
			took = append(took, acquireOnce(b, p, s))
		}
		reportPercentiles(b, took)
	})
}

// benchSandbox creates the sandbox the operation benchmarks share and destroys it after.
func benchSandbox(b *testing.B, p sandbox.Provider) sandbox.Sandbox {
	b.Helper()
	s := sandbox.SpecFor(fmt.Sprintf("sesn_bench_%d_%d", os.Getpid(), names.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
	ref, err := p.Create(b.Context(), s)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, p.Destroy(context.Background(), ref)) })
	sb, err := p.Attach(b.Context(), ref)
	require.NoError(b, err)
	return sb
}

// reportPercentiles reports the p50 and p99 of took in milliseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(q int) float64 { return float64(took[(len(took)-1)*q/100].Microseconds()) / 1000 }
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(99), "p99-ms")
}

// benchSpec is a new session's spec of the default environment.
func benchSpec() sandbox.Spec {
	return sandbox.SpecFor(fmt.Sprintf("sesn_bench_%d_%d", os.Getpid(), names.Add(1)), wire.EnvironmentConfig{Type: "cloud"})
}

// acquireOnce times Create + Attach of s, then destroys the sandbox off the clock.
func acquireOnce(b *testing.B, p sandbox.Provider, s sandbox.Spec) time.Duration {
	start := time.Now()
	ref, err := p.Create(b.Context(), s)
	require.NoError(b, err)
	_, err = p.Attach(b.Context(), ref)
	took := time.Since(start)
	require.NoError(b, err)
	b.StopTimer()
	require.NoError(b, p.Destroy(context.Background(), ref))
	b.StartTimer()
	return took
}
