package upstream

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Thinking modes of a model, as the catalog names them.
const (
	thinkingEnabled  = "enabled"  // thinking {type: enabled, budget_tokens}
	thinkingAdaptive = "adaptive" // thinking {type: adaptive} (and, deprecated, enabled)
)

// minThinkingBudget is the smallest budget_tokens the API accepts
// (build-with-claude/extended-thinking, "How to use extended thinking").
const minThinkingBudget = 1024

// efforts are the values of output_config.effort (build-with-claude/effort).
var efforts = []string{"low", "medium", "high", "xhigh", "max"}

// fastModeBeta is the beta header fast mode asks for on the models where it is a research
// preview (build-with-claude/fast-mode).
const fastModeBeta = "fast-mode-2026-02-01"

// signer signs the thinking and seals the redacted_thinking this server produces, so that
// what a client sends back can be checked to be exactly that: the API refuses a thinking
// block whose text or signature was changed (build-with-claude/extended-thinking,
// "Thinking encryption" and "Preserving thinking blocks").
type signer struct{ key []byte }

func newSigner() signer {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return signer{key: key}
}

func (s signer) mac(kind, text string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write([]byte(text))
	return m.Sum(nil)
}

// sign is the signature of one thinking text.
func (s signer) sign(thinking string) string {
	return base64.StdEncoding.EncodeToString(s.mac("thinking", thinking))
}

func (s signer) verify(thinking, signature string) bool {
	got, err := base64.StdEncoding.DecodeString(signature)
	return err == nil && hmac.Equal(got, s.mac("thinking", thinking))
}

// signOmitted is the signature of a thinking block sent with its text omitted: it stands for
// the whole text, which the client never sees and sends back empty.
func (s signer) signOmitted(thinking string) string {
	return base64.StdEncoding.EncodeToString(s.mac("omitted", thinking))
}

// seal wraps a redacted_thinking payload the way the API's is: opaque, and only this server
// can tell it produced it.
func (s signer) seal(payload string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac("redacted", body))
}

func (s signer) opened(data string) bool {
	body, tag, ok := strings.Cut(data, ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(tag)
	return err == nil && hmac.Equal(got, s.mac("redacted", body))
}

// thinkingConfig is the request's thinking parameter.
type thinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"`
}

// on reports whether the request asks the model to think.
func (c thinkingConfig) on() bool { return c.Type == "enabled" || c.Type == "adaptive" }

// displays are the values of thinking.display (build-with-claude/extended-thinking,
// build-with-claude/adaptive-thinking): summarized text, or omitted (an empty thinking field
// whose signature still carries the thinking).
var displays = []string{"summarized", "omitted"}

// omitted reports whether thinking text is left out of the answer: when the request says
// so, and by default on the adaptive-only models (Opus 4.7 and later), whose default display
// is omitted.
func (c thinkingConfig) omitted(m modelSpec) bool {
	if c.Display != "" {
		return c.Display == "omitted"
	}
	return m.Thinking == thinkingAdaptive && !m.BudgetThinking
}

var thinkingFields = map[string][]string{
	"enabled":  {"type", "budget_tokens", "display"},
	"adaptive": {"type", "display"},
	"disabled": {"type"},
}

