package agent

import (
	"encoding/json"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// What the worker keeps in an event's private part (wire.Event.Private): the log stays the
// one truth of the conversation, so whatever the model must be sent again lives in it, but
// clients are shown only what the hosted service shows (agent.thinking has no content at all,
// API.md §17).

// thinkingPrivate is an agent.thinking event's private part: the thinking or
// redacted_thinking block exactly as the model returned it, signature included.
type thinkingPrivate struct {
	Blocks []model.Block `json:"blocks"`
}

// thinkingEvent is the agent.thinking event of block b.
func thinkingEvent(id string, b model.Block) (NewEvent, error) {
	kept := model.Block{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature, Data: b.Data}
	private, err := json.Marshal(thinkingPrivate{Blocks: []model.Block{kept}})
	if err != nil {
		return NewEvent{}, fmt.Errorf("encode thinking block: %w", err)
	}
	return NewEvent{ID: id, Type: wire.EventAgentThinking, Body: emptyBody(), Private: private}, nil
}

// thinkingBlocks reads the blocks of an agent.thinking event. An event without a private part
// (the fake model's, or one logged before thinking was kept) has none: the API accepts a
// conversation that lost old thinking blocks except in a tool loop still running, and a
// block without its signature would be refused anyway.
func thinkingBlocks(ev wire.Event) ([]model.Block, error) {
	if len(ev.Private) == 0 {
		return nil, nil
	}
	var p thinkingPrivate
	if err := json.Unmarshal(ev.Private, &p); err != nil {
		return nil, fmt.Errorf("decode private part of %s %s: %w", ev.Type, ev.ID, err)
	}
	out := p.Blocks[:0:0]
	for _, b := range p.Blocks {
		// An unsigned thinking block cannot go back: the API verifies every signature.
		if (b.Type == model.BlockThinking && b.Signature != "") || (b.Type == model.BlockRedactedThinking && b.Data != "") {
			out = append(out, b)
		}
	}
	return out, nil
}

// responsePrivate is a successful span.model_request_end's private part: how the response
// ended, which decides how the turn goes on (a refusal ends it with stop_reason refusal).
type responsePrivate struct {
	StopReason  string          `json:"stop_reason,omitempty"`
	StopDetails json.RawMessage `json:"stop_details,omitempty"`
}

// refusal reads a successful span.model_request_end's private part: whether the model refused
// (stop_reason refusal), and the stop_details the idle event carries. Details the API did not
// send are {type: "refusal", category: null, explanation: null}, the shape hosted sessions
// show.
func refusal(ev wire.Event) (bool, json.RawMessage) {
	if len(ev.Private) == 0 {
		return false, nil
	}
	var p responsePrivate
	if json.Unmarshal(ev.Private, &p) != nil || p.StopReason != model.StopRefusal {
		return false, nil
	}
	details := struct {
		Type        string  `json:"type"`
		Category    *string `json:"category"`
		Explanation *string `json:"explanation"`
	}{Type: "refusal"}
	_ = json.Unmarshal(p.StopDetails, &details) // what the API sent, where it has these fields
	details.Type = "refusal"
	raw, _ := json.Marshal(details)
	return true, raw
}
