package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// Project builds the model conversation from the log. It is pure.
//
//   - user.message → user text (image and document blocks, which model.Block cannot carry,
//     become a short text note; text documents pass their text).
//   - agent.message and agent.*tool_use events of one model response → one assistant message,
//     in log order; a tool_use block's id is the event id of its agent.tool_use /
//     agent.custom_tool_use, so no mapping is stored. agent.thinking carries no text (API.md
//     §17) and adds nothing.
//   - The user message after an assistant message with tool calls starts with one tool_result
//     per call, in call order, taken from agent.tool_result / user.custom_tool_result (wherever
//     it is in the log), then any user text delivered meanwhile. A call without a result gets a
//     synthetic error result: the deny text for a call denied by confirmation, "not enabled" for
//     a call evaluated deny, and "not executed" for a call abandoned by an interrupted turn, so
//     every tool_use is answered and the conversation stays valid.
//   - session.*, span.* and every other event add nothing; queued events (processed_at null)
//     are skipped.
func Project(history []wire.Event) ([]model.Message, error) {
	log, err := DecodeLog(history)
	if err != nil {
		return nil, err
	}
	return ProjectDecoded(log), nil
}

// Decoded is one event of a log with what projection reads of its body, decoded once. Bodies
// never change, so a worker that keeps its sessions' decoded events between model requests
// (the turns package's conversation cache) decodes only the events that are new: decoding
// every body of a long conversation for every request was most of a request's CPU.
type Decoded struct {
	Event wire.Event
	// blocks is the content of a user.message or agent.message.
	blocks []model.Block
	// call is set for a tool use, result for a tool result, confirmation for a
	// user.tool_confirmation.
	call         *call
	result       *wire.ResultBody
	confirmation *wire.ToolConfirmationBody
	// refused marks the span end of a response the model refused.
	refused bool
}

// Decode reads what projection needs of ev's body. A queued event is not read: it counts
// only once delivered, and then it is a new event of the log (store.Writes.Deliver moves it).
func Decode(ev wire.Event) (Decoded, error) {
	d := Decoded{Event: ev}
	if !delivered(ev) {
		return d, nil
	}
	switch {
	case ev.Type == wire.EventUserMessage, ev.Type == wire.EventAgentMessage, ev.Type == wire.EventSystemMessage:
		b, err := wire.DecodeBody[wire.MessageBody](ev)
		if err != nil {
			return d, err
		}
		d.blocks = convertBlocks(b.Content)
	case ev.Type == wire.EventAgentThinking:
		blocks, err := thinkingBlocks(ev)
		if err != nil {
			return d, err
		}
		d.blocks = blocks
	case ev.Type == wire.EventAgentThreadContextCompacted:
		blocks, err := compactedBlocks(ev)
		if err != nil {
			return d, err
		}
		d.blocks = blocks
	case ev.Type == wire.EventSpanModelRequestEnd:
		d.refused, _ = refusal(ev)
	case isToolUse(ev.Type):
		c, err := readCall(ev)
		if err != nil {
			return d, err
		}
		d.call = &c
	case ev.Type == wire.EventUserToolConfirmation:
		c, err := wire.DecodeBody[wire.ToolConfirmationBody](ev)
		if err != nil {
			return d, err
		}
		d.confirmation = &c
	case isToolAnswer(ev.Type):
		r, err := wire.DecodeBody[wire.ResultBody](ev)
		if err != nil {
			return d, err
		}
		d.result = &r
	}
	return d, nil
}

