package store

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EventsChannel is the NOTIFY channel of committed-event wake-ups. Payloads are tiny hints
// ("<session id>:<seq>"); subscribers always re-read the log after their cursor, so a lost
// or coalesced hint never loses an event.
const EventsChannel = "managed_agents_events"

// Notifier holds the process's single LISTEN connection and fans wake-ups out in memory to
// subscribers of each session.
type Notifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	// ready is closed once LISTEN is established the first time.
	ready     chan struct{}
	readyOnce sync.Once
}

// NewNotifier returns a notifier; call Run to start listening.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	return &Notifier{pool: pool, logger: logger, subs: map[string]map[chan struct{}]struct{}{}, ready: make(chan struct{})}
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
	}
	n.subs[sessionID][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[sessionID], ch)
		if len(n.subs[sessionID]) == 0 {
			delete(n.subs, sessionID)
		}
		n.mu.Unlock()
	}
}

// Run listens until ctx ends, reconnecting with backoff. After every (re)connect it wakes
// every subscriber, because notifications sent while disconnected are gone.
func (n *Notifier) Run(ctx context.Context) {
	const initialBackoff = 100 * time.Millisecond
	backoff := initialBackoff
	for ctx.Err() == nil {
		connected, err := n.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = initialBackoff // a working connection that later broke starts over
		}
		n.logger.WarnContext(ctx, "notifier connection lost; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listen holds one LISTEN connection until it fails; connected reports whether LISTEN was
// established.
func (n *Notifier) listen(ctx context.Context) (connected bool, err error) {
	pooled, err := n.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// Taken out of the pool for good: a connection with an active LISTEN must not be reused.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return false, err
	}
	n.readyOnce.Do(func() { close(n.ready) })
	n.wakeAll()
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		sessionID, _, _ := strings.Cut(msg.Payload, ":")
		n.wake(sessionID)
	}
}

func (n *Notifier) wake(sessionID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[sessionID] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (n *Notifier) wakeAll() {
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
