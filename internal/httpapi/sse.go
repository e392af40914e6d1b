package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var previewTypes = []string{wire.EventAgentMessage, wire.EventAgentThinking}

// listeningHub is a preview hub that receives only once it listens: stream.PostgresHub
// starts listening at its first subscription, a connection and a LISTEN later.
type listeningHub interface{ Ready() <-chan struct{} }

// previewListenWait bounds how long a stream that asked for previews waits for the hub to
// listen before it starts without that promise (previews are best effort).
const previewListenWait = 5 * time.Second

// awaitPreviews waits until the preview hub receives, so that a client that opens a stream
// with previews and then starts a turn gets that turn's previews: without it, the first such
// stream of a process could start before the hub listened, and miss a fast turn's first
// frames.
func (s *Server) awaitPreviews(ctx context.Context) error {
	h, ok := s.previews.(listeningHub)
	if !ok {
		return nil
	}
	select {
	case <-h.Ready(): // every stream after the process's first
		return nil
	default:
	}
	t := time.NewTimer(previewListenWait)
	defer t.Stop()
	select {
	case <-h.Ready():
	case <-t.C:
		s.logger.WarnContext(ctx, "the preview hub is not listening yet; the stream starts without waiting for it", "request_id", requestID(ctx))
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// streamEvents serves GET …/events/stream (API.md §7): one `event: <type>` + one-line
// `data:` frame per committed event, flushed per frame, `event: ping` heartbeats, and
// session.deleted as the last frame. Resume extension: Last-Event-ID or ?after_id= replays
// the log after that event.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	deltas := q.list("event_deltas")
	if len(deltas) > 100 {
		return badRequest("event_deltas: at most 100 values")
	}
	for _, d := range deltas {
		if !slices.Contains(previewTypes, d) {
			return badRequest("event_deltas: " + strconv.Quote(d) + " is not one of agent.message, agent.thinking")
		}
	}
	resume := q.v.Get("after_id")
	if resume == "" {
		resume = r.Header.Get("Last-Event-ID")
	}
	ctx := r.Context()
	// Previews only for connections that asked (API.md §5.4); the filter enforces their rules.
	// The hub is subscribed to before the stream reads the log's end, so every frame of a model
	// request that starts after that end reaches this connection (PreviewFilter.Await).
	var previews <-chan stream.Frame // nil never fires
	if len(deltas) > 0 && s.previews != nil {
		ch, unsubscribe := s.previews.Subscribe(r.PathValue("id"))
		defer unsubscribe()
		previews = ch
		if err := s.awaitPreviews(ctx); err != nil {
			return err
		}
	}
	// Watch the key before anything else, then check it once: a revocation that landed
	// between authentication and the watch would otherwise go unseen by this stream.
	key := newKeyWatch(s.auth, principalOf(ctx))
	defer key.stop()
	switch key.recheck(ctx, apiKey(r)) {
	case keyEnded:
		return &apiError{status: http.StatusUnauthorized, errType: "authentication_error", msg: "invalid x-api-key"}
	case keyUnknown:
		return errors.New("the stream's API key could not be checked")
	}
	st, err := s.svc.OpenStream(ctx, workspace(ctx), r.PathValue("id"), resume)
	if err != nil {
		return err
	}
	defer st.Close()
	// The key's stream cap: refused with 429 before the stream starts. The heartbeat renews
	// the lease; a process that dies stops renewing, and its leases lapse.
	lease, err := s.svc.AcquireStream(ctx, principalOf(ctx), streamLeaseTTL*s.heartbeat)
	if err != nil && !s.limiterFailed(r, err) {
		return err
	}
	defer func() {
		// The request's context is done by now; the release still has to reach the database.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := lease.Release(rctx); err != nil {
			s.logger.WarnContext(ctx, "stream lease not released; it lapses on its own", "request_id", requestID(ctx), "error", err)
		}
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // keep reverse proxies from buffering frames
	w.WriteHeader(http.StatusOK)
	s.obs.StreamOpened()
	defer s.obs.StreamClosed()
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil // the client is gone
	}

	// Without a hub no preview ever arrives, so no committed event may wait for one.
	awaited := deltas
	if previews == nil {
		awaited = nil
	}
	filter := stream.NewPreviewFilter(awaited, st.Cursor(), st.Live())
	heartbeat := time.NewTicker(s.heartbeat)
	defer heartbeat.Stop()
	var (
		frame bytes.Buffer
		// pending are committed events read from the log and not written yet: the first
		// waits for its preview (filter.Await), the rest keep log order behind it.
		pending []sessions.Committed
		hold    = newHold()
	)
	defer hold.stop()
	for {
		if len(pending) == 0 {
			evs, deleted, err := st.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.logger.ErrorContext(ctx, "stream read failed", "request_id", requestID(ctx), "error", err)
					writeErrorFrame(w, rc)
				}
				return nil
			}
			if deleted {
				frame.Reset()
				now := time.Now()
				gone := wire.Event{ID: ids.New(ids.Event), Type: wire.EventSessionDeleted, ProcessedAt: &now}
				_ = writeFrame(&frame, gone.Type, "", gone)
				_, _ = w.Write(frame.Bytes())
				_ = rc.Flush()
				return nil
			}
			pending = evs
		}
		n, ok := writeCommitted(w, &frame, filter, pending, hold.expired)
		if !ok {
			return nil
		}
		pending = pending[n:]
		if n > 0 {
			hold.stop()
			if err := rc.Flush(); err != nil {
				return nil
			}
		}
		if len(pending) > 0 {
			hold.start(previewHold)
		} else if st.Pending() {
			continue // a full batch: more is waiting without a new wake-up
		}
		var wake <-chan struct{} // nil while an event waits: the log is read after it
		if len(pending) == 0 {
			wake = st.Wake()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.draining:
			return nil
		case <-key.changed:
			switch key.recheck(ctx, apiKey(r)) {
			case keyEnded:
				writeAuthErrorFrame(w, rc, requestID(ctx))
				return nil
			case keyUnknown:
				// The check failed (the database, say): not the key's fault. The client
				// reconnects with after_id and is checked again then.
				writeErrorFrame(w, rc)
				return nil
			}
		case <-key.expiry.C:
			writeAuthErrorFrame(w, rc, requestID(ctx))
			return nil
		case <-wake:
		case <-hold.c:
			hold.expire()
			s.logger.DebugContext(ctx, "preview did not arrive in time; writing its event without it",
				"request_id", requestID(ctx), "event_id", pending[0].ID)
		case f := <-previews:
			if !s.writePreviews(w, rc, &frame, filter, f, previews) {
				return nil
			}
		case <-heartbeat.C:
			if _, err := w.Write([]byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			if err := lease.Renew(ctx); err != nil && ctx.Err() == nil {
				// The stream goes on: a lease that lapses meanwhile is recorded again on the
				// next renewal.
				s.logger.WarnContext(ctx, "stream lease not renewed", "request_id", requestID(ctx), "error", err)
			}
		}
	}
}

