//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkSendAckBusy measures how long POST …/events takes to be acknowledged while n
// sessions run one-tool turns at once: the wake-up of the session's run must not be part of
// it. An op is one turn on every session.
func BenchmarkSendAckBusy(b *testing.B) {
	f := newBenchFixture(b, builtinTools("always_allow"))
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			ctx := context.Background()
			pools, err := sessionPools(ctx, f, n, (b.N+turnsPerSession-1)/turnsPerSession)
			defer func() {
				for _, p := range pools {
					for _, s := range p {
						s.close()
					}
				}
			}()
			require.NoError(b, err)
			posts := make([][]time.Duration, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range n {
				wg.Go(func() {
					for i := range b.N {
						t, err := pools[w][i/turnsPerSession].turn(ctx, f.c, oneToolText)
						if err != nil {
							errs[w] = err
							return
						}
						posts[w] = append(posts[w], t.post)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			require.NoError(b, errors.Join(errs...))
			all := slices.Concat(posts...)
			b.ReportMetric(ms(percentile(all, 50)), "post-p50-ms")
			b.ReportMetric(ms(percentile(all, 99)), "post-p99-ms")
		})
	}
}
