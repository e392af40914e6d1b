package sessions

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Waker limits.
const (
	// wakesInFlight bounds the wake-ups in flight to the runner: a burst of sends, or Temporal
	// being slow or down, must not turn into one goroutine per request. It is large because a
	// wake-up (a Workflow Update, durable.Runner.Wake) is answered when the woken run has
	// taken it, after its first local steps: a few seconds with a real model, and a bound of a
	// few would have every other session wait behind those.
	wakesInFlight = 256
	// signalWorkers are workers beyond wakesInFlight that only interrupts and forgets (quick
	// signals) may use: with every wake-up slot held by a slow run, an interrupt still goes.
	signalWorkers = 16
	// maxPendingWakes bounds the sessions waiting for a wake-up; beyond it a wake-up is dropped
	// (logged). Dropping is safe: the events are committed and the workers' sweep wakes every
	// session with queued work.
	maxPendingWakes = 10000
	// wakeRetryFor is how long one wake-up is retried before it is left to the sweep.
	wakeRetryFor = 15 * time.Second
)

// Waker delivers wake-ups to the runner in the background, after the request that committed
// the events has been answered. Wake-ups of one session coalesce while they wait, and at most
// one per session is in flight, so a session woken by many sends costs one wake-up at a time.
// Interrupts do the same on their own: an interrupt never waits behind a wake-up, which may be
// in flight for as long as the turn's first steps take (durable.Runner.Wake). So the workers
// that deliver them are many: one is started whenever there are fewer workers than wake-ups in
// flight and pending, up to a bound, and each stays for the next (a goroutine per wake-up
// would grow a fresh stack for the SDK's deep payload walk every time: 8 % of dev's CPU when
// measured). Beyond the bound, wake-ups wait, oldest first. Interrupts and forgets go first,
// are not counted against the bound, and have workers of their own beyond it.
//
// Stop drops what is still queued and cancels the wake-ups in flight: the events are durable
// and the workers' sweep (turns.WakeStale) wakes every session with queued work, so a dropped
// wake-up delays a turn, it never loses one. Stop may be called more than once; a waker used
// after Stop drops.
type Waker struct {
	logger   *slog.Logger
	limit    int // wake-ups in flight at most; interrupts and forgets are not counted
	retryFor time.Duration

	mu       sync.Mutex
	cond     *sync.Cond
	stopped  bool
	workers  int // started; each stays for the next wake-up
	pending  map[wakeKey]wakeUp
	order    []wakeKey // pending wake-ups, oldest first
	inflight map[wakeKey]bool
	wakes    int // in flight and counted against limit
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// wakeKey is what coalesces: a session's wake-ups, or its interrupts.
type wakeKey struct {
	session   string
	interrupt bool
}

// wakeUp is one coalesced wake-up; it carries the runner that was current when it was asked
// for, so a worker never reads the service's fields.
type wakeUp struct {
	runner Runner
	// forget: the session is deleted; its run only needs to notice and end.
	forget bool
	// trace is the span context of the request that asked for the wake-up (of the latest one
	// when they coalesce); the signal carries it to the turn.
	trace trace.SpanContext
}

func newWaker(logger *slog.Logger, limit int, retryFor time.Duration) *Waker {
	w := &Waker{logger: logger, limit: limit, retryFor: retryFor, pending: map[wakeKey]wakeUp{}, inflight: map[wakeKey]bool{}}
	w.cond = sync.NewCond(&w.mu)
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

// Start is part of the service's start/stop life; there is nothing to start: workers start as
// wake-ups arrive.
func (w *Waker) Start() {}

// addWorkerLocked starts a worker unless there are as many as wake-ups in flight and pending
// (a pending one that waits behind its session's counts too, so a few may idle) or as many
// as allowed.
func (w *Waker) addWorkerLocked() {
	if w.workers >= w.limit+signalWorkers || w.workers >= len(w.inflight)+len(w.pending) {
		return
	}
	w.workers++
	w.wg.Go(w.work)
}

// Stop drops queued wake-ups, cancels those in flight and waits for them.
func (w *Waker) Stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		if n := len(w.pending); n > 0 {
			w.logger.Info("dropping queued wake-ups at stop; the worker sweep delivers them", "sessions", n)
		}
		clear(w.pending)
		w.order = nil
		w.cancel()
		w.cond.Broadcast()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// enqueue asks for a wake-up of the session and returns at once.
func (w *Waker) enqueue(r Runner, sessionID string, interrupt bool, sc trace.SpanContext) {
	w.add(wakeKey{session: sessionID, interrupt: interrupt}, wakeUp{runner: r, trace: sc})
}

// forget asks for the run of a deleted session to be told, and returns at once.
func (w *Waker) forget(r Runner, sessionID string) {
	w.add(wakeKey{session: sessionID}, wakeUp{runner: r, forget: true})
}

func (w *Waker) add(key wakeKey, up wakeUp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		w.logger.Warn("wake-up after stop dropped; the worker sweep delivers it", "session_id", key.session)
		return
	}
	if prev, ok := w.pending[key]; ok {
		up.forget = up.forget || prev.forget
		w.pending[key] = up
		return
	}
	if len(w.pending) >= maxPendingWakes {
		w.logger.Warn("too many sessions waiting for a wake-up; dropped, the worker sweep delivers it", "session_id", key.session)
		return
	}
	w.pending[key] = up
	w.order = append(w.order, key)
	w.addWorkerLocked()
	w.cond.Signal()
}

// signal reports whether a wake-up is delivered as a quick signal: an interrupt, or the
// notice to a deleted session's run.
func (up wakeUp) signal(key wakeKey) bool { return key.interrupt || up.forget }

// next blocks until a pending wake-up may go — its session has none of its kind in flight,
// and it is a signal or fewer than limit wake-ups are in flight — marks it in flight and
// returns it, signals first, each kind oldest first; ok is false once the waker stops.
func (w *Waker) next() (wakeKey, wakeUp, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if w.stopped {
			return wakeKey{}, wakeUp{}, false
		}
		for _, signals := range []bool{true, false} {
			if !signals && w.wakes >= w.limit {
				break
			}
			for i, key := range w.order {
				up := w.pending[key]
				if w.inflight[key] || up.signal(key) != signals {
					continue
				}
				w.order = slices.Delete(w.order, i, i+1)
				delete(w.pending, key)
				w.inflight[key] = true
				if !signals {
					w.wakes++
				}
				return key, up, true
			}
		}
		w.cond.Wait()
	}
}

