package sessions

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// gateRunner records wake-ups; each Wake blocks until the test releases it (or its context
// ends), so the test controls what is in flight.
type gateRunner struct {
	mu       sync.Mutex
	calls    []wakeCall
	inflight int
	peak     int
	failures int // the first failures calls fail
	release  chan struct{}
	entered  chan string
}

type wakeCall struct {
	session   string
	interrupt bool
	forget    bool
	// trace is the span context the wake-up's context carried.
	trace trace.SpanContext
}

func newGateRunner() *gateRunner {
	return &gateRunner{release: make(chan struct{}), entered: make(chan string, 100)}
}

func (g *gateRunner) Wake(ctx context.Context, sessionID string, interrupt bool) error {
	g.mu.Lock()
	g.calls = append(g.calls, wakeCall{session: sessionID, interrupt: interrupt, trace: trace.SpanContextFromContext(ctx)})
	fail := len(g.calls) <= g.failures
	g.inflight++
	g.peak = max(g.peak, g.inflight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}()
	g.entered <- sessionID
	if fail {
		return errors.New("temporal unavailable")
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gateRunner) StartTeardown(context.Context, string) error { return nil }
func (g *gateRunner) Teardown(context.Context, string) error      { return nil }
func (g *gateRunner) Forget(_ context.Context, sessionID string) {
	g.mu.Lock()
	g.calls = append(g.calls, wakeCall{session: sessionID, forget: true})
	g.mu.Unlock()
	g.entered <- sessionID
}

func (g *gateRunner) snapshot() ([]wakeCall, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]wakeCall(nil), g.calls...), g.peak
}

func quietWaker(workers int) *Waker {
	return newWaker(slog.New(slog.NewTextHandler(io.Discard, nil)), workers, 5*time.Second)
}

func waitEntered(t *testing.T, g *gateRunner, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case id := <-g.entered:
			got = append(got, id)
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d wake-ups reached the runner: %v", len(got), n, got)
		}
	}
	return got
}

// TestWakerCoalescesPerSession: wake-ups of a session whose wake-up is in flight wait and
// merge into one, which goes once the first returns; an interrupt goes at once beside them
// (it never waits behind a wake-up), and interrupts coalesce among themselves the same way.
func TestWakerCoalescesPerSession(t *testing.T) {
	t.Parallel()
	g := newGateRunner()
	w := quietWaker(4)
	w.Start()
	defer w.Stop()

	w.enqueue(g, "s1", false, trace.SpanContext{})
	waitEntered(t, g, 1)
	w.enqueue(g, "s1", false, trace.SpanContext{})
	w.enqueue(g, "s1", true, trace.SpanContext{})
	w.enqueue(g, "s1", false, trace.SpanContext{})
	waitEntered(t, g, 1) // the interrupt
	w.enqueue(g, "s1", true, trace.SpanContext{})
	w.enqueue(g, "s1", true, trace.SpanContext{})
	// Slots are free, yet no second wake-up or interrupt of s1 goes while one is in flight.
	select {
	case id := <-g.entered:
		t.Fatalf("a second wake-up of %s went while the first was in flight", id)
	case <-time.After(100 * time.Millisecond):
	}
	// Each release ends one call in flight; what waited behind it then goes.
	g.release <- struct{}{}
	waitEntered(t, g, 1)
	g.release <- struct{}{}
	waitEntered(t, g, 1)
	g.release <- struct{}{}
	g.release <- struct{}{}

	calls, peak := g.snapshot()
	require.Len(t, calls, 4)
	require.Equal(t, []wakeCall{{session: "s1"}, {session: "s1", interrupt: true}}, calls[:2])
	require.ElementsMatch(t, []wakeCall{{session: "s1"}, {session: "s1", interrupt: true}}, calls[2:],
		"what waited behind each went once, as one")
	require.Equal(t, 2, peak)
}

// TestWakerBoundsConcurrency: however many sessions wait, at most limit wake-ups are in flight.
func TestWakerBoundsConcurrency(t *testing.T) {
	t.Parallel()
	g := newGateRunner()
	w := quietWaker(2)
	defer w.Stop() // never started: the first enqueue starts it
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		w.enqueue(g, id, false, trace.SpanContext{})
	}
	first := waitEntered(t, g, 2)
	select {
	case id := <-g.entered:
		t.Fatalf("a third signal (%s) started while two were in flight", id)
	case <-time.After(100 * time.Millisecond):
	}
	require.Len(t, first, 2)
	for range 5 {
		g.release <- struct{}{}
	}
	waitEntered(t, g, 3)
	calls, peak := g.snapshot()
	require.Len(t, calls, 5)
	require.Equal(t, 2, peak)
	require.ElementsMatch(t, []string{"a", "b", "c", "d", "e"}, []string{calls[0].session, calls[1].session, calls[2].session, calls[3].session, calls[4].session})
}

