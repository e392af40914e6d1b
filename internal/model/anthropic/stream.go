package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/managed-agents/managed-agents/internal/model"
)

// readStream reads a Messages event stream up to message_stop.
func readStream(body io.Reader, onDelta func(model.Delta)) (model.Response, error) {
	if onDelta == nil {
		onDelta = func(model.Delta) {}
	}
	acc := &accumulator{onDelta: onDelta, slots: map[int]*slot{}}
	events := newSSEReader(body)
	for {
		ev, err := events.next()
		if errors.Is(err, io.EOF) {
			return model.Response{}, &model.Error{Kind: model.ErrServer, Message: "stream ended before message_stop"}
		}
		if err != nil {
			return model.Response{}, fmt.Errorf("read event stream: %w", err)
		}
		done, err := acc.handle(ev)
		if err != nil {
			return model.Response{}, err
		}
		if done {
			return acc.response()
		}
	}
}

// streamEvent holds the fields of every event type the accumulator reads.
type streamEvent struct {
	Type         string       `json:"type"`
	Index        *int         `json:"index"`
	Message      messageBody  `json:"message"`
	ContentBlock contentBlock `json:"content_block"`
	Delta        struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		Thinking    string          `json:"thinking"`
		Signature   string          `json:"signature"`
		PartialJSON string          `json:"partial_json"`
		StopReason  string          `json:"stop_reason"`
		StopDetails json.RawMessage `json:"stop_details"`
		Data        string          `json:"data"`
	} `json:"delta"`
	Usage usageBody `json:"usage"`
}

// accumulator builds the response from the events of one stream.
type accumulator struct {
	onDelta func(model.Delta)
	content []model.Block
	// slots maps the stream's block index to what the response keeps of it.
	slots       map[int]*slot
	stop        string
	stopDetails json.RawMessage
	usage       model.Usage
}

// slot is one block of the stream. out is its index in the response, or -1 for a block type
// the response drops.
type slot struct {
	out     int
	json    []byte
	stopped bool
	// invalid: the tool_use input's JSON did not parse (a cut call, or a broken stream).
	invalid bool
}

// handle applies one event and reports whether the message is complete.
func (a *accumulator) handle(ev sseEvent) (bool, error) {
	var e streamEvent
	if err := json.Unmarshal(ev.data, &e); err != nil {
		return false, protocolError("%s event: %v", ev.name, err)
	}
	name := ev.name
	if name == "" {
		name = e.Type
	}
	switch name {
	case "message_start":
		e.Message.Usage.applyTo(&a.usage)
	case "content_block_start":
		return false, a.start(e)
	case "content_block_delta":
		return false, a.delta(e)
	case "content_block_stop":
		return false, a.stopBlock(e)
	case "message_delta":
		if e.Delta.StopReason != "" {
			a.stop = e.Delta.StopReason
		}
		if d := details(e.Delta.StopDetails); d != nil {
			a.stopDetails = d
		}
		e.Usage.applyTo(&a.usage)
	case "message_stop":
		return true, nil
	case "error":
		return false, streamError(ev.data)
	}
	// ping and event types added to the API later carry nothing the response needs.
	return false, nil
}

func (a *accumulator) start(e streamEvent) error {
	if e.Index == nil {
		return protocolError("content_block_start without index")
	}
	if _, dup := a.slots[*e.Index]; dup {
		return protocolError("content block %d started twice", *e.Index)
	}
	block, keep := e.ContentBlock.toModel()
	if !keep {
		a.slots[*e.Index] = &slot{out: -1}
		return nil
	}
	s := &slot{out: len(a.content)}
	a.slots[*e.Index] = s
	if block.Type == model.BlockToolUse {
		// The start carries an empty input; the input_json_delta chunks carry the real one.
		block.Input = nil
	}
	a.content = append(a.content, block)
	a.onDelta(model.Delta{Kind: model.DeltaBlockStart, Index: s.out, Type: block.Type})
	if block.Text != "" {
		a.onDelta(model.Delta{Kind: model.DeltaText, Index: s.out, Text: block.Text})
	}
	if block.Thinking != "" {
		a.onDelta(model.Delta{Kind: model.DeltaThinking, Index: s.out, Text: block.Thinking})
	}
	if block.Type == model.BlockToolUse && len(e.ContentBlock.Input) > 0 && string(e.ContentBlock.Input) != "{}" {
		s.json = append(s.json, e.ContentBlock.Input...)
	}
	return nil
}

