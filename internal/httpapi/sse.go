package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/stream"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var previewTypes = []string{wire.EventAgentMessage, wire.EventAgentThinking}

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
	st, err := s.svc.OpenStream(ctx, workspace(ctx), r.PathValue("id"), resume)
	if err != nil {
		return err
	}
	defer st.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // keep reverse proxies from buffering frames
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil // the client is gone
	}

	// Previews only for connections that asked (API.md §5.4); the filter enforces their rules.
	filter := stream.NewPreviewFilter(deltas, st.Cursor())
	var previews <-chan stream.Frame // nil never fires
	if filter.Enabled() && s.previews != nil {
		ch, unsubscribe := s.previews.Subscribe(r.PathValue("id"))
		defer unsubscribe()
		previews = ch
	}

	heartbeat := time.NewTicker(s.heartbeat)
	defer heartbeat.Stop()
	var frame bytes.Buffer
	for {
		evs, deleted, err := st.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.ErrorContext(ctx, "stream read failed", "request_id", requestID(ctx), "error", err)
				writeErrorFrame(w, rc)
			}
			return nil
		}
		for _, ev := range evs {
			frame.Reset()
			if err := writeFrame(&frame, ev.Type, ev.ID, ev); err != nil {
				return nil
			}
			// Previews held until this event (their request's start) follow it.
			for _, f := range filter.Committed(ev) {
				_ = writeFrame(&frame, f.Type, "", f)
			}
			if _, err := w.Write(frame.Bytes()); err != nil {
				return nil
			}
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
		if len(evs) > 0 {
			if err := rc.Flush(); err != nil {
				return nil
			}
		}
		if st.Pending() {
			continue // a full batch: more is waiting without a new wake-up
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.draining:
			return nil
		case <-st.Wake():
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
		}
	}
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
	return nil
}

func writeErrorFrame(w http.ResponseWriter, rc *http.ResponseController) {
	_, _ = w.Write([]byte(`event: error` + "\n" + `data: {"type":"error","error":{"type":"api_error","message":"stream interrupted; reconnect with after_id to resume"}}` + "\n\n"))
	_ = rc.Flush()
}