// TestWakerInterruptsPassWaitingWakeUps: with every wake-up slot held, an interrupt still goes,
// ahead of the wake-ups waiting for a slot.
func TestWakerInterruptsPassWaitingWakeUps(t *testing.T) {
	t.Parallel()
	g := newGateRunner()
	w := quietWaker(1)
	w.Start()
	defer w.Stop()
	w.enqueue(g, "a", false, trace.SpanContext{})
	waitEntered(t, g, 1)
	w.enqueue(g, "b", false, trace.SpanContext{})
	w.enqueue(g, "c", true, trace.SpanContext{})
	require.Equal(t, []string{"c"}, waitEntered(t, g, 1), "the interrupt went while a held the only slot")
	select {
	case id := <-g.entered:
		t.Fatalf("%s went while a held the only slot", id)
	case <-time.After(100 * time.Millisecond):
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	require.Equal(t, []string{"b"}, waitEntered(t, g, 1))
	g.release <- struct{}{}
	calls, _ := g.snapshot()
	require.Equal(t, []wakeCall{{session: "a"}, {session: "c", interrupt: true}, {session: "b"}}, calls)
}

// TestWakerReusesWorkers: wake-ups one after another are delivered by the one worker that
// delivered the first, not by a new goroutine each.
func TestWakerReusesWorkers(t *testing.T) {
	t.Parallel()
	g := newGateRunner()
	w := quietWaker(8)
	w.Start()
	defer w.Stop()
	for _, id := range []string{"a", "b", "c", "d"} {
		w.enqueue(g, id, false, trace.SpanContext{})
		waitEntered(t, g, 1)
		g.release <- struct{}{}
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.inflight) == 0
		}, 5*time.Second, time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, 1, w.workers)
}

// TestWakerRetriesFailedSignals: a failed signal is retried with backoff until it succeeds.
func TestWakerRetriesFailedSignals(t *testing.T) {
	t.Parallel()
	g := newGateRunner()
	g.failures = 2
	w := quietWaker(1)
	w.Start()
	defer w.Stop()
	w.enqueue(g, "s1", true, trace.SpanContext{})
	waitEntered(t, g, 3)
	g.release <- struct{}{}
	calls, _ := g.snapshot()
	require.Equal(t, []wakeCall{{session: "s1", interrupt: true}, {session: "s1", interrupt: true}, {session: "s1", interrupt: true}}, calls)
}

// TestWakerStop: Stop cancels what is in flight, drops what is queued, may be called twice,
// and a wake-up after it is dropped; a forget is delivered as a forget.
func TestWakerStop(t *testing.T) {
	t.Parallel()
	g := newGateRunner()
	w := quietWaker(1)
	w.Start()
	w.forget(g, "gone")
	waitEntered(t, g, 1)
	w.enqueue(g, "s1", false, trace.SpanContext{})
	waitEntered(t, g, 1)
	w.enqueue(g, "s2", false, trace.SpanContext{}) // queued behind s1, which holds the only slot

	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not cancel the signal in flight")
	}
	w.Stop()
	w.Start() // a stopped waker stays stopped
	w.enqueue(g, "s3", false, trace.SpanContext{})
	calls, _ := g.snapshot()
	require.Equal(t, []wakeCall{{session: "gone", forget: true}, {session: "s1"}}, calls, "s2 was dropped at stop, s3 after it")
}

// TestWakerCarriesTheLatestTrace: a wake-up reaches the runner with the span context of the
// request that asked for it, that of the latest when wake-ups coalesce, so the turn continues
// the trace of the send that is answered last.
func TestWakerCarriesTheLatestTrace(t *testing.T) {
	t.Parallel()
	span := func(b byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{b}, SpanID: trace.SpanID{b}, TraceFlags: trace.FlagsSampled})
	}
	g := newGateRunner()
	w := quietWaker(1)
	w.Start()
	defer w.Stop()

	w.enqueue(g, "s1", false, span(1))
	waitEntered(t, g, 1)
	w.enqueue(g, "s1", false, span(2))
	w.enqueue(g, "s1", false, span(3))
	g.release <- struct{}{}
	waitEntered(t, g, 1)
	g.release <- struct{}{}
	calls, _ := g.snapshot()
	require.Len(t, calls, 2)
	require.Equal(t, span(1), calls[0].trace)
	require.Equal(t, span(3), calls[1].trace, "coalesced wake-ups go with the latest request's trace")
}
