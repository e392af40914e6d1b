package turns

import (
	"context"
	"sync"
)

// Interrupts tells a running step that a user.interrupt was appended to its session. It is
// the handler of store.TopicInterrupts, which the appending transaction notifies: a step that
// runs as a local activity hears of the interrupt from the workflow only at the workflow's
// next task, so the worker stops it from here at once. A notification missed while the
// listener reconnects only delays the stop until that task (a few seconds): the workflow's
// own interrupt handling stays the one that is always there.
type Interrupts struct {
	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
}

// NewInterrupts makes an Interrupts with no watchers.
func NewInterrupts() *Interrupts {
	return &Interrupts{watchers: map[string]map[chan struct{}]struct{}{}}
}

// Watch returns a channel closed when the session is next interrupted, and the function that
// stops watching (call it when the step ends).
func (w *Interrupts) Watch(sessionID string) (interrupted <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	set := w.watchers[sessionID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.watchers[sessionID] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.watchers[sessionID]; ok {
			delete(set, ch)
			if len(set) == 0 {
				delete(w.watchers, sessionID)
			}
		}
	}
}

// Connected is store.Handler's: nothing to do, see the type's comment.
func (w *Interrupts) Connected(context.Context) {}

// Notify closes the watchers of the session the payload names.
func (w *Interrupts) Notify(_ context.Context, sessionID string) {
	w.mu.Lock()
	set := w.watchers[sessionID]
	delete(w.watchers, sessionID)
	w.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}
