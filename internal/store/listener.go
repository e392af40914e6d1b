package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Topic is a NOTIFY channel. Every channel the server uses is named here, so no two parts
// of it pick the same name or mistake each other's payloads.
type Topic string

const (
	// TopicEvents carries committed-event wake-ups: the session's id, sent in the appending
	// transaction. Subscribers always re-read the log after their cursor, so a lost or
	// coalesced hint never loses an event. The payload is the id alone so that PostgreSQL,
	// which delivers identical notifications of one transaction once, sends one hint per
	// transaction however many appends it made (a turn's Advance makes two or three).
	// Listeners take the id before a ':', as payloads were "<session id>:<seq>" before.
	TopicEvents Topic = "managed_agents_events"
	// TopicPreviews carries preview frames (internal/stream's part encoding): many, large and
	// best-effort.
	TopicPreviews Topic = "managed_agents_previews"
	// TopicKeys carries the id of an API key that was revoked, rotated or expired early, sent
	// in the transaction that changed it, so every API process drops it from its cache at once.
	TopicKeys Topic = "managed_agents_keys"
	// TopicInterrupts carries the id of a session a user.interrupt was appended to, sent in
	// the appending transaction, so the worker running the session's step stops it at once
	// rather than when the workflow next hears of the interrupt.
	TopicInterrupts Topic = "managed_agents_interrupts"
	// TopicWork carries the id of an environment whose work queue gained an item, sent in the
	// queueing transaction: the long polls of that environment look again at once.
	TopicWork Topic = "managed_agents_work"
)

// Handler receives one topic's notifications. Both methods run on the topic's own goroutine,
// one call at a time, so a handler needs no lock for state only they touch.
type Handler interface {
	// Connected runs after every (re)connect, before the connection's first notification:
	// whatever was sent while the topic was not listened to is gone.
	Connected(ctx context.Context)
	// Notify runs for each notification, in the order PostgreSQL delivers them.
	Notify(ctx context.Context, payload string)
}

// Listener is the process's one LISTEN component: it holds a LISTEN for each topic that has
// a handler, reconnects with backoff, and tells the handler after every reconnect.
//
// Each topic has its own connection, not one shared by all. PostgreSQL delivers a
// connection's notifications strictly in order, so on a shared connection a burst of preview
// parts (up to megabytes while a model streams) would sit in front of a committed-event
// wake-up and delay every live stream of the process; a separate connection keeps wake-ups
// as fast as an idle database. The cost is one connection per listened topic and process
// (three in an API process: events, keys and, once a stream asks, previews; one in a
// worker, for interrupts: it only publishes previews). A topic is listened to from its Listen call on, so
// a process holds only the connections it uses.
type Listener struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	obs    Observer

	mu       sync.Mutex
	handlers map[Topic]Handler
	runCtx   context.Context // nil unless started
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// ListenerOption configures NewListener.
type ListenerOption func(*Listener)

// ListenerObserver records every reconnect through o (default: nothing is recorded).
func ListenerObserver(o Observer) ListenerOption { return func(l *Listener) { l.obs = o } }

// NewListener returns a listener over pool; it listens to nothing until a topic has a handler
// and it is started.
func NewListener(pool *pgxpool.Pool, logger *slog.Logger, opts ...ListenerOption) *Listener {
	l := &Listener{pool: pool, logger: logger, obs: nopObserver{}, handlers: map[Topic]Handler{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Listen hands topic's notifications to h from now on (once the listener is started). A
// topic has one handler: its owner fans out in memory.
func (l *Listener) Listen(topic Topic, h Handler) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, taken := l.handlers[topic]; taken {
		return fmt.Errorf("listen on %s: the topic already has a handler", topic)
	}
	l.handlers[topic] = h
	if l.runCtx != nil {
		l.spawn(topic, h)
	}
	return nil
}

// Start starts listening to every topic that has a handler; starting a started listener does
// nothing.
func (l *Listener) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runCtx != nil {
		return nil
	}
	l.runCtx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for topic, h := range l.handlers {
		l.spawn(topic, h)
	}
	return nil
}

// Stop closes every LISTEN connection and waits for the topics' goroutines; it may be called
// more than once.
func (l *Listener) Stop() {
	l.mu.Lock()
	if l.cancel != nil {
		l.cancel()
	}
	l.runCtx, l.cancel = nil, nil
	l.mu.Unlock()
	l.wg.Wait()
}

// spawn runs topic's loop; l.mu is held.
func (l *Listener) spawn(topic Topic, h Handler) {
	ctx := l.runCtx
	l.wg.Go(func() { l.run(ctx, topic, h) })
}

const (
	listenInitialBackoff = 100 * time.Millisecond
	listenMaxBackoff     = 5 * time.Second
)

// run holds topic's LISTEN until ctx ends, reconnecting with backoff.
func (l *Listener) run(ctx context.Context, topic Topic, h Handler) {
	backoff := listenInitialBackoff
	for ctx.Err() == nil {
		connected, err := l.listen(ctx, topic, h)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = listenInitialBackoff // a working connection that later broke starts over
		}
		l.logger.WarnContext(ctx, "LISTEN connection lost; reconnecting", "topic", topic, "error", err, "backoff", backoff)
		l.obs.ListenerReconnecting(string(topic))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, listenMaxBackoff)
	}
}

// listen holds one LISTEN connection until it fails; connected reports whether LISTEN was
// established.
func (l *Listener) listen(ctx context.Context, topic Topic, h Handler) (connected bool, err error) {
	pooled, err := l.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire a connection: %w", err)
	}
	// Taken out of the pool for good: a connection with an active LISTEN must not be reused.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+string(topic)); err != nil {
		return false, fmt.Errorf("LISTEN %s: %w", topic, err)
	}
	h.Connected(ctx)
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		h.Notify(ctx, msg.Payload)
	}
}
