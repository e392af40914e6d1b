package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Stop reasons (build-with-claude/handling-stop-reasons).
const (
	stopEndTurn       = "end_turn"
	stopToolUse       = "tool_use"
	stopMaxTokens     = "max_tokens"
	stopRefusal       = "refusal"
	stopWindow        = "model_context_window_exceeded"
	defaultRefusalRaw = `{"type":"refusal","category":null,"explanation":null}`
)

// answer is the assistant message the server sends for one request.
type answer struct {
	content []Block
	// partialInput holds, for a tool_use cut by max_tokens, the incomplete input JSON the
	// stream sends; its block's Input is {} (what an accumulator makes of it).
	partialInput map[int]string
	stopReason   string
	stopDetails  json.RawMessage
	outputTokens int64
}

// outputTokens is what generating one block costs: what the block counts in a prompt
// (blockTokens), since a model's output blocks (text, thinking, redacted_thinking, tool_use)
// are counted alike on both sides.
func outputTokens(b Block) int64 { return blockTokens(b) }

// buildAnswer turns the Script's Reply into what the model sends: each block checked, tool
// ids filled in, the whole cut where max_tokens (or the context window, whichever is
// nearer) runs out, thinking signed and redacted thinking sealed, the stop reason decided.
func (s *Server) buildAnswer(reply Reply, req *Request, c thinkingConfig, m modelSpec, promptTokens, window int64) (answer, error) {
	omit := c.omitted(m)
	if err := checkReplyThinking(reply.Content, c); err != nil {
		return answer{}, err
	}
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Name] = true
	}
	for i, b := range reply.Content {
		switch b.Type {
		case "text", "thinking", "redacted_thinking":
		case "tool_use":
			if !tools[b.Name] {
				return answer{}, fmt.Errorf("the script's content[%d] calls tool %q, which the request does not define", i, b.Name)
			}
			if len(b.Input) > 0 && !isJSONObject(b.Input) {
				return answer{}, fmt.Errorf("the script's content[%d] has an input that is not a JSON object: %s", i, b.Input)
			}
		default:
			return answer{}, fmt.Errorf("the script's content[%d] has type %q, which this server does not generate", i, b.Type)
		}
	}

	limit, limitReason := int64(req.MaxTokens), stopMaxTokens
	if left := window - promptTokens; left < limit {
		// build-with-claude/handling-stop-reasons: the newer models stop at the window
		// with model_context_window_exceeded rather than refusing the request up front.
		limit, limitReason = left, stopWindow
	}
	a := answer{partialInput: map[int]string{}}
	var used int64
	cut := false
	for _, b := range reply.Content {
		if b.Type == "tool_use" {
			if b.ID == "" {
				b.ID = s.newID("toolu_")
			}
			if len(b.Input) == 0 {
				b.Input = json.RawMessage(`{}`)
			}
			b.Input = json.RawMessage(compactJSON(b.Input))
		}
		cost := outputTokens(b)
		if used+cost <= limit {
			used += cost
			a.content = append(a.content, s.finish(b, omit))
			continue
		}
		cut = true
		left := limit - used
		switch b.Type {
		case "text":
			if b.Text = prefixBytes(b.Text, left*4); b.Text != "" {
				a.content = append(a.content, b)
			}
		case "thinking":
			if b.Thinking = prefixBytes(b.Thinking, left*4); b.Thinking != "" {
				a.content = append(a.content, s.finish(b, omit))
			}
		case "tool_use":
			if left >= Tokens(b.Name) {
				a.partialInput[len(a.content)] = prefixBytes(string(b.Input), (left-Tokens(b.Name))*4)
				b.Input = json.RawMessage(`{}`)
				a.content = append(a.content, b)
			}
		}
		used = limit
		break
	}
	a.outputTokens = used

	hasToolUse := slices.ContainsFunc(a.content, func(b Block) bool { return b.Type == "tool_use" })
	switch {
	case cut:
		a.stopReason = limitReason
	case reply.StopReason == "":
		a.stopReason = stopEndTurn
		if hasToolUse {
			a.stopReason = stopToolUse
		}
	case reply.StopReason == stopToolUse && !hasToolUse:
		return answer{}, fmt.Errorf("the script answers stop_reason tool_use without a tool_use block")
	case reply.StopReason == stopEndTurn && hasToolUse:
		return answer{}, fmt.Errorf("the script answers tool_use blocks with stop_reason end_turn; the API stops with tool_use")
	case slices.Contains([]string{stopEndTurn, stopToolUse, stopRefusal}, reply.StopReason):
		a.stopReason = reply.StopReason
	default:
		return answer{}, fmt.Errorf("the script answers stop_reason %q, which the API does not", reply.StopReason)
	}
	if a.stopReason == stopRefusal {
		a.stopDetails = reply.StopDetails
		if len(a.stopDetails) == 0 {
			a.stopDetails = json.RawMessage(defaultRefusalRaw)
		}
	}

	thought := slices.ContainsFunc(a.content, func(b Block) bool { return b.Type == "thinking" || b.Type == "redacted_thinking" })
	if hasToolUse && !thought {
		s.mu.Lock()
		for _, b := range a.content {
			if b.Type == "tool_use" {
				s.thinkless[b.ID] = true
			}
		}
		s.mu.Unlock()
	}
	return a, nil
}

