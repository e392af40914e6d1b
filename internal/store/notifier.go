package store

import (
	"context"
	"strings"
	"sync"
)

// Notifier fans committed-event wake-ups (TopicEvents) out in memory to the subscribers of
// each session. It is the topic's Handler: give it to the process's Listener with
// listener.Listen(TopicEvents, notifier).
type Notifier struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	// gens is each subscribed session's generation (Generation): the value of clock at its
	// latest wake-up or, before any, when its first subscriber came. clock only grows, so a
	// session's generation never goes back, even when its last subscriber leaves and another
	// comes.
	gens  map[string]uint64
	clock uint64
	// ready is closed once the topic is listened to the first time.
	ready     chan struct{}
	readyOnce sync.Once
}

var _ Handler = (*Notifier)(nil)

// NewNotifier returns a notifier that wakes no one until a Listener feeds it.
func NewNotifier() *Notifier {
	return &Notifier{subs: map[string]map[chan struct{}]struct{}{}, gens: map[string]uint64{}, ready: make(chan struct{})}
}

// Ready is closed once the notifier listens.
func (n *Notifier) Ready() <-chan struct{} { return n.ready }

// Subscribe returns a channel that receives a value whenever the session's log may have
// grown. The channel has a buffer of one: wake-ups coalesce, readers catch up from the log.
func (n *Notifier) Subscribe(sessionID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[sessionID] == nil {
		n.subs[sessionID] = map[chan struct{}]struct{}{}
		n.clock++
		n.gens[sessionID] = n.clock
	}
	n.subs[sessionID][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[sessionID], ch)
		if len(n.subs[sessionID]) == 0 {
			delete(n.subs, sessionID)
			delete(n.gens, sessionID)
		}
		n.mu.Unlock()
	}
}

// Generation is a subscribed session's generation: it grows with every wake-up of its
// subscribers. A read of the log that starts after Generation returned g sees every commit
// whose notice woke them up to g, since a notice is sent only after its commit; so a
// subscriber woken at generation g may take the result of a read that started at g or later
// instead of reading again (sessions' shared stream reads).
func (n *Notifier) Generation(sessionID string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gens[sessionID]
}

// Connected wakes every subscriber: notifications sent while disconnected are gone, so each
// re-reads its log.
func (n *Notifier) Connected(context.Context) {
	n.readyOnce.Do(func() { close(n.ready) })
	n.mu.Lock()
	ids := make([]string, 0, len(n.subs))
	for id := range n.subs {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	for _, id := range ids {
		n.wake(id)
	}
}

// Notify wakes the subscribers of the session the hint names.
func (n *Notifier) Notify(_ context.Context, payload string) {
	sessionID, _, _ := strings.Cut(payload, ":")
	n.wake(sessionID)
}

func (n *Notifier) wake(sessionID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.subs[sessionID]; ok {
		n.clock++
		n.gens[sessionID] = n.clock
	}
	for ch := range n.subs[sessionID] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}
