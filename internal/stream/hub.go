package stream

import (
	"context"
	"errors"
	"sync"
)

// ErrShed reports a frame that was dropped because the hub's outgoing queue was full.
// Previews are best-effort: a publisher treats it as a reason to stop the preview, never to
// fail the model turn.
var ErrShed = errors.New("stream: preview frame shed: the hub's queue is full")

// Hub carries preview frames from publishers to the subscribers of a session.
//
// Delivery is best-effort. Frames of one publisher reach a subscriber in publish order, but
// any of them may be missing: Publish never waits for a subscriber, and a subscriber whose
// buffer is full loses the frame.
type Hub interface {
	// Publish sends f to the subscribers of f.SessionID. It fails only for an invalid frame
	// (ErrInvalidFrame), a frame it had to shed (ErrShed) or a canceled ctx.
	Publish(ctx context.Context, f Frame) error
	// Subscribe returns a buffered channel of the session's frames and a function that ends
	// the subscription (safe to call more than once). The channel is never closed.
	Subscribe(sessionID string) (frames <-chan Frame, unsubscribe func())
}

// subscriberBuffer is how many frames a subscriber may fall behind before it loses some. A
// model streams a few hundred deltas per message at most, and an SSE handler writes them
// as they come, so this absorbs bursts without holding much per connection.
const subscriberBuffer = 256

// fanout delivers frames in memory to the subscribers of each session.
type fanout struct {
	mu   sync.RWMutex
	subs map[string]map[chan Frame]struct{}
}

func (fo *fanout) subscribe(sessionID string) (<-chan Frame, func()) {
	ch := make(chan Frame, subscriberBuffer)
	fo.mu.Lock()
	if fo.subs == nil {
		fo.subs = map[string]map[chan Frame]struct{}{}
	}
	if fo.subs[sessionID] == nil {
		fo.subs[sessionID] = map[chan Frame]struct{}{}
	}
	fo.subs[sessionID][ch] = struct{}{}
	fo.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			fo.mu.Lock()
			defer fo.mu.Unlock()
			delete(fo.subs[sessionID], ch)
			if len(fo.subs[sessionID]) == 0 {
				delete(fo.subs, sessionID)
			}
		})
	}
}

// deliver hands f to every subscriber of its session that has room for it.
func (fo *fanout) deliver(f Frame) {
	fo.mu.RLock()
	defer fo.mu.RUnlock()
	for ch := range fo.subs[f.SessionID] {
		select {
		case ch <- f:
		default: // a slow subscriber loses the frame; its filter stops that preview
		}
	}
}

// MemoryHub is a Hub within one process: `dev` runs the API and the worker together, and
// tests use it.
type MemoryHub struct {
	fan fanout
}

var _ Hub = (*MemoryHub)(nil)

// NewMemoryHub returns an in-process hub.
func NewMemoryHub() *MemoryHub { return &MemoryHub{} }

// Publish delivers f to the session's current subscribers before it returns.
func (h *MemoryHub) Publish(ctx context.Context, f Frame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	h.fan.deliver(f)
	return nil
}

// Subscribe implements Hub.
func (h *MemoryHub) Subscribe(sessionID string) (<-chan Frame, func()) {
	return h.fan.subscribe(sessionID)
}
