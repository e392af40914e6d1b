package agent

import (
	"encoding/json"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// A model response becomes events block by block: each thinking block an agent.thinking,
// each run of consecutive text blocks one agent.message (so text before and after a tool call
// keeps its place), each tool_use block an agent.tool_use or agent.custom_tool_use.
//
// Event ids are allocated by ordinal (the nth message, the nth thinking block) when first
// needed, so the ids announced to previews while streaming are the ids the committed events
// carry.

// responseIDs allocates the ids of one response's events.
type responseIDs struct {
	messages []string
	thinking []string
}

func nth(list *[]string, n int) string {
	for len(*list) <= n {
		*list = append(*list, ids.New(ids.Event))
	}
	return (*list)[n]
}

// segmenter assigns blocks to events in stream order with the rule above.
type segmenter struct {
	ids       *responseIDs
	prevText  bool
	messageN  int // ordinal of the current message run, -1 before the first
	thinkingN int
	index     int // content index of the current text block within its message
}

func newSegmenter(rids *responseIDs) *segmenter {
	return &segmenter{ids: rids, messageN: -1, thinkingN: -1}
}

// next places a block of type typ; for text it returns the message id and content index, for
// thinking the thinking id.
func (s *segmenter) next(typ string) (eventID string, index int) {
	text := typ == model.BlockText
	defer func() { s.prevText = text }()
	switch typ {
	case model.BlockText:
		if s.prevText {
			s.index++
		} else {
			s.messageN, s.index = s.messageN+1, 0
		}
		return nth(&s.ids.messages, s.messageN), s.index
	case model.BlockThinking, model.BlockRedactedThinking:
		s.thinkingN++
		return nth(&s.ids.thinking, s.thinkingN), 0
	}
	return "", 0
}

// previewer forwards stream deltas to a PreviewSink (API.md §5.4): a start for each message
// and thinking event, text deltas for messages. Thinking stays start-only.
type previewer struct {
	sink    PreviewSink
	seg     *segmenter
	blocks  map[int]previewBlock
	started map[string]bool
}

type previewBlock struct {
	typ     string
	eventID string
	index   int
}

func newPreviewer(sink PreviewSink, rids *responseIDs) *previewer {
	return &previewer{sink: sink, seg: newSegmenter(rids), blocks: map[int]previewBlock{}, started: map[string]bool{}}
}

func (p *previewer) onDelta(d model.Delta) {
	switch d.Kind {
	case model.DeltaBlockStart:
		typ := d.Type
		if typ == model.BlockRedactedThinking {
			typ = model.BlockThinking
		}
		p.begin(d.Index, typ)
	case model.DeltaText:
		b := p.begin(d.Index, model.BlockText)
		if b.typ == model.BlockText && d.Text != "" && p.sink != nil {
			p.sink.Delta(b.eventID, b.index, d.Text)
		}
	case model.DeltaThinking:
		p.begin(d.Index, model.BlockThinking)
	}
}

// begin registers block i on its first sighting; a client that sends no block start gets one
// implied by its first delta.
func (p *previewer) begin(i int, typ string) previewBlock {
	if b, ok := p.blocks[i]; ok {
		return b
	}
	id, index := p.seg.next(typ)
	b := previewBlock{typ: typ, eventID: id, index: index}
	p.blocks[i] = b
	if p.sink == nil || id == "" || p.started[id] {
		return b
	}
	p.started[id] = true
	switch typ {
	case model.BlockText:
		p.sink.Start(id, wire.EventAgentMessage)
	case model.BlockThinking:
		p.sink.Start(id, wire.EventAgentThinking)
	}
	return b
}

// responseEvents turns a complete response into its events, in block order.
//
// A tool call cut at max_tokens (maxTokens, the request's) is logged with an error result
// right after it, in the same commit, so it never runs and the model learns why.
func responseEvents(resp model.Response, rids *responseIDs, ts toolset, maxTokens int) ([]NewEvent, error) {
	seg := newSegmenter(rids)
	var out []NewEvent
	var run []wire.TextBlock // the text run being collected
	runID := ""
	flush := func() error {
		defer func() { run = nil }()
		if !hasText(run) {
			return nil // an all-empty run is no message; its preview closes with the span end
		}
		ev, err := newEvent(runID, wire.EventAgentMessage, wire.AgentMessageBody{Content: run})
		out = append(out, ev)
		return err
	}
	for _, b := range resp.Content {
		id, _ := seg.next(b.Type)
		if b.Type == model.BlockText {
			if run == nil {
				runID = id
			}
			run = append(run, wire.TextBlock{Type: wire.ContentTypeText, Text: b.Text})
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		switch b.Type {
		case model.BlockThinking, model.BlockRedactedThinking:
			ev, err := thinkingEvent(id, b)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		case model.BlockToolUse:
			ev, err := ts.callEvent(ids.New(ids.Event), b)
			if err != nil {
				return nil, err
			}
			if b.ID != "" {
				// The model's own id goes back with the call (log.go, call.sentID).
				if ev.Private, err = json.Marshal(callPrivate{ModelID: b.ID}); err != nil {
					return nil, err
				}
			}
			out = append(out, ev)
			if b.Truncated {
				res, err := cutResult(ids.New(ids.Event), ev, b.Name, resp.StopReason, maxTokens)
				if err != nil {
					return nil, err
				}
				out = append(out, res)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func hasText(blocks []wire.TextBlock) bool {
	for _, b := range blocks {
		if b.Text != "" {
			return true
		}
	}
	return false
}
