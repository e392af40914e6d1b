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
)

// PreviewsChannel is the NOTIFY channel of preview frames. It is not store.EventsChannel:
// committed-event wake-ups stay tiny hints, and a process that only streams committed events
// never has to read previews.
const PreviewsChannel = "managed_agents_previews"

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
// single LISTEN connection, opened at the first Subscribe, reassembles frames and fans them
// out in memory. Call Run to start it.
type PostgresHub struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	fan    fanout

	idPrefix string
	lastID   atomic.Uint64

	outMu    sync.Mutex
	out      []string // payloads waiting to be sent, in publish order
	outBytes int
	outReady chan struct{}

	listenOnce   sync.Once
	listenWanted chan struct{}
	readyOnce    sync.Once
	ready        chan struct{}
}

var _ Hub = (*PostgresHub)(nil)

// NewPostgresHub returns a hub that talks through pool; call Run to start it.
func NewPostgresHub(pool *pgxpool.Pool, logger *slog.Logger) *PostgresHub {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &PostgresHub{
		pool:         pool,
		logger:       logger,
		idPrefix:     hex.EncodeToString(b[:]),
		outReady:     make(chan struct{}, 1),
		listenWanted: make(chan struct{}),
		ready:        make(chan struct{}),
	}
}

// Ready is closed once the hub listens, which it starts doing at the first Subscribe.
func (h *PostgresHub) Ready() <-chan struct{} { return h.ready }

// Publish queues f for sending and returns without waiting for the database. It sheds f
// (ErrShed) when the queue is full, which happens only while the database is unreachable or
// Run is not running.
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
	h.listenOnce.Do(func() { close(h.listenWanted) })
	return h.fan.subscribe(sessionID)
}

// Run sends and receives until ctx ends.
func (h *PostgresHub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { h.sendLoop(ctx) })
	wg.Go(func() { h.listenLoop(ctx) })
	wg.Wait()
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

// listenLoop holds the LISTEN connection from the first Subscribe until ctx ends,
// reconnecting with backoff.
func (h *PostgresHub) listenLoop(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-h.listenWanted:
	}
	failures := 0
	for ctx.Err() == nil {
		connected, err := h.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			failures = 0 // a working connection that later broke starts over
		}
		failures++
		wait := backoff(failures)
		h.logger.WarnContext(ctx, "preview listener connection lost; reconnecting", "error", err, "backoff", wait)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// listen holds one LISTEN connection until it fails; connected reports whether LISTEN was
// established. Frames whose parts straddle a reconnect are lost with it, so the reassembler
// lives and dies with the connection.
func (h *PostgresHub) listen(ctx context.Context) (connected bool, err error) {
	pooled, err := h.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// Taken out of the pool for good: a connection with an active LISTEN must not be reused.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+PreviewsChannel); err != nil {
		return false, err
	}
	h.readyOnce.Do(func() { close(h.ready) })
	var parts reassembler
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		h.receive(ctx, &parts, msg.Payload, time.Now())
	}
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