// checkThinking checks the thinking parameter against the model and max_tokens
// (build-with-claude/extended-thinking; build-with-claude/adaptive-thinking: adaptive only on
// the models that have it, older ones need enabled with budget_tokens).
func checkThinking(req *Request, m modelSpec) (thinkingConfig, *apiError) {
	var c thinkingConfig
	if len(req.Thinking) == 0 || string(req.Thinking) == "null" {
		return c, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(req.Thinking, &fields) != nil || json.Unmarshal(req.Thinking, &c) != nil {
		return c, invalid("thinking: Input should be a valid dictionary")
	}
	allowed, ok := thinkingFields[c.Type]
	if !ok {
		return c, invalid("thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'enabled', 'adaptive', 'disabled'", c.Type)
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(allowed, k) {
			return c, invalid("thinking.%s.%s: Extra inputs are not permitted", c.Type, k)
		}
	}
	if c.Display != "" && !slices.Contains(displays, c.Display) {
		return c, invalid("thinking.%s.display: Input should be 'summarized' or 'omitted'", c.Type)
	}
	switch c.Type {
	case "enabled":
		if m.Thinking == "" {
			return c, invalid("thinking: extended thinking is not supported by model %s", m.ID)
		}
		if !m.BudgetThinking {
			return c, invalid("thinking.type.enabled: thinking type 'enabled' is not supported for model %s; use thinking type 'adaptive' with output_config.effort", m.ID)
		}
		if c.BudgetTokens == nil {
			return c, invalid("thinking.enabled.budget_tokens: Field required")
		}
		if *c.BudgetTokens < minThinkingBudget {
			return c, invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to %d", minThinkingBudget)
		}
		if req.MaxTokens <= *c.BudgetTokens {
			return c, invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
		}
	case "adaptive":
		if m.Thinking != thinkingAdaptive {
			return c, invalid("thinking.type.adaptive: adaptive thinking is not supported for model %s", m.ID)
		}
	}
	if c.on() {
		// extended-thinking, "Feature compatibility": thinking does not go with temperature
		// or top_k changes; top_p may be set between 0.95 and 1.
		if t := req.Temperature; t != nil && *t != 1 {
			return c, invalid("`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
		}
		if req.TopK != nil {
			return c, invalid("`top_k` must be unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
		}
		if p := req.TopP; p != nil && *p < 0.95 {
			return c, invalid("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
		}
	}
	if c.on() && len(req.ToolChoice) > 0 {
		var tc struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(req.ToolChoice, &tc)
		if tc.Type == "any" || tc.Type == "tool" {
			// extended-thinking, "Extended thinking with tool use": only auto and none.
			return c, invalid("Thinking may not be enabled when tool_choice forces tool use.")
		}
	}
	return c, nil
}

// checkEffort checks output_config: effort only where the model has it, with one of the
// documented values (build-with-claude/effort).
func checkEffort(req *Request, m modelSpec) *apiError {
	if len(req.OutputConfig) == 0 || string(req.OutputConfig) == "null" {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(req.OutputConfig, &fields) != nil {
		return invalid("output_config: Input should be a valid dictionary")
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "effort" && k != "format" {
			return invalid("output_config.%s: Extra inputs are not permitted", k)
		}
	}
	raw, ok := fields["effort"]
	if !ok {
		return nil
	}
	var effort string
	if json.Unmarshal(raw, &effort) != nil || !slices.Contains(efforts, effort) {
		return invalid("output_config.effort: Input should be %s", strings.Join(quoteEach(efforts), ", "))
	}
	if !m.Effort {
		return invalid("output_config.effort: effort is not supported for model %s", m.ID)
	}
	return nil
}

// checkSpeed checks speed: standard or fast, fast only on the models that have fast mode
// (build-with-claude/fast-mode). Where fast mode is a research preview the request also
// carries the fast-mode beta header.
func checkSpeed(req *Request, m modelSpec) *apiError {
	switch req.Speed {
	case "", "standard":
		return nil
	case "fast":
	default:
		return invalid("speed: Input should be 'standard' or 'fast'")
	}
	if !m.FastMode {
		return invalid("speed: fast mode is not supported for model %s", m.ID)
	}
	if m.FastModeBeta && !hasBeta(req, fastModeBeta) {
		return invalid("speed: fast mode for model %s requires the anthropic-beta header %s", m.ID, fastModeBeta)
	}
	return nil
}

func hasBeta(req *Request, name string) bool {
	for _, v := range req.Header.Values("anthropic-beta") {
		for b := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(b) == name {
				return true
			}
		}
	}
	return false
}

func quoteEach(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "'" + s + "'"
	}
	return out
}

// checkThinkingBlocks checks what the client sends back of the model's thinking: every
// thinking block carries the signature this server made for exactly its text, every
// redacted_thinking block the data this server sealed; and while a tool loop is in progress
// with thinking on, the assistant message that made the calls starts with its thinking
// (build-with-claude/extended-thinking, "Preserving thinking blocks"). A turn this server
// itself produced without thinking (adaptive thinking may skip it) is exempt: the client
// could not have kept what was never sent.
func (s *Server) checkThinkingBlocks(req *Request, c thinkingConfig) *apiError {
	for i, m := range req.Messages {
		if m.Role != "assistant" {
			continue
		}
		for j, b := range m.Content {
			switch b.Type {
			case "thinking":
				if b.Thinking == "" && s.wasOmitted(b.Signature) {
					continue // sent back as it was answered: empty, with its signature
				}
				if !s.signer.verify(b.Thinking, b.Signature) {
					return invalid("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
				}
			case "redacted_thinking":
				if !s.signer.opened(b.Data) {
					return invalid("messages.%d.content.%d: Invalid `data` in `redacted_thinking` block", i, j)
				}
			}
		}
	}
	if !c.on() || len(req.Messages) < 2 {
		return nil
	}
	a := len(req.Messages) - 2
	loop := req.Messages[a]
	if loop.Role != "assistant" || req.Messages[a+1].Role != "user" {
		return nil
	}
	var calls []string
	for _, b := range loop.Content {
		if b.Type == "tool_use" {
			calls = append(calls, b.ID)
		}
	}
	if len(calls) == 0 {
		return nil
	}
	if first := loop.Content[0].Type; first != "thinking" && first != "redacted_thinking" {
		if s.producedWithoutThinking(calls) {
			return nil
		}
		return invalid("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
			a, first)
	}
	return nil
}

// wasOmitted reports whether this server answered a thinking block with this signature and
// its text omitted.
func (s *Server) wasOmitted(signature string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.omitted[signature]
}

// producedWithoutThinking reports whether this server answered every one of these tool calls
// in a reply that had no thinking block.
func (s *Server) producedWithoutThinking(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !s.thinkless[id] {
			return false
		}
	}
	return true
}

// checkReplyThinking reports a Script that makes the model think while the request did not
// ask for it: the API never answers so, and a test built on it would mean nothing.
func checkReplyThinking(content []Block, c thinkingConfig) error {
	if c.on() {
		return nil
	}
	for _, b := range content {
		if b.Type == "thinking" || b.Type == "redacted_thinking" {
			return fmt.Errorf("the script answered a %s block to a request without thinking on", b.Type)
		}
	}
	return nil
}