// done ends a wake-up in flight: its session's next wake-up of the kind, and if it counted
// against the limit any other waiting wake-up, may now go.
func (w *Waker) done(key wakeKey, up wakeUp) {
	w.mu.Lock()
	delete(w.inflight, key)
	if !up.signal(key) {
		w.wakes--
	}
	w.cond.Signal()
	w.mu.Unlock()
}

func (w *Waker) work() {
	for {
		key, up, ok := w.next()
		if !ok {
			return
		}
		w.deliver(key, up)
		w.done(key, up)
	}
}

// deliver retries the wake-up with backoff for a while, then leaves the session to the sweep:
// every run starts from the log, so the next wake-up of the session finds the queued work.
func (w *Waker) deliver(key wakeKey, up wakeUp) {
	sessionID := key.session
	ctx, cancel := context.WithTimeout(w.ctx, w.retryFor)
	defer cancel()
	ctx = trace.ContextWithSpanContext(ctx, up.trace)
	if up.forget {
		up.runner.Forget(ctx, sessionID)
		return
	}
	for backoff := 50 * time.Millisecond; ; backoff = min(backoff*2, 2*time.Second) {
		err := up.runner.Wake(ctx, sessionID, key.interrupt)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			if w.ctx.Err() == nil {
				w.logger.Error("could not wake the session's run; its events stay queued until the session is woken again",
					"session_id", sessionID, "error", err)
			}
			return
		case <-time.After(backoff):
		}
	}
}
