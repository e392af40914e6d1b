package stream

import (
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Bounds of a filter's memory; a connection can stay open for days. Ids are forgotten
// oldest first, long after any frame for them could still be on its way.
const (
	maxOpenPreviews  = 64
	maxClosedIDs     = 4096
	maxEndedRequests = 1024
	maxHeldFrames    = 1024
	maxHeldBytes     = 1 << 20
)

// PreviewFilter decides which preview frames one SSE connection of a session stream writes
// (API.md §5.4):
//
//   - only frames of the primary thread, for the event types the connection asked for with
//     event_deltas[];
//   - at most one event_start per event id, and no event_delta before its event_start was
//     written; agent.thinking previews are start-only;
//   - nothing for an event id whose committed event was written (the committed event is the
//     last thing sent for an id), nor after the span.model_request_end of its model request;
//   - a preview that lost a frame on the way stops, so the client never appends text past a
//     hole;
//   - a frame that overtook the span.model_request_start of its model request is held and
//     written right after that event, keeping the normal order;
//   - a committed agent.message or agent.thinking the connection asked previews of waits for
//     its preview (Await), because the log can overtake the hub: the publisher sends every
//     frame and then an event end before it commits the event, but the two reach an API
//     process on separate paths. So a connection writes event_start, the deltas, then the
//     committed event.
//
// The handler calls Admit for each frame from the hub, Await before it writes a committed
// event, and Committed for each committed event it writes. A PreviewFilter is not safe for
// concurrent use; the connection's handler owns it.
type PreviewFilter struct {
	wanted map[string]bool
	cursor int64 // log position of the last committed event the connection has written
	live   int64 // log position where the connection started following the log live
	// watched is the span.model_request_start id of the request whose start the connection
	// wrote live (committed after it subscribed, so every frame of the request reaches it);
	// empty outside such a request. Only its events wait for their previews.
	watched string

	open      map[string]*openPreview // started on this connection, not yet over
	openCount uint64
	closed    idSet // event ids that get nothing more
	ended     idSet // span.model_request_start ids whose request has ended
	held      []Frame
	heldBytes int
}

type openPreview struct {
	eventType string
	nextSeq   int
	order     uint64 // when it was opened, to forget the oldest first
}

// NewPreviewFilter returns the filter of a connection that asked for previews of the wanted
// event types (the validated event_deltas[] values) and starts after log position after:
// the stream's cursor when it opens. live is the log's end when the connection subscribed to
// the hub (after itself, or later for a connection that replays the log first): events up to
// it are past, and their previews are gone.
func NewPreviewFilter(wanted []string, after, live int64) *PreviewFilter {
	pf := &PreviewFilter{
		wanted: map[string]bool{},
		cursor: after,
		live:   live,
		open:   map[string]*openPreview{},
		closed: idSet{max: maxClosedIDs},
		ended:  idSet{max: maxEndedRequests},
	}
	for _, t := range wanted {
		if previewTypes[t] {
			pf.wanted[t] = true
		}
	}
	return pf
}

// Enabled reports whether the connection asked for any previews; a handler whose filter is
// not enabled need not subscribe to the hub.
func (pf *PreviewFilter) Enabled() bool { return len(pf.wanted) > 0 }

// Admit reports whether to write f now. A frame that is early for the connection is held
// and comes back from a later Committed.
func (pf *PreviewFilter) Admit(f Frame) bool {
	if !pf.relevant(f) {
		return false
	}
	if f.RequestStartSeq > pf.cursor {
		// Beyond the bounds the frame is lost like any other; its preview stops at the hole.
		if len(pf.held) < maxHeldFrames && pf.heldBytes+len(f.Text) <= maxHeldBytes {
			pf.held = append(pf.held, f)
			pf.heldBytes += len(f.Text)
		}
		return false
	}
	return pf.admitNow(f)
}

// Await reports whether the committed event ev, the next one to write, must wait for preview
// frames still on their way: it is an event type the connection asked previews of, of a model
// request the connection watched from its start, and its preview is not over (no event end,
// no lost frame). The handler keeps admitting frames meanwhile and asks again; it bounds the
// wait, for a preview that was never published or lost its end.
func (pf *PreviewFilter) Await(ev wire.Event) bool {
	return pf.wanted[ev.Type] && pf.watched != "" && !pf.closed.has(ev.ID)
}

// Committed records that the committed event ev was written to the connection and returns
// the held frames that are now due, to be written right after ev, in order.
func (pf *PreviewFilter) Committed(ev wire.Event) []Frame {
	pf.cursor = max(pf.cursor, ev.Seq)
	switch ev.Type {
	case wire.EventAgentMessage, wire.EventAgentThinking:
		pf.close(ev.ID)
	case wire.EventSpanModelRequestStart:
		pf.watched = ""
		if ev.Seq > pf.live {
			pf.watched = ev.ID
		}
	case wire.EventSpanModelRequestEnd:
		pf.watched = ""
		pf.endRequest(ev)
	}
	return pf.release()
}

func (pf *PreviewFilter) relevant(f Frame) bool {
	return pf.Enabled() && f.ThreadID == "" && !pf.closed.has(f.EventID) &&
		(f.RequestStartID == "" || !pf.ended.has(f.RequestStartID))
}

func (pf *PreviewFilter) admitNow(f Frame) bool {
	switch f.Type {
	case FrameEventStart:
		return pf.start(f)
	case FrameEventDelta:
		return pf.delta(f)
	case FrameEventEnd:
		// The preview is complete (or, after a hole, over): nothing more comes for the id, and
		// its committed event need not wait. The end itself is never written.
		pf.close(f.EventID)
		return false
	default:
		return false
	}
}

func (pf *PreviewFilter) start(f Frame) bool {
	if !pf.wanted[f.EventType] || pf.open[f.EventID] != nil {
		return false
	}
	if len(pf.open) >= maxOpenPreviews {
		pf.closeOldest()
	}
	pf.openCount++
	pf.open[f.EventID] = &openPreview{eventType: f.EventType, nextSeq: f.Seq + 1, order: pf.openCount}
	return true
}

func (pf *PreviewFilter) delta(f Frame) bool {
	p := pf.open[f.EventID]
	if p == nil || p.eventType != wire.EventAgentMessage {
		return false
	}
	if f.Seq != p.nextSeq {
		pf.close(f.EventID) // a lost frame: text after the hole would be wrong
		return false
	}
	p.nextSeq++
	return true
}

// endRequest closes every open preview, as clients do at span.model_request_end (the Go
// SDK's accumulator drops unreconciled previews there), and drops late frames of the ended
// request.
func (pf *PreviewFilter) endRequest(ev wire.Event) {
	// An unreadable body only loses the dropping of late frames; the previews still close,
	// and the committed event itself is written regardless.
	if end, err := wire.DecodeBody[wire.SpanModelRequestEndBody](ev); err == nil && end.ModelRequestStartID != "" {
		pf.ended.add(end.ModelRequestStartID)
	}
	for id := range pf.open {
		pf.close(id)
	}
}

// release admits the held frames the connection has now reached, keeping the rest in order.
func (pf *PreviewFilter) release() []Frame {
	var due []Frame
	kept := pf.held[:0]
	for _, f := range pf.held {
		if f.RequestStartSeq > pf.cursor {
			kept = append(kept, f)
			continue
		}
		pf.heldBytes -= len(f.Text)
		if pf.relevant(f) && pf.admitNow(f) {
			due = append(due, f)
		}
	}
	clear(pf.held[len(kept):]) // let the dropped frames' text be collected
	pf.held = kept
	return due
}

func (pf *PreviewFilter) close(eventID string) {
	delete(pf.open, eventID)
	pf.closed.add(eventID)
}

func (pf *PreviewFilter) closeOldest() {
	oldest, order := "", uint64(0)
	for id, p := range pf.open {
		if oldest == "" || p.order < order {
			oldest, order = id, p.order
		}
	}
	pf.close(oldest)
}

// idSet is a set of ids that forgets the oldest beyond max.
type idSet struct {
	max  int
	ids  map[string]struct{}
	ring []string // insertion order; grows to max, then wraps at next
	next int
}

func (s *idSet) has(id string) bool {
	_, ok := s.ids[id]
	return ok
}

func (s *idSet) add(id string) {
	if s.has(id) {
		return
	}
	if s.ids == nil {
		s.ids = map[string]struct{}{}
	}
	s.ids[id] = struct{}{}
	if len(s.ring) < s.max {
		s.ring = append(s.ring, id)
		return
	}
	delete(s.ids, s.ring[s.next])
	s.ring[s.next] = id
	s.next = (s.next + 1) % s.max
}
