package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// deltaBytes is the size of the pieces text, thinking and input JSON are streamed in: small,
// so that every client test sees a block assembled from several deltas.
const deltaBytes = 16

// writeStream answers with server-sent events in the documented order
// (build-with-claude/streaming, "Event types"): message_start with an empty content and the
// input usage, a ping, for each block content_block_start, its deltas (text_delta,
// thinking_delta then one signature_delta, input_json_delta) and content_block_stop, then
// message_delta with the stop reason and the final usage, and message_stop. Each event's
// name is also the type in its data.
//
// A failure after the 200 (streamErr set) ends the stream after the content blocks with an
// error event in the error shape of api/errors, as the documentation's "Error events" shows.
func writeStream(w http.ResponseWriter, msg wireMessage, a answer, streamErr *apiError) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		body, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, body)
		if flusher != nil {
			flusher.Flush()
		}
	}

	final := msg.Usage
	start := msg
	start.Content = []any{}
	start.StopReason, start.StopSequence, start.StopDetails = nil, nil, json.RawMessage("null")
	start.Usage.OutputTokens = 1 // as the documented example: the count so far, replaced by message_delta's
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("ping", map[string]any{"type": "ping"})

	for i, b := range a.content {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": startBlock(b)})
		delta := func(d map[string]any) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch b.Type {
		case "text":
			for _, piece := range pieces(b.Text) {
				delta(map[string]any{"type": "text_delta", "text": piece})
			}
		case "thinking":
			for _, piece := range pieces(b.Thinking) {
				delta(map[string]any{"type": "thinking_delta", "thinking": piece})
			}
			delta(map[string]any{"type": "signature_delta", "signature": b.Signature})
		case "tool_use":
			input, cut := a.partialInput[i]
			if !cut {
				input = string(b.Input)
			}
			// The first delta of a tool call is empty, as the API's often is.
			delta(map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range pieces(input) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}

	if streamErr != nil {
		send("error", map[string]any{"type": "error", "error": map[string]string{"type": streamErr.typ, "message": streamErr.msg}})
		return
	}
	stopDetails := a.stopDetails
	if len(stopDetails) == 0 {
		stopDetails = json.RawMessage("null")
	}
	send("message_delta", map[string]any{
		"type": "message_delta",
		"delta": map[string]any{
			"stop_reason":   a.stopReason,
			"stop_sequence": nil,
			"stop_details":  stopDetails,
		},
		"usage": map[string]any{
			"input_tokens":                final.InputTokens,
			"cache_creation_input_tokens": final.CacheCreationInputTokens,
			"cache_read_input_tokens":     final.CacheReadInputTokens,
			"output_tokens":               final.OutputTokens,
		},
	})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// startBlock is a block as content_block_start announces it: its text, thinking, signature
// and input still empty, a redacted_thinking block whole.
func startBlock(b Block) any {
	switch b.Type {
	case "text":
		b.Text = ""
	case "thinking":
		b.Thinking, b.Signature = "", ""
	case "tool_use":
		b.Input = json.RawMessage(`{}`)
	}
	return wireBlock(b)
}

// pieces splits s into chunks of about deltaBytes that do not split a UTF-8 sequence.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(deltaBytes, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
