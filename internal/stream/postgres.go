package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/managed-agents/managed-agents/internal/startstop"
	"github.com/managed-agents/managed-agents/internal/store"
)

// PreviewsChannel is the NOTIFY channel of preview frames. It is not store.TopicEvents:
// committed-event wake-ups stay tiny hints, and a process that only streams committed events
// never has to read previews.
const PreviewsChannel = string(store.TopicPreviews)

const (
	// maxQueuedBytes bounds the frames waiting to be sent; beyond it Publish sheds.
	maxQueuedBytes = 8 << 20
	// maxBatchBytes bounds one NOTIFY statement.
	maxBatchBytes = 1 << 20
	sendTimeout   = 5 * time.Second

	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
)

// notifyBatch sends many payloads in one round trip and one transaction, which PostgreSQL
// delivers together and in order. Payloads are unique (frame id and part index), so none is
// folded into an identical one.
const notifyBatch = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`

// PostgresHub is a Hub across processes: Publish queues a frame's parts and a sender
// NOTIFYs them in batches, so a model stream never waits for the database; the process's
// store.Listener, asked for store.TopicPreviews at the first Subscribe, hands it the parts,
// which it reassembles and fans out in memory. Start runs the sender; the listener is the
// caller's to start.
type PostgresHub struct {
	pool     *pgxpool.Pool
	listener *store.Listener
	logger   *slog.Logger
	fan      fanout
	sender   startstop.Loop

	idPrefix string
	lastID   atomic.Uint64

	outMu    sync.Mutex
	out      []string // payloads waiting to be sent, in publish order
	outBytes int
	outReady chan struct{}

	listenOnce sync.Once
	readyOnce  sync.Once
	ready      chan struct{}
	// parts reassembles frames; it lives and dies with the LISTEN connection, so frames whose
	// parts straddle a reconnect are lost with it. Only the listener's goroutine touches it.
	parts reassembler
}

var (
	_ Hub               = (*PostgresHub)(nil)
	_ startstop.Service = (*PostgresHub)(nil)
	_ store.Handler     = (*previewReceiver)(nil)
)

// NewPostgresHub returns a hub that publishes through pool and receives through listener;
// call Start to start sending. A nil listener makes a publish-only hub (a worker's), whose
// subscribers receive nothing.
func NewPostgresHub(pool *pgxpool.Pool, listener *store.Listener, logger *slog.Logger) *PostgresHub {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &PostgresHub{
		pool:     pool,
		listener: listener,
		logger:   logger,
		idPrefix: hex.EncodeToString(b[:]),
		outReady: make(chan struct{}, 1),
		ready:    make(chan struct{}),
	}
}

// Start starts the sender; starting a started hub does nothing.
func (h *PostgresHub) Start(ctx context.Context) error {
	h.sender.Start(ctx, h.sendLoop)
	return nil
}

// Stop stops the sender; frames still queued are dropped. It may be called more than once.
func (h *PostgresHub) Stop() { h.sender.Stop() }

// Ready is closed once the hub listens, which it starts doing at the first Subscribe (once
// its listener runs).
func (h *PostgresHub) Ready() <-chan struct{} { return h.ready }

// Publish queues f for sending and returns without waiting for the database. It sheds f
// (ErrShed) when the queue is full, which happens only while the database is unreachable or
// the hub is not started.
func (h *PostgresHub) Publish(ctx context.Context, f Frame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	parts, size, err := encodeParts(f, h.newFrameID())
	if err != nil {
		return err
	}
	h.outMu.Lock()
	if h.outBytes+size > maxQueuedBytes {
		h.outMu.Unlock()
		return ErrShed
	}
	h.out = append(h.out, parts...)
	h.outBytes += size
	h.outMu.Unlock()
	select {
	case h.outReady <- struct{}{}:
	default: // the sender is already told
	}
	return nil
}

// Subscribe implements Hub. The first call makes the hub listen; a process that only
// publishes (a worker) never receives the previews of the whole cluster.
func (h *PostgresHub) Subscribe(sessionID string) (<-chan Frame, func()) {
	h.listenOnce.Do(func() {
		if h.listener == nil {
			h.logger.Error("a publish-only preview hub was subscribed to: its subscribers receive nothing")
			return
		}
		if err := h.listener.Listen(store.TopicPreviews, (*previewReceiver)(h)); err != nil {
			// Only a second hub on the same listener gets here: a wiring mistake, which the
			// subscriber would otherwise see only as previews that never come.
			h.logger.Error("previews will not be received", "error", err)
		}
	})
	return h.fan.subscribe(sessionID)
}

func (h *PostgresHub) newFrameID() string {
	return h.idPrefix + "." + strconv.FormatUint(h.lastID.Add(1), 36)
}

// sendLoop sends queued payloads. A failed batch is dropped, not retried: previews go
// stale within seconds, and a retry after an unclear failure could deliver twice.
func (h *PostgresHub) sendLoop(ctx context.Context) {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.outReady:
		}
		for batch := h.takeBatch(); len(batch) > 0; batch = h.takeBatch() {
			err := h.send(ctx, batch)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				if failures > 0 {
					h.logger.InfoContext(ctx, "preview frames are sent again", "failed_batches", failures)
				}
				failures = 0
				continue
			}
			failures++
			if failures == 1 {
				h.logger.WarnContext(ctx, "sending preview frames failed; dropping them until the database answers", "error", err)
			}
			if !sleep(ctx, backoff(failures)) {
				return
			}
		}
	}
}

// takeBatch removes the oldest queued payloads, up to maxBatchBytes.
func (h *PostgresHub) takeBatch() []string {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	n, size := 0, 0
	for n < len(h.out) && (n == 0 || size+len(h.out[n]) <= maxBatchBytes) {
		size += len(h.out[n])
		n++
	}
	batch := h.out[:n:n] // the queue must not append into the batch while it is sent
	h.out = h.out[n:]
	if len(h.out) == 0 {
		h.out = nil
	}
	h.outBytes -= size
	return batch
}

func (h *PostgresHub) send(ctx context.Context, batch []string) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	_, err := h.pool.Exec(ctx, notifyBatch, PreviewsChannel, batch)
	return err
}

// previewReceiver is the hub's side of the listener: a separate type, so the store.Handler
// methods are not part of the hub's own API.
type previewReceiver PostgresHub

func (r *previewReceiver) Connected(context.Context) {
	h := (*PostgresHub)(r)
	h.parts = reassembler{}
	h.readyOnce.Do(func() { close(h.ready) })
}

func (r *previewReceiver) Notify(ctx context.Context, payload string) {
	(*PostgresHub)(r).receive(ctx, &r.parts, payload, time.Now())
}

func (h *PostgresHub) receive(ctx context.Context, parts *reassembler, payload string, now time.Time) {
	p, err := parsePart(payload)
	if err != nil {
		h.logger.DebugContext(ctx, "ignoring a payload on the previews channel", "error", err, "size", len(payload))
		return
	}
	data, complete := parts.add(p, now)
	if !complete {
		return
	}
	f, err := decodeFrame(data)
	if err != nil {
		h.logger.DebugContext(ctx, "ignoring a preview frame", "error", err)
		return
	}
	h.fan.deliver(f)
}

// backoff is the wait after the nth consecutive failure.
func backoff(n int) time.Duration {
	d := initialBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// sleep waits d unless ctx ends first; it reports whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
