package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// Frame types of API.md §5.4. They are also the frames' SSE event names.
const (
	FrameEventStart = "event_start"
	FrameEventDelta = "event_delta"
	// FrameEventEnd is not a wire frame: the publisher sends it after a preview's last frame,
	// before it commits the event, so a connection knows it has every frame and may write the
	// committed event (PreviewFilter.Await). It is never written to a client.
	FrameEventEnd = "event_end"
)

// Source says where a preview belongs. None of it is part of the wire form.
type Source struct {
	// SessionID routes the frame to the session's subscribers.
	SessionID string `json:"s"`
	// ThreadID is the session thread the previewed event belongs to; empty for the primary
	// thread, the only one the session stream previews.
	ThreadID string `json:"h,omitempty"`
	// RequestStartID and RequestStartSeq are the id and log position of the
	// span.model_request_start event of the model request that produces the event. The seq
	// lets a connection hold frames that overtake that event on their way (the log and the
	// hub are separate paths), so the client sees them in the normal order. Both are
	// optional: without them frames are written as they come.
	RequestStartID  string `json:"r,omitempty"`
	RequestStartSeq int64  `json:"q,omitempty"`
}

// Frame is one preview frame with what is needed to route and order it. MarshalJSON gives
// the client wire form; the json tags are the compact encoding between processes.
type Frame struct {
	Source

	// Type is FrameEventStart or FrameEventDelta.
	Type string `json:"t"`
	// EventID is the id the committed event will carry.
	EventID string `json:"i"`
	// EventType is the previewed event's type on an event_start: agent.message or
	// agent.thinking.
	EventType string `json:"e,omitempty"`
	// Index and Text are an event_delta's content block index and the text to append to it.
	Index int    `json:"x,omitempty"`
	Text  string `json:"d,omitempty"`
	// Seq numbers the frames of one event's preview: 0 for its event_start, then 1, 2, … for
	// its deltas and its event end, so a connection notices a lost frame. Preview assigns it.
	Seq int `json:"n,omitempty"`
}

// ErrInvalidFrame is returned by Publish for a frame no connection could use.
var ErrInvalidFrame = errors.New("stream: invalid preview frame")

// previewTypes are the event types that have previews (API.md §5.4).
var previewTypes = map[string]bool{wire.EventAgentMessage: true, wire.EventAgentThinking: true}

type wireEventRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type wireStart struct {
	Type  string       `json:"type"`
	Event wireEventRef `json:"event"`
}

type wireText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireContentDelta struct {
	Type    string   `json:"type"`
	Index   int      `json:"index"`
	Content wireText `json:"content"`
}

type wireDelta struct {
	Type    string           `json:"type"`
	EventID string           `json:"event_id"`
	Delta   wireContentDelta `json:"delta"`
}

// MarshalJSON writes the frame as a client sees it (API.md §5.4): no id or processed_at of
// its own and none of the routing fields. An SSE writer sends it with Type as the event name
// and no `id:` line, since the previewed event is not in the log yet and cannot be resumed
// from.
func (f Frame) MarshalJSON() ([]byte, error) {
	switch f.Type {
	case FrameEventStart:
		return json.Marshal(wireStart{Type: f.Type, Event: wireEventRef{Type: f.EventType, ID: f.EventID}})
	case FrameEventDelta:
		return json.Marshal(wireDelta{Type: f.Type, EventID: f.EventID, Delta: wireContentDelta{
			Type: "content_delta", Index: f.Index, Content: wireText{Type: "text", Text: f.Text},
		}})
	default:
		return nil, fmt.Errorf("stream: marshal frame: unknown type %q", f.Type)
	}
}

// validate rejects frames no connection could use; they are programming errors.
func (f Frame) validate() error {
	var problems []string
	if f.SessionID == "" {
		problems = append(problems, "SessionID is empty")
	}
	if f.EventID == "" {
		problems = append(problems, "EventID is empty")
	}
	switch f.Type {
	case FrameEventStart:
		if !previewTypes[f.EventType] {
			problems = append(problems, fmt.Sprintf("EventType %q is not agent.message or agent.thinking", f.EventType))
		}
		if f.Seq != 0 {
			problems = append(problems, fmt.Sprintf("Seq of an event_start is %d, want 0", f.Seq))
		}
	case FrameEventDelta:
		if f.Index < 0 {
			problems = append(problems, fmt.Sprintf("Index %d is negative", f.Index))
		}
		if f.Seq < 1 {
			problems = append(problems, fmt.Sprintf("Seq of an event_delta is %d, want 1 or more (Preview numbers them)", f.Seq))
		}
	case FrameEventEnd:
		if f.Seq < 1 {
			problems = append(problems, fmt.Sprintf("Seq of an event end is %d, want 1 or more (Preview numbers them)", f.Seq))
		}
	default:
		problems = append(problems, fmt.Sprintf("Type %q is not event_start, event_delta or event_end", f.Type))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidFrame, strings.Join(problems, "; "))
	}
	return nil
}