// DecodeLog decodes every event of history (Decode).
func DecodeLog(history []wire.Event) ([]Decoded, error) {
	out := make([]Decoded, len(history))
	for i, ev := range history {
		var err error
		if out[i], err = Decode(ev); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ProjectDecoded is Project of a decoded log.
func ProjectDecoded(log []Decoded) []model.Message {
	p, _ := (*Projection)(nil).Extend(log) // a first Extend always succeeds
	return p.Messages()
}

// Projection is the projection of the events read so far, kept so that a model request of a
// long conversation projects only the events appended since the last one: projecting the
// whole conversation for every request made most of a request's garbage. It never changes;
// Extend returns a new one. The nil *Projection is that of an empty log.
//
// Projecting in parts gives what projecting the whole log at once gives (TestProject checks
// every split of its logs): an answer (a result or a confirmation) counts wherever it is in
// the log, so each part's answers are indexed before its events are read, and a call placed
// in an earlier part is answered from what that part knew. The one case a part cannot mend
// is the first answer to a call that an earlier part already answered with a synthetic
// result (no result was in the log then); Extend then says so, and the caller projects the
// whole log again.
type Projection struct {
	p projector
}

// Extend returns the projection of the events read so far followed by log. ok is false when
// log answers a call that is already placed with a synthetic result: project the whole log
// again (a nil receiver's Extend never refuses).
func (pr *Projection) Extend(log []Decoded) (next *Projection, ok bool) {
	var p projector
	if pr != nil {
		p = pr.p.clone(0)
	}
	for _, d := range log {
		target, answers := d.answerTarget()
		if !answers || !delivered(d.Event) {
			continue
		}
		if _, placed := p.synthetic[target]; placed {
			return nil, false
		}
		p.index(d, target)
	}
	for _, d := range log {
		if delivered(d.Event) {
			p.add(d)
		}
	}
	return &Projection{p: p}, true
}

// Messages is the conversation: what the model is sent. The slice is the caller's; the
// messages' contents are shared and must not be changed.
func (pr *Projection) Messages() []model.Message {
	if pr == nil {
		return nil
	}
	p := pr.p.clone(2)
	p.seal()
	p.flushUser()
	if len(p.msgs) == 0 {
		return nil
	}
	return p.msgs
}

// projector builds messages in order. An assistant message is built from the events of one
// model response and sealed when anything else happens; its calls' results are placed when
// the next user message is flushed.
type projector struct {
	// answers holds the answers of the calls not placed yet (and any stray answer).
	answers answers
	// synthetic are the calls placed with a synthetic result: only there can a later answer
	// change what is already projected.
	synthetic map[string]struct{}
	msgs      []model.Message
	// ownFrom is the first message whose content is p's own: those before it are shared
	// with the projection p was cloned from, and are copied before they change.
	ownFrom int
	// building is the assistant message of the response being read, nil between responses.
	building *model.Message
	// buildingCalls are the tool calls of building.
	buildingCalls []call
	// unanswered are the calls of the last sealed assistant message, answered at the next flush.
	unanswered []call
	// userBlocks is user content delivered since the last assistant message.
	userBlocks []model.Block
	// sentIDs are the model tool_use ids already in the conversation.
	sentIDs map[string]struct{}
	// respStart is the number of messages before the response being read (set when its
	// first block arrives): a refused response is cut back to it.
	respStart int
}

// clone is a copy of p that shares nothing p may change: appending to a clipped slice or a
// cloned map never writes where p looks. The messages are copied with room for extra more.
func (p *projector) clone(extra int) projector {
	c := projector{
		answers: answers{
			results:       maps.Clone(p.answers.results),
			confirmations: maps.Clone(p.answers.confirmations),
		},
		synthetic:     maps.Clone(p.synthetic),
		sentIDs:       maps.Clone(p.sentIDs),
		msgs:          append(make([]model.Message, 0, len(p.msgs)+extra), p.msgs...),
		ownFrom:       len(p.msgs),
		buildingCalls: slices.Clip(p.buildingCalls),
		respStart:     p.respStart,
		unanswered:    slices.Clip(p.unanswered),
		userBlocks:    slices.Clip(p.userBlocks),
	}
	if p.building != nil {
		b := model.Message{Role: p.building.Role, Content: slices.Clip(p.building.Content)}
		c.building = &b
	}
	return c
}

// answerTarget is the call d answers (a result or a confirmation); ok is false for any other
// event.
func (d Decoded) answerTarget() (call string, ok bool) {
	switch {
	case d.result != nil:
		return d.result.Target(), true
	case d.confirmation != nil:
		return d.confirmation.ToolUseID, true
	}
	return "", false
}

// index records d, an answer to target; the first answer to a call wins.
func (p *projector) index(d Decoded, target string) {
	if d.result != nil {
		if p.answers.results == nil {
			p.answers.results = map[string]wire.ResultBody{}
		}
		if _, seen := p.answers.results[target]; !seen {
			p.answers.results[target] = *d.result
		}
		return
	}
	if p.answers.confirmations == nil {
		p.answers.confirmations = map[string]wire.ToolConfirmationBody{}
	}
	if _, seen := p.answers.confirmations[target]; !seen {
		p.answers.confirmations[target] = *d.confirmation
	}
}

func (p *projector) add(d Decoded) {
	ev := d.Event
	switch {
	case ev.Type == wire.EventUserMessage:
		p.seal()
		p.userBlocks = append(p.userBlocks, d.blocks...)
	case ev.Type == wire.EventSystemMessage:
		// A role "system" message right after the user turn it came with
		// (platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages): the
		// sessions service lets it through only on models that take it, after a user.message
		// or a tool result.
		p.seal()
		p.flushUser()
		switch {
		case len(d.blocks) == 0:
		case len(p.msgs) > 0 && p.msgs[len(p.msgs)-1].Role == "user":
			p.msgs = append(p.msgs, model.Message{Role: "system", Content: d.blocks})
		default:
			// Not after a user turn (the sessions service refuses that; a log may still hold
			// one): the API would refuse a system message here, so it goes with the next user
			// content instead.
			p.userBlocks = append(p.userBlocks, d.blocks...)
		}
	case ev.Type == wire.EventAgentThreadContextCompacted:
		// The summary replaces everything before it (compact.go): the conversation starts
		// again from one user message that carries it. The calls before it were all answered
		// (compaction runs only when a model request is due), so nothing pending is lost.
		p.restart(d.blocks)
	case ev.Type == wire.EventAgentMessage, ev.Type == wire.EventAgentThinking:
		// A thinking block goes back exactly where the model produced it, signature and all:
		// with thinking on, the API refuses a tool loop whose assistant message lost its
		// thinking (platform.claude.com/docs/en/build-with-claude/extended-thinking,
		// "Preserving thinking blocks").
		p.addAssistant(d.blocks...)
	case d.call != nil:
		c := *d.call
		if c.modelID != "" {
			// The model's own ids are sent back only while they are unique in the conversation
			// (the API refuses a repeated tool_use id); a repeat goes under its event id.
			if _, dup := p.sentIDs[c.modelID]; dup {
				c.modelID = ""
			} else {
				if p.sentIDs == nil {
					p.sentIDs = map[string]struct{}{}
				}
				p.sentIDs[c.modelID] = struct{}{}
			}
		}
		p.addAssistant(model.Block{Type: model.BlockToolUse, ID: c.sentID(), Name: c.modelName(), Input: c.input})
		p.buildingCalls = append(p.buildingCalls, c)
	case ev.Type == wire.EventSpanModelRequestEnd && d.refused:
		p.dropRefused()
	case ev.Type == wire.EventSpanModelRequestStart, ev.Type == wire.EventSpanModelRequestEnd,
		ev.Type == wire.EventUserInterrupt, isToolAnswer(ev.Type):
		// A response ends at its span end; answers and interrupts come after it.
		p.seal()
	}
}

// refusedNote replaces the content of the user turn that a refusal answered.
const refusedNote = "[An earlier request in this conversation was declined and has been removed.]"

// dropRefused takes a refused response out of the conversation, and the user content that
// led to it: the refusal docs say a conversation must be reset before it goes on, or the
// model keeps refusing (platform.claude.com/docs/en/build-with-claude/handling-stop-reasons,
// "refusal"). Tool results in that user turn stay, so every earlier call is still answered.
func (p *projector) dropRefused() {
	p.building, p.buildingCalls, p.unanswered = nil, nil, nil
	if p.respStart < len(p.msgs) && p.msgs[p.respStart].Role == "assistant" {
		p.msgs = p.msgs[:p.respStart]
		p.ownFrom = min(p.ownFrom, p.respStart)
	}
	last := len(p.msgs) - 1
	if last < 0 || p.msgs[last].Role != "user" {
		return
	}
	kept := make([]model.Block, 0, len(p.msgs[last].Content)+1)
	for _, b := range p.msgs[last].Content {
		if b.Type == model.BlockToolResult {
			kept = append(kept, b)
		}
	}
	p.msgs[last] = model.Message{Role: "user", Content: append(kept, model.Block{Type: model.BlockText, Text: refusedNote})}
}

// restart drops everything projected so far and starts the conversation with a user message
// of blocks.
func (p *projector) restart(blocks []model.Block) {
	p.msgs = p.msgs[:0:0]
	p.ownFrom = 0
	p.building, p.buildingCalls, p.unanswered, p.sentIDs = nil, nil, nil, nil
	p.userBlocks = append([]model.Block(nil), blocks...)
}

func (p *projector) addAssistant(blocks ...model.Block) {
	if p.building == nil {
		p.flushUser()
		p.building = &model.Message{Role: "assistant"}
		if len(p.msgs) == 0 || p.msgs[len(p.msgs)-1].Role != "assistant" {
			p.respStart = len(p.msgs)
		}
	}
	p.building.Content = append(p.building.Content, blocks...)
}

// seal ends the assistant message being built.
func (p *projector) seal() {
	if p.building == nil {
		return
	}
	msg := *p.building
	p.building = nil
	if len(msg.Content) == 0 {
		return
	}
	// Two responses with nothing between them cannot come from a valid turn, but models
	// reject consecutive assistant messages, so merge rather than fail.
	if n := len(p.msgs); n > 0 && p.msgs[n-1].Role == msg.Role && len(p.unanswered) == 0 {
		p.appendToLast(msg.Content)
	} else {
		p.msgs = append(p.msgs, msg)
	}
	p.unanswered = append(p.unanswered, p.buildingCalls...)
	p.buildingCalls = nil
}

// flushUser appends the user message that follows the last assistant message: the results of
// its calls first (the model requires them right after the calls), then user content.
func (p *projector) flushUser() {
	blocks := make([]model.Block, 0, len(p.unanswered)+len(p.userBlocks))
	for _, c := range p.unanswered {
		blocks = append(blocks, p.place(c))
	}
	blocks = append(blocks, p.userBlocks...)
	p.unanswered, p.userBlocks = nil, nil
	if len(blocks) == 0 {
		return
	}
	if n := len(p.msgs); n > 0 && p.msgs[n-1].Role == "user" {
		p.appendToLast(blocks)
		return
	}
	p.msgs = append(p.msgs, model.Message{Role: "user", Content: blocks})
}

// appendToLast appends blocks to the last message's content, in place when the content is
// p's own, to a copy when it is shared (ownFrom).
func (p *projector) appendToLast(blocks []model.Block) {
	last := len(p.msgs) - 1
	if last < p.ownFrom {
		p.msgs[last].Content = slices.Clip(p.msgs[last].Content)
		p.ownFrom = last
	}
	p.msgs[last].Content = append(p.msgs[last].Content, blocks...)
}

// place is c's tool_result block, placed for good: its answers are no longer needed, and a
// synthetic result is remembered (Extend).
func (p *projector) place(c call) model.Block {
	b, synthetic := p.result(c)
	delete(p.answers.results, c.id())
	delete(p.answers.confirmations, c.id())
	if synthetic {
		if p.synthetic == nil {
			p.synthetic = map[string]struct{}{}
		}
		p.synthetic[c.id()] = struct{}{}
	}
	return b
}

// result is the tool_result block answering c: its recorded result, or a synthetic error.
func (p *projector) result(c call) (b model.Block, synthetic bool) {
	if r, ok := p.answers.results[c.id()]; ok {
		return model.Block{Type: model.BlockToolResult, ToolUseID: c.sentID(), Content: convertBlocks(r.Content), IsError: r.IsError}, false
	}
	text := abandonedText
	switch state, reject := classify(c, p.answers); state {
	case callRejected:
		text = reject
	case callAnswered, callRunnable, callWaiting:
	}
	return model.Block{
		Type:      model.BlockToolResult,
		ToolUseID: c.sentID(),
		Content:   []model.Block{{Type: model.BlockText, Text: text}},
		IsError:   true,
	}, true
}

// convertBlocks turns event content into model blocks. Empty text blocks are dropped because
// models reject them; redacted blocks (content withheld by policy) carry nothing to send.
func convertBlocks(blocks []wire.ContentBlock) []model.Block {
	out := make([]model.Block, 0, len(blocks))
	for _, b := range blocks {
		if mb, ok := convertBlock(b); ok {
			out = append(out, mb)
		}
	}
	return out
}

// convertBlock is one content block as the model is sent it. Images and documents go as
// image and document blocks with their source unchanged: the event sources (base64, url, and
// text for documents) are the Messages API's own shapes (platform.claude.com/docs/en/
// build-with-claude/vision, pdf-support), and the API validated them on the way in. A file
// source has no Files API behind it here yet, and search results go as text.
func convertBlock(b wire.ContentBlock) (model.Block, bool) {
	switch b.Type {
	case wire.ContentTypeText:
		text := deref(b.Text)
		return model.Block{Type: model.BlockText, Text: text}, text != ""
	case wire.ContentTypeImage, wire.ContentTypeDocument:
		if !fileSource(b.Source) {
			typ := model.BlockImage
			if b.Type == wire.ContentTypeDocument {
				typ = model.BlockDocument
			}
			return model.Block{Type: typ, Source: b.Source, Title: deref(b.Title), Context: deref(b.Context)}, true
		}
	case wire.ContentTypeRedacted:
		return model.Block{}, false
	}
	text := blockText(b)
	return model.Block{Type: model.BlockText, Text: text}, text != ""
}

// fileSource reports whether an image or document source names a file by id.
func fileSource(raw json.RawMessage) bool {
	var s wire.BlockSource
	return json.Unmarshal(raw, &s) == nil && s.Type == "file"
}

// blockText renders a block that does not reach the model as itself as text.
func blockText(b wire.ContentBlock) string {
	switch b.Type {
	case wire.ContentTypeText:
		return deref(b.Text)
	case wire.ContentTypeSearchResult:
		parts := []string{deref(b.Title), b.SourceURL()} // validated on the way in; "" is harmless
		for _, c := range b.Content {
			parts = append(parts, deref(c.Text))
		}
		return strings.Join(parts, "\n")
	}
	return fmt.Sprintf("[%s %q omitted: files are not served yet]", b.Type, deref(b.Title))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// toolBlocksAsText rewrites tool_use and tool_result blocks as text, for a request that
// offers no tools: the model keeps what happened without blocks it would refuse. It replaces
// the messages of msgs that have such blocks and returns msgs: the slice must be the
// caller's, and the contents, which may be shared (Projection), are never changed.
func toolBlocksAsText(msgs []model.Message) []model.Message {
	for i, m := range msgs {
		if !slices.ContainsFunc(m.Content, isToolBlock) {
			continue
		}
		content := make([]model.Block, 0, len(m.Content))
		for _, b := range m.Content {
			switch b.Type {
			case model.BlockToolUse:
				b = model.Block{Type: model.BlockText, Text: fmt.Sprintf("[called the tool %s with %s]", b.Name, b.Input)}
			case model.BlockToolResult:
				texts := make([]string, 0, len(b.Content))
				for _, c := range b.Content {
					if c.Type == model.BlockText {
						texts = append(texts, c.Text)
					} else {
						texts = append(texts, "["+c.Type+"]")
					}
				}
				status := "result"
				if b.IsError {
					status = "error"
				}
				b = model.Block{Type: model.BlockText, Text: fmt.Sprintf("[tool %s: %s]", status, strings.Join(texts, "\n"))}
			}
			content = append(content, b)
		}
		msgs[i] = model.Message{Role: m.Role, Content: content}
	}
	return msgs
}

func isToolBlock(b model.Block) bool {
	return b.Type == model.BlockToolUse || b.Type == model.BlockToolResult
}