// streamLeaseTTL is how many heartbeats a stream's lease outlives its last renewal: three
// renewals may fail (or be late) before the slot lapses, and a replica that dies frees its
// streams' slots within four heartbeats (a minute by default).
const streamLeaseTTL = 4

// releaseTimeout bounds releasing a stream's lease after the client has gone.
const releaseTimeout = 5 * time.Second

// previewHold bounds how long a committed event waits for a preview the connection expects
// (PreviewFilter.Await). The preview was published before the commit, so it normally arrives
// within milliseconds; the bound is for one that was shed or lost its end, whose event is then
// written without it.
const previewHold = 3 * time.Second

// writeCommitted writes pending events in order until one must wait for its preview (the
// first one is written anyway when force is set: its wait expired), each followed by the
// held previews now due. It returns how many it wrote, and false when the client is gone.
func writeCommitted(w http.ResponseWriter, frame *bytes.Buffer, filter *stream.PreviewFilter, pending []sessions.Committed, force bool) (int, bool) {
	for n, ev := range pending {
		if filter.Await(ev.Event) && !(force && n == 0) {
			return n, true
		}
		frame.Reset()
		// Encoded once by the read this stream shared with the session's other streams.
		writeEncodedFrame(frame, ev.Type, ev.ID, ev.JSON)
		// Previews held until this event (their request's start) follow it.
		for _, f := range filter.Committed(ev.Event) {
			_ = writeFrame(frame, f.Type, "", f)
		}
		if _, err := w.Write(frame.Bytes()); err != nil {
			return n, false
		}
	}
	return len(pending), true
}

// hold is the timer of the committed event waiting for its preview.
type hold struct {
	t       *time.Timer
	c       <-chan time.Time // nil when no event waits
	expired bool             // the waiting event's time is up
}

func newHold() *hold { return &hold{} }

// start starts the wait of the event now first, unless one is running.
func (h *hold) start(d time.Duration) {
	if h.c != nil || h.expired {
		return
	}
	h.t = time.NewTimer(d)
	h.c = h.t.C
}

func (h *hold) expire() { h.c, h.expired = nil, true }

// stop ends the wait: the event it was for was written.
func (h *hold) stop() {
	if h.t != nil {
		h.t.Stop()
	}
	h.t, h.c, h.expired = nil, nil, false
}

// writePreviews writes an admitted preview frame and any others already waiting, then
// flushes once. Preview frames carry no id line: they are not in the log, so they are no
// resume point. It reports false when the client is gone.
func (s *Server) writePreviews(w http.ResponseWriter, rc *http.ResponseController, frame *bytes.Buffer, filter *stream.PreviewFilter, f stream.Frame, more <-chan stream.Frame) bool {
	frame.Reset()
	for {
		if filter.Admit(f) {
			_ = writeFrame(frame, f.Type, "", f)
		}
		select {
		case f = <-more:
			continue
		default:
		}
		break
	}
	if frame.Len() == 0 {
		return true
	}
	if _, err := w.Write(frame.Bytes()); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// writeFrame writes one SSE frame. The id line lets EventSource clients resume with
// Last-Event-ID; the Go SDK ignores it.
func writeFrame(b *bytes.Buffer, name, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", name, err)
	}
	writeEncodedFrame(b, name, id, data)
	return nil
}

// writeEncodedFrame is writeFrame for a value already encoded by json.Marshal.
func writeEncodedFrame(b *bytes.Buffer, name, id string, data []byte) {
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteString("\ndata: ")
	b.Write(data) // json.Marshal output has no raw newlines
	b.WriteString("\n\n")
}

// writeAuthErrorFrame ends a stream whose key stopped working (revoked or expired): the SDK
// ends the stream with an authentication_error, and reconnecting with the key gets 401.
func writeAuthErrorFrame(w http.ResponseWriter, rc *http.ResponseController, requestID string) {
	body, _ := json.Marshal(wire.ErrorEnvelope{Type: "error", RequestID: requestID,
		Error: wire.ErrorObject{Type: "authentication_error", Message: "the API key was revoked or has expired"}})
	_, _ = w.Write([]byte("event: error\ndata: " + string(body) + "\n\n"))
	_ = rc.Flush()
}

func writeErrorFrame(w http.ResponseWriter, rc *http.ResponseController) {
	_, _ = w.Write([]byte(`event: error` + "\n" + `data: {"type":"error","error":{"type":"api_error","message":"stream interrupted; reconnect with after_id to resume"}}` + "\n\n"))
	_ = rc.Flush()
}
