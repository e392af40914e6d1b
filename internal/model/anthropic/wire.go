package anthropic

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/managed-agents/managed-agents/internal/model"
)

// The request body of POST /v1/messages. Each block type has its own struct so that fields
// the API requires (text, input) are sent even when empty and no foreign field leaks in.
type (
	requestBody struct {
		Model        string          `json:"model"`
		MaxTokens    int             `json:"max_tokens"`
		System       any             `json:"system,omitempty"` // a string, or text blocks when cached
		Messages     []messageParam  `json:"messages"`
		Tools        []toolParam     `json:"tools,omitempty"`
		ToolChoice   *toolChoice     `json:"tool_choice,omitempty"`
		Thinking     *model.Thinking `json:"thinking,omitempty"`
		OutputConfig *outputConfig   `json:"output_config,omitempty"`
		Speed        string          `json:"speed,omitempty"`
		Stream       bool            `json:"stream,omitempty"`
	}
	toolChoice struct {
		Type string `json:"type"`
	}
	outputConfig struct {
		Effort string `json:"effort,omitempty"`
	}
	messageParam struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	// cacheControl marks a prompt-cache breakpoint on the block that carries it.
	cacheControl struct {
		Type string `json:"type"`
	}
	textParam struct {
		Type         string        `json:"type"`
		Text         string        `json:"text"`
		CacheControl *cacheControl `json:"cache_control,omitempty"`
	}
	thinkingParam struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	redactedThinkingParam struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	toolUseParam struct {
		Type         string          `json:"type"`
		ID           string          `json:"id"`
		Name         string          `json:"name"`
		Input        json.RawMessage `json:"input"`
		CacheControl *cacheControl   `json:"cache_control,omitempty"`
	}
	toolResultParam struct {
		Type         string        `json:"type"`
		ToolUseID    string        `json:"tool_use_id"`
		Content      []any         `json:"content,omitempty"`
		IsError      bool          `json:"is_error,omitempty"`
		CacheControl *cacheControl `json:"cache_control,omitempty"`
	}
	mediaParam struct {
		Type         string          `json:"type"`
		Source       json.RawMessage `json:"source"`
		Title        string          `json:"title,omitempty"`
		Context      string          `json:"context,omitempty"`
		CacheControl *cacheControl   `json:"cache_control,omitempty"`
	}
	toolParam struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl *cacheControl   `json:"cache_control,omitempty"`
	}
)

var emptyObject = json.RawMessage(`{}`)

// ephemeral is the default 5-minute cache breakpoint.
var ephemeral = &cacheControl{Type: "ephemeral"}

// fastModeBeta is the beta that speed "fast" needs on the models where fast mode is a
// research preview (platform.claude.com/docs/en/build-with-claude/fast-mode); models where it
// is generally available accept the header too.
const fastModeBeta = "fast-mode-2026-02-01"

// requestBetas are the anthropic-beta values req needs.
func requestBetas(req model.Request) []string {
	if req.Speed == "fast" {
		return []string{fastModeBeta}
	}
	return nil
}