// finish signs a thinking block (emptied when the request's display omits thinking) and
// seals a redacted one.
func (s *Server) finish(b Block, omit bool) Block {
	switch b.Type {
	case "thinking":
		if omit {
			b.Thinking, b.Signature = "", s.signer.signOmitted(b.Thinking)
			s.mu.Lock()
			s.omitted[b.Signature] = true
			s.mu.Unlock()
			break
		}
		b.Signature = s.signer.sign(b.Thinking)
	case "redacted_thinking":
		b.Data = s.signer.seal(b.Data)
	}
	return b
}

// prefixBytes is the longest prefix of s of at most n bytes that does not split a UTF-8
// sequence.
func prefixBytes(s string, n int64) string {
	if n <= 0 {
		return ""
	}
	if int64(len(s)) <= n {
		return s
	}
	end := int(n)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}

// wireBlock is a response content block in the API's shape: each type with exactly its
// fields, the empty ones included.
func wireBlock(b Block) any {
	switch b.Type {
	case "text":
		return struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text}
	case "thinking":
		return struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{b.Type, b.Thinking, b.Signature}
	case "redacted_thinking":
		return struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{b.Type, b.Data}
	default: // tool_use
		return struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, b.Input}
	}
}

// wireUsage is the usage object of a message (api/messages).
type wireUsage struct {
	InputTokens              int64         `json:"input_tokens"`
	CacheCreationInputTokens int64         `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64         `json:"cache_read_input_tokens"`
	CacheCreation            cacheCreation `json:"cache_creation"`
	OutputTokens             int64         `json:"output_tokens"`
	ServiceTier              string        `json:"service_tier"`
	Speed                    string        `json:"speed"`
}

type cacheCreation struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

func toWireUsage(u Usage, speed string) wireUsage {
	if speed == "" {
		speed = "standard"
	}
	return wireUsage{
		InputTokens:              u.InputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreation:            cacheCreation{u.Ephemeral5mInputTokens, u.Ephemeral1hInputTokens},
		OutputTokens:             u.OutputTokens,
		ServiceTier:              "standard",
		Speed:                    speed,
	}
}

// wireMessage is the Message object a non-streaming call answers (api/messages).
type wireMessage struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []any           `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	StopDetails  json.RawMessage `json:"stop_details"`
	Usage        wireUsage       `json:"usage"`
}

func newWireMessage(id, model string) wireMessage {
	return wireMessage{ID: id, Type: "message", Role: "assistant", Model: model, Content: []any{}, StopDetails: json.RawMessage("null")}
}

// isJSONObject reports whether raw is a JSON object.
func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}
