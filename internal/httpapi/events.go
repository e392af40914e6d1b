package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// maxEventsLimit: the SDK's tool runner lists history with limit=1000 (API.md §10).
const maxEventsLimit = 1000

type sendEventsBody struct {
	Events []json.RawMessage `json:"events"`
}

func (s *Server) sendEvents(w http.ResponseWriter, r *http.Request) error {
	var body sendEventsBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := checkWorkerEvents(principalOf(r.Context()), body.Events); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	evs, err := s.svc.SendEventsKeyed(r.Context(), workspace(r.Context()), r.PathValue("id"), key, body.Events)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Page[wire.Event]{Data: evs})
	return nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	order, err := q.order("asc")
	if err != nil {
		return err
	}
	p := sessions.EventListParams{Desc: order == "desc"}
	if p.Limit, err = q.limit(maxEventsLimit, maxEventsLimit); err != nil {
		return err
	}
	for _, t := range q.list("types") {
		if !slices.Contains(wire.EventTypes, t) {
			return badRequest("types: unknown event type " + strconv.Quote(t))
		}
		p.Types = append(p.Types, t)
	}
	if p.ProcessedGT, p.ProcessedGTE, p.ProcessedLT, p.ProcessedLTE, err = q.createdRange(); err != nil {
		return err
	}
	c, err := q.pageCursor("events", order)
	if err != nil {
		return err
	}
	if c != nil {
		p.AfterSeq = c.Seq
	}
	p.MaxBytes = maxEventsPageBytes
	pw := &eventPageWriter{w: w}
	more, err := s.svc.StreamEvents(r.Context(), workspace(r.Context()), r.PathValue("id"), p, pw.add)
	if err != nil {
		if pw.started {
			// The status and part of the page are out; a well-formed page missing events
			// would be a lie, so the client must see a broken response instead.
			if r.Context().Err() == nil && pw.err == nil {
				s.logger.ErrorContext(r.Context(), "list events: failed mid-page", "error", err)
			}
			panic(http.ErrAbortHandler)
		}
		return err
	}
	next := ""
	if more && pw.last != nil {
		next = cursor{Kind: "events", Order: order, Seq: pw.last.Seq}.encode()
	}
	pw.finish(next)
	return nil
}

// maxEventsPageBytes bounds an events page by size as well as by count: once the events
// written pass it the page ends, next_page pointing after the last one (README, "Paging").
// A page always holds at least one event, so paging makes progress past an event larger
// than the bound; a page is therefore at most the bound plus one event.
const maxEventsPageBytes = 4 << 20

// eventPageWriter writes an events page as its rows are read, in exactly the bytes
// json.Marshal(wire.Page[wire.Event]) would produce, without holding the page: each event is
// encoded and written before the next row is read.
type eventPageWriter struct {
	w       http.ResponseWriter
	started bool
	written int
	last    *wire.Event
	// err is the first write error: the client is gone, reading on is wasted.
	err error
	// buf and esc are reused from event to event, so a page of large events costs one
	// event's worth of them.
	buf, esc bytes.Buffer
}

func (pw *eventPageWriter) start() {
	if pw.started {
		return
	}
	pw.started = true
	pw.w.Header().Set("Content-Type", "application/json")
	pw.w.WriteHeader(http.StatusOK)
	pw.write([]byte(`{"data":[`))
}

// add writes one event and says whether the page is full.
func (pw *eventPageWriter) add(e wire.Event) (bool, error) {
	pw.start()
	if pw.err != nil {
		return false, pw.err
	}
	pw.buf.Reset()
	if pw.last != nil {
		pw.buf.WriteByte(',')
	}
	if err := pw.encode(&pw.buf, e); err != nil {
		return false, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	pw.write(pw.buf.Bytes())
	e.Body = nil // the cursor needs the seq only; do not keep the body alive
	pw.last = &e
	return pw.written >= maxEventsPageBytes, nil
}

// encode appends v as json.Marshal writes it: compacted, and with <, >, &, U+2028 and U+2029
// escaped. It does in place what Marshal does through its own buffers, and escapes (one
// more copy) only when there is something to escape.
func (pw *eventPageWriter) encode(dst *bytes.Buffer, v json.Marshaler) error {
	raw, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	if !bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		return json.Compact(dst, raw)
	}
	pw.esc.Reset()
	if err := json.Compact(&pw.esc, raw); err != nil {
		return err
	}
	json.HTMLEscape(dst, pw.esc.Bytes())
	return nil
}

func (pw *eventPageWriter) finish(next string) {
	pw.start()
	pw.buf.Reset()
	pw.buf.WriteByte(']')
	if next != "" {
		pw.buf.WriteString(`,"next_page":`)
		enc, _ := json.Marshal(next) // a string always encodes
		pw.buf.Write(enc)
	}
	pw.buf.WriteByte('}')
	pw.write(pw.buf.Bytes())
}

// write sends b on and keeps the first error, which ends the page at the next event.
func (pw *eventPageWriter) write(b []byte) {
	n, err := pw.w.Write(b)
	pw.written += n
	if err != nil && pw.err == nil {
		pw.err = fmt.Errorf("write events page: %w", err)
	}
}