func (a *accumulator) delta(e streamEvent) error {
	s, err := a.open(e, "content_block_delta")
	if err != nil || s.out < 0 {
		return err
	}
	b := &a.content[s.out]
	switch {
	case e.Delta.Type == "text_delta" && b.Type == model.BlockText:
		b.Text += e.Delta.Text
		a.onDelta(model.Delta{Kind: model.DeltaText, Index: s.out, Text: e.Delta.Text})
	case e.Delta.Type == "thinking_delta" && b.Type == model.BlockThinking:
		b.Thinking += e.Delta.Thinking
		a.onDelta(model.Delta{Kind: model.DeltaThinking, Index: s.out, Text: e.Delta.Thinking})
	case e.Delta.Type == "signature_delta" && b.Type == model.BlockThinking:
		b.Signature += e.Delta.Signature
	case e.Delta.Type == "input_json_delta" && b.Type == model.BlockToolUse:
		s.json = append(s.json, e.Delta.PartialJSON...)
	case e.Delta.Type == "text_delta", e.Delta.Type == "thinking_delta",
		e.Delta.Type == "signature_delta", e.Delta.Type == "input_json_delta":
		return protocolError("%s for %s block %d", e.Delta.Type, b.Type, *e.Index)
	}
	// Other delta types (citations_delta) annotate blocks with data model.Block cannot hold.
	return nil
}

func (a *accumulator) stopBlock(e streamEvent) error {
	s, err := a.open(e, "content_block_stop")
	if err != nil {
		return err
	}
	s.stopped = true
	if s.out < 0 {
		return nil
	}
	if err := a.finishInput(s); err != nil {
		return err
	}
	a.onDelta(model.Delta{Kind: model.DeltaBlockStop, Index: s.out})
	return nil
}

// open returns the started, not yet stopped slot an event addresses.
func (a *accumulator) open(e streamEvent, name string) (*slot, error) {
	if e.Index == nil {
		return nil, protocolError("%s without index", name)
	}
	s, ok := a.slots[*e.Index]
	if !ok {
		return nil, protocolError("%s for content block %d that never started", name, *e.Index)
	}
	if s.stopped {
		return nil, protocolError("%s for content block %d after its stop", name, *e.Index)
	}
	return s, nil
}

// finishInput sets a tool_use block's input from its accumulated JSON chunks.
func (a *accumulator) finishInput(s *slot) error {
	b := &a.content[s.out]
	if b.Type != model.BlockToolUse || b.Input != nil {
		return nil
	}
	if len(s.json) == 0 {
		b.Input = emptyObject
		return nil
	}
	if !json.Valid(s.json) {
		// A response cut at max_tokens inside a tool call ends with that call's input
		// incomplete (platform.claude.com/docs/en/build-with-claude/handling-stop-reasons):
		// only message_delta, after the block's stop, says so. Until then an invalid input is
		// held, not refused; response decides.
		s.invalid = true
		b.Input = emptyObject
		return nil
	}
	b.Input = json.RawMessage(s.json)
	return nil
}

// response returns the message once message_stop arrived; blocks whose stop event never came
// are completed too, since message_stop vouches for the whole message.
func (a *accumulator) response() (model.Response, error) {
	for _, s := range a.slots {
		if s.out >= 0 {
			if err := a.finishInput(s); err != nil {
				return model.Response{}, err
			}
		}
	}
	content := a.content
	if content == nil {
		content = []model.Block{}
	}
	for _, s := range a.slots {
		if !s.invalid {
			continue
		}
		if !cutsGeneration(a.stop) || s.out != len(content)-1 {
			b := content[s.out]
			return model.Response{}, protocolError("tool_use block %s: input is not valid JSON: %.200s", b.ID, s.json)
		}
	}
	resp := model.Response{Content: content, StopReason: a.stop, StopDetails: a.stopDetails, Usage: a.usage}
	markTruncated(&resp)
	return resp, nil
}

// cutsGeneration reports whether a stop reason can end a response in the middle of a block:
// the output limit, a full context window, or a refusal that stops the stream
// (platform.claude.com/docs/en/build-with-claude/handling-stop-reasons).
func cutsGeneration(stop string) bool {
	return stop == model.StopMaxTokens || stop == model.StopContextWindow || stop == model.StopRefusal
}

// markTruncated flags the tool call such a stop cut: the last block, when it is a
// tool_use. Its input may even parse (cut right after a closing brace) but the model was not
// done with the turn, so it is never run as if whole.
func markTruncated(resp *model.Response) {
	if !cutsGeneration(resp.StopReason) || len(resp.Content) == 0 {
		return
	}
	if last := &resp.Content[len(resp.Content)-1]; last.Type == model.BlockToolUse {
		last.Truncated = true
	}
}
