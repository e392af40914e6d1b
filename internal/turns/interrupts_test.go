package turns

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestInterruptsWakeTheSessionsWatchersOnly(t *testing.T) {
	t.Parallel()
	w := NewInterrupts()
	a1, stopA1 := w.Watch("sesn_a")
	a2, stopA2 := w.Watch("sesn_a")
	b, stopB := w.Watch("sesn_b")
	defer stopA1()
	defer stopB()

	stopA2() // a watcher that stopped is not woken (and its channel stays open)
	w.Notify(context.Background(), "sesn_a")
	require.True(t, closed(a1))
	require.False(t, closed(a2))
	require.False(t, closed(b))

	// A notice wakes the watchers of that moment; a later watch waits for the next one.
	again, stopAgain := w.Watch("sesn_a")
	defer stopAgain()
	require.False(t, closed(again))
	w.Notify(context.Background(), "sesn_a")
	require.True(t, closed(again))
	stopA1() // stopping after the wake-up is harmless

	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, map[string]map[chan struct{}]struct{}{"sesn_b": w.watchers["sesn_b"]}, w.watchers, "nothing kept for sessions no one watches")
}
