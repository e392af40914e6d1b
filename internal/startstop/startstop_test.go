package startstop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		do       func(l *Loop, run func(context.Context))
		wantRuns int32
	}{
		{"stop before start", func(l *Loop, _ func(context.Context)) { l.Stop() }, 0},
		{"start, stop", func(l *Loop, run func(context.Context)) { l.Start(t.Context(), run); l.Stop() }, 1},
		{"double start runs once", func(l *Loop, run func(context.Context)) {
			l.Start(t.Context(), run)
			l.Start(t.Context(), run)
			l.Stop()
		}, 1},
		{"double stop", func(l *Loop, run func(context.Context)) { l.Start(t.Context(), run); l.Stop(); l.Stop() }, 1},
		{"concurrent stops", func(l *Loop, run func(context.Context)) {
			l.Start(t.Context(), run)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(l.Stop)
			}
			wg.Wait()
		}, 1},
		{"restart after stop", func(l *Loop, run func(context.Context)) {
			l.Start(t.Context(), run)
			l.Stop()
			l.Start(t.Context(), run)
			l.Stop()
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l Loop
			var runs, running atomic.Int32
			run := func(ctx context.Context) {
				runs.Add(1)
				running.Add(1)
				defer running.Add(-1)
				<-ctx.Done()
			}
			tt.do(&l, run)
			require.Equal(t, tt.wantRuns, runs.Load())
			require.Zero(t, running.Load(), "Stop returns only after the loop returned")
		})
	}
}

func TestLoopOutlivesStartContext(t *testing.T) {
	t.Parallel()
	var l Loop
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan struct{})
	l.Start(ctx, func(ctx context.Context) { <-ctx.Done(); close(ended) })
	cancel()
	select {
	case <-ended:
		t.Fatal("the loop ended with Start's context; it must run until Stop")
	default:
	}
	l.Stop()
	<-ended
}

type fakeService struct {
	name     string
	startErr error
	log      *[]string
}

func (f fakeService) Start(context.Context) error {
	*f.log = append(*f.log, "start "+f.name)
	return f.startErr
}
func (f fakeService) Stop() { *f.log = append(*f.log, "stop "+f.name) }

func TestGroup(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		failAt  int // -1: none
		wantLog []string
	}{
		{"all start, stop in reverse", -1, []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}},
		{"a failed start stops the started ones", 2, []string{"start a", "start b", "start c", "stop b", "stop a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var log []string
			var g Group
			for i, n := range []string{"a", "b", "c"} {
				s := fakeService{name: n, log: &log}
				if i == tt.failAt {
					s.startErr = errBoom
				}
				g = append(g, s)
			}
			err := g.Start(t.Context())
			if tt.failAt >= 0 {
				require.ErrorIs(t, err, errBoom)
			} else {
				require.NoError(t, err)
				g.Stop()
			}
			require.Equal(t, tt.wantLog, log)
		})
	}
}
