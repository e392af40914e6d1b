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
		Model     string         `json:"model"`
		MaxTokens int            `json:"max_tokens"`
		System    string         `json:"system,omitempty"`
		Messages  []messageParam `json:"messages"`
		Tools     []toolParam    `json:"tools,omitempty"`
		Stream    bool           `json:"stream,omitempty"`
	}
	messageParam struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	textParam struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	thinkingParam struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	toolUseParam struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	toolResultParam struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   []any  `json:"content,omitempty"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	toolParam struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

var emptyObject = json.RawMessage(`{}`)

func encodeRequest(req model.Request, defaultMaxTokens int, stream bool) ([]byte, error) {
	body := requestBody{
		Model:     req.Model,
		MaxTokens: req.MaxTokens,
		System:    req.System,
		Messages:  make([]messageParam, len(req.Messages)),
		Stream:    stream,
	}
	if body.MaxTokens <= 0 {
		body.MaxTokens = defaultMaxTokens
	}
	for i, m := range req.Messages {
		content, err := encodeBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].%w", i, err)
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
	return json.Marshal(body)
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
	case model.BlockToolUse:
		input := b.Input
		if len(input) == 0 {
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
		Content    []contentBlock `json:"content"`
		StopReason string         `json:"stop_reason"`
		Usage      usageBody      `json:"usage"`
	}
	contentBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
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
	resp := model.Response{Content: []model.Block{}, StopReason: msg.StopReason}
	for _, b := range msg.Content {
		if block, ok := b.toModel(); ok {
			resp.Content = append(resp.Content, block)
		}
	}
	msg.Usage.applyTo(&resp.Usage)
	return resp, nil
}

// toModel converts the block types model.Block can hold.
func (b contentBlock) toModel() (model.Block, bool) {
	switch b.Type {
	case model.BlockText:
		return model.Block{Type: b.Type, Text: b.Text}, true
	case model.BlockThinking:
		return model.Block{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature}, true
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
