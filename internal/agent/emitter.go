package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// NewEvent is an event the runtime asks its caller to append. The runtime always pre-assigns
// ID (a sevt_ id) because some ids are announced before the commit (previews) and tool_use ids
// are referenced by the model conversation; the caller must keep it.
type NewEvent struct {
	ID   string
	Type string
	// Body holds the type-specific fields as a JSON object (no id, type or processed_at).
	Body json.RawMessage
	// Private is what only the worker reads back (wire.Event.Private), or nil.
	Private json.RawMessage
}

// Emitter appends events to the session's log. One call's events must be appended
// atomically and in order, with processed_at set; it returns them as committed.
type Emitter interface {
	Emit(ctx context.Context, evs []NewEvent) ([]wire.Event, error)
}

// PreviewSink receives stream-only previews (API.md §5.4). Nothing sent here is persisted; the
// committed event with the same id follows and is authoritative. Calls are best-effort and
// must not block the model stream for long.
type PreviewSink interface {
	// Start announces the id of an agent.message or agent.thinking event before its content.
	Start(eventID, eventType string)
	// Delta appends text to content block index of an announced agent.message.
	Delta(eventID string, index int, text string)
}

// MemoryLog is an in-memory event log: an Emitter for tests, benchmarks and in-process runs.
// It is safe for concurrent use.
type MemoryLog struct {
	mu     sync.Mutex
	events []wire.Event
	now    func() time.Time
}

// NewMemoryLog returns an empty log.
func NewMemoryLog() *MemoryLog {
	return &MemoryLog{now: time.Now}
}

// Emit appends evs as processed server events and returns them committed.
func (l *MemoryLog) Emit(_ context.Context, evs []NewEvent) ([]wire.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]wire.Event, len(evs))
	for i, ev := range evs {
		out[i] = l.appendLocked(ev.ID, ev.Type, ev.Body, true)
		if len(ev.Private) > 0 {
			out[i].Private = ev.Private
			l.events[len(l.events)-1].Private = ev.Private
		}
	}
	return out, nil
}

// Append adds a client event; processed false leaves it queued (processed_at null).
func (l *MemoryLog) Append(typ string, body json.RawMessage, processed bool) wire.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked("", typ, body, processed)
}

// Events returns a copy of the log.
func (l *MemoryLog) Events() []wire.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *MemoryLog) appendLocked(id, typ string, body json.RawMessage, processed bool) wire.Event {
	if id == "" {
		id = ids.New(ids.Event)
	}
	if len(body) == 0 {
		body = json.RawMessage("{}")
	}
	now := l.now()
	ev := wire.Event{ID: id, Type: typ, Body: body, Seq: int64(len(l.events)) + 1, CreatedAt: now}
	if processed {
		ev.ProcessedAt = &now
	}
	l.events = append(l.events, ev)
	return ev
}

// recorder is an Emitter that also appends what was committed to a history, so a loop can
// plan its next step without reading the log back.
type recorder struct {
	next    Emitter
	history []wire.Event
}

func (r *recorder) Emit(ctx context.Context, evs []NewEvent) ([]wire.Event, error) {
	out, err := r.next.Emit(ctx, evs)
	r.history = append(r.history, out...)
	return out, err
}