func encodeRequest(req model.Request, defaultMaxTokens int, stream bool) ([]byte, error) {
	body := requestBody{
		Model:     req.Model,
		MaxTokens: req.MaxTokens,
		Messages:  make([]messageParam, len(req.Messages)),
		Thinking:  req.Thinking,
		Stream:    stream,
	}
	if req.System != "" {
		body.System = req.System
	}
	if body.MaxTokens <= 0 {
		body.MaxTokens = defaultMaxTokens
	}
	if req.Effort != "" {
		body.OutputConfig = &outputConfig{Effort: req.Effort}
	}
	if req.Speed == "fast" {
		body.Speed = req.Speed
	}
	if req.ToolChoice != "" && len(req.Tools) > 0 {
		body.ToolChoice = &toolChoice{Type: req.ToolChoice}
	}
	marks := map[[2]int]bool{}
	if req.Cache {
		marks = conversationBreakpoints(req.Messages)
	}
	for i, m := range req.Messages {
		content, err := encodeBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].%w", i, err)
		}
		for j := range content {
			if marks[[2]int{i, j}] {
				content[j] = withCacheControl(content[j])
			}
		}
		body.Messages[i] = messageParam{Role: m.Role, Content: content}
	}
	for _, t := range req.Tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		body.Tools = append(body.Tools, toolParam{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if req.Cache {
		// The stable prefix: the prompt is rendered tools, then system, then messages, and a
		// breakpoint caches everything before it (platform.claude.com/docs/en/build-with-claude/
		// prompt-caching, "Prompt caching caches the full prefix"). One breakpoint at the end of
		// the system prompt covers the tools too; without a system prompt, mark the last tool.
		switch {
		case req.System != "":
			body.System = []textParam{{Type: model.BlockText, Text: req.System, CacheControl: ephemeral}}
		case len(body.Tools) > 0:
			body.Tools[len(body.Tools)-1].CacheControl = ephemeral
		}
	}
	return json.Marshal(body)
}

// conversationBreakpoints chooses where the conversation's cache breakpoints go, as
// [message, block] pairs: on the last cacheable block of the last message, which writes the
// whole conversation to the cache for the next request, and on the last cacheable block of the
// user message before it, which is where the previous request of a tool loop put its own last
// breakpoint, so this request reads that entry exactly even when more than 20 blocks came in
// between (the API looks back at most 20 blocks from a breakpoint for an earlier entry:
// platform.claude.com/docs/en/build-with-claude/prompt-caching, "cache breakpoints and the
// lookback window"). With the system prompt's breakpoint that makes three of the four a request
// may carry ("You can define up to 4 cache breakpoints"). A prefix shorter than the model's
// minimum cacheable length is simply not cached; the API does not refuse the breakpoint.
func conversationBreakpoints(msgs []model.Message) map[[2]int]bool {
	marks := map[[2]int]bool{}
	users := 0
	for i := len(msgs) - 1; i >= 0 && users < 2; i-- {
		last := i == len(msgs)-1
		if !last && msgs[i].Role != "user" {
			continue
		}
		if msgs[i].Role == "user" {
			users++
		}
		for j := len(msgs[i].Content) - 1; j >= 0; j-- {
			if cacheable(msgs[i].Content[j]) {
				marks[[2]int{i, j}] = true
				break
			}
		}
	}
	return marks
}

// cacheable reports whether a block may carry cache_control: thinking blocks cannot be marked
// directly (they are cached as part of the prefix of a later breakpoint), and empty text is
// never sent.
func cacheable(b model.Block) bool {
	switch b.Type {
	case model.BlockThinking, model.BlockRedactedThinking:
		return false
	case model.BlockText:
		return b.Text != ""
	}
	return true
}

// withCacheControl returns the encoded block p with a breakpoint on it.
func withCacheControl(p any) any {
	switch b := p.(type) {
	case textParam:
		b.CacheControl = ephemeral
		return b
	case toolUseParam:
		b.CacheControl = ephemeral
		return b
	case toolResultParam:
		b.CacheControl = ephemeral
		return b
	case mediaParam:
		b.CacheControl = ephemeral
		return b
	}
	return p
}

func encodeBlocks(blocks []model.Block) ([]any, error) {
	out := make([]any, len(blocks))
	for i, b := range blocks {
		enc, err := encodeBlock(b)
		if err != nil {
			return nil, fmt.Errorf("content[%d]%w", i, err)
		}
		out[i] = enc
	}
	return out, nil
}

func encodeBlock(b model.Block) (any, error) {
	switch b.Type {
	case model.BlockText:
		return textParam{Type: b.Type, Text: b.Text}, nil
	case model.BlockThinking:
		return thinkingParam{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature}, nil
	case model.BlockRedactedThinking:
		return redactedThinkingParam{Type: b.Type, Data: b.Data}, nil
	case model.BlockImage, model.BlockDocument:
		if len(b.Source) == 0 {
			return nil, fmt.Errorf(": %s block without a source", b.Type)
		}
		return mediaParam{Type: b.Type, Source: b.Source, Title: b.Title, Context: b.Context}, nil
	case model.BlockToolUse:
		input := b.Input
		if len(input) == 0 || !json.Valid(input) {
			input = emptyObject
		}
		return toolUseParam{Type: b.Type, ID: b.ID, Name: b.Name, Input: input}, nil
	case model.BlockToolResult:
		if len(b.Content) == 0 {
			return toolResultParam{Type: b.Type, ToolUseID: b.ToolUseID, IsError: b.IsError}, nil
		}
		content, err := encodeBlocks(b.Content)
		if err != nil {
			return nil, fmt.Errorf(".%w", err)
		}
		return toolResultParam{Type: b.Type, ToolUseID: b.ToolUseID, Content: content, IsError: b.IsError}, nil
	default:
		return nil, fmt.Errorf(": unsupported block type %q", b.Type)
	}
}

// The response side: a Message, and the content blocks and usage that streams carry too.
type (
	messageBody struct {
		Content     []contentBlock  `json:"content"`
		StopReason  string          `json:"stop_reason"`
		StopDetails json.RawMessage `json:"stop_details"`
		Usage       usageBody       `json:"usage"`
	}
	contentBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	}
	// usageBody has pointers because a message_delta carries only the counts that changed.
	usageBody struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	}
)

// readMessage decodes the body of a non-streaming call.
func readMessage(body io.Reader) (model.Response, error) {
	var msg messageBody
	if err := json.NewDecoder(body).Decode(&msg); err != nil {
		return model.Response{}, &model.Error{Kind: model.ErrServer, Message: fmt.Sprintf("malformed response body: %v", err)}
	}
	resp := model.Response{Content: []model.Block{}, StopReason: msg.StopReason, StopDetails: details(msg.StopDetails)}
	for _, b := range msg.Content {
		if block, ok := b.toModel(); ok {
			resp.Content = append(resp.Content, block)
		}
	}
	msg.Usage.applyTo(&resp.Usage)
	markTruncated(&resp)
	return resp, nil
}

// toModel converts the block types model.Block can hold.
func (b contentBlock) toModel() (model.Block, bool) {
	switch b.Type {
	case model.BlockText:
		return model.Block{Type: b.Type, Text: b.Text}, true
	case model.BlockThinking:
		return model.Block{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature}, true
	case model.BlockRedactedThinking:
		return model.Block{Type: b.Type, Data: b.Data}, true
	case model.BlockToolUse:
		input := b.Input
		if len(input) == 0 || string(input) == "null" {
			input = emptyObject
		}
		return model.Block{Type: b.Type, ID: b.ID, Name: b.Name, Input: input}, true
	default:
		return model.Block{}, false
	}
}

// applyTo overwrites the counts u carries; every count the API sends is a running total.
func (u usageBody) applyTo(dst *model.Usage) {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&dst.InputTokens, u.InputTokens)
	set(&dst.OutputTokens, u.OutputTokens)
	set(&dst.CacheCreationInputTokens, u.CacheCreationInputTokens)
	set(&dst.CacheReadInputTokens, u.CacheReadInputTokens)
}

// details keeps a stop_details object; null or absent is nil.
func details(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}
