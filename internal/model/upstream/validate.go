package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// apiError is a refusal in the API's error shape (api/errors): the HTTP status, the error
// type and the message.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.typ, e.msg) }

func invalid(format string, args ...any) *apiError {
	return &apiError{status: 400, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...)}
}

// topLevelFields are the body fields of POST /v1/messages (api/messages). The API refuses any
// other field ("Extra inputs are not permitted"), which catches a misspelled parameter a
// lenient stand-in would ignore.
var topLevelFields = []string{
	"model", "max_tokens", "messages", "system", "tools", "tool_choice", "thinking",
	"output_config", "speed", "stream", "metadata", "stop_sequences", "temperature", "top_p",
	"top_k", "cache_control", "service_tier", "container", "context_management",
	"mcp_servers", "inference_geo", "diagnostics",
}

// blockFields are the fields each content block type may carry (api/messages, the content
// block params). tool_result content, image and document sources are checked on their own.
var blockFields = map[string][]string{
	"text":              {"type", "text", "cache_control", "citations"},
	"image":             {"type", "source", "cache_control"},
	"document":          {"type", "source", "title", "context", "citations", "cache_control"},
	"tool_use":          {"type", "id", "name", "input", "cache_control"},
	"tool_result":       {"type", "tool_use_id", "content", "is_error", "cache_control"},
	"thinking":          {"type", "thinking", "signature"},
	"redacted_thinking": {"type", "data"},
}

// requiredFields are the fields without which a block is refused ("Field required").
var requiredFields = map[string][]string{
	"text":              {"text"},
	"image":             {"source"},
	"document":          {"source"},
	"tool_use":          {"id", "name", "input"},
	"tool_result":       {"tool_use_id"},
	"thinking":          {"thinking", "signature"},
	"redacted_thinking": {"data"},
}

// roleBlocks are the block types each role may send: the user sends text, images, documents
// and tool results; the assistant's turns carry text, thinking and tool calls
// (api/messages). Server-tool blocks, search results and container uploads are real block
// types this stand-in does not implement; it refuses them rather than pretend.
var roleBlocks = map[string][]string{
	"user":      {"text", "image", "document", "tool_result"},
	"assistant": {"text", "thinking", "redacted_thinking", "tool_use"},
	// A mid-conversation system message carries text (build-with-claude/
	// mid-conversation-system-messages); server.go's check decides where it may stand.
	"system": {"text"},
}

// resultBlocks are the block types a tool_result's content may hold
// (agents-and-tools/tool-use/handle-tool-calls: text, image and document blocks).
var resultBlocks = []string{"text", "image", "document"}

// toolName is the documented pattern of a custom tool's name
// (agents-and-tools/tool-use/define-tools).
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolFields are the fields of a custom tool definition.
var toolFields = []string{"type", "name", "description", "input_schema", "cache_control", "strict", "input_examples"}

// parseRequest reads the body into req, refusing what is malformed: JSON, unknown fields,
// required fields, field types, roles, block types and their fields. Rules that depend on
// the model or span messages are checked afterwards.
func parseRequest(body []byte, req *Request, media *mediaCount) *apiError {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil || dec.More() {
		return invalid("There was an error parsing the body of your request: the body must be one JSON object")
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(topLevelFields, k) {
			return invalid("%s: Extra inputs are not permitted", k)
		}
	}
	for _, k := range []string{"model", "max_tokens", "messages"} {
		if _, ok := top[k]; !ok {
			return invalid("%s: Field required", k)
		}
	}
	if json.Unmarshal(top["model"], &req.Model) != nil {
		return invalid("model: Input should be a valid string")
	}
	if json.Unmarshal(top["max_tokens"], &req.MaxTokens) != nil {
		return invalid("max_tokens: Input should be a valid integer")
	}
	if req.MaxTokens < 1 {
		return invalid("max_tokens: Input should be greater than or equal to 1")
	}
	if raw, ok := top["stream"]; ok && json.Unmarshal(raw, &req.Stream) != nil {
		return invalid("stream: Input should be a valid boolean")
	}
	if raw, ok := top["speed"]; ok && json.Unmarshal(raw, &req.Speed) != nil {
		return invalid("speed: Input should be 'standard' or 'fast'")
	}
	for _, f := range []struct {
		name string
		dst  any
	}{{"temperature", &req.Temperature}, {"top_p", &req.TopP}, {"top_k", &req.TopK}} {
		if raw, ok := top[f.name]; ok && json.Unmarshal(raw, f.dst) != nil {
			return invalid("%s: Input should be a valid number", f.name)
		}
	}
	// api/messages: temperature and top_p range from 0 to 1.
	if t := req.Temperature; t != nil && (*t < 0 || *t > 1) {
		return invalid("temperature: Input should be between 0 and 1")
	}
	if p := req.TopP; p != nil && (*p < 0 || *p > 1) {
		return invalid("top_p: Input should be between 0 and 1")
	}
	req.Thinking = top["thinking"]
	req.OutputConfig = top["output_config"]
	req.ToolChoice = top["tool_choice"]
	req.CacheControl = top["cache_control"]
	if raw, ok := top["system"]; ok {
		system, err := parseSystem(raw)
		if err != nil {
			return err
		}
		req.System = system
	}
	if raw, ok := top["tools"]; ok {
		tools, err := parseTools(raw)
		if err != nil {
			return err
		}
		req.Tools = tools
	}
	messages, err := parseMessages(top["messages"], media)
	if err != nil {
		return err
	}
	req.Messages = messages
	if err := checkCacheControls(req); err != nil {
		return err
	}
	return nil
}

// parseSystem reads system: a string, or an array of text blocks (api/messages).
func parseSystem(raw json.RawMessage) ([]Block, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, invalid("system: Input should be a valid string")
		}
		if s == "" {
			return nil, nil
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, invalid("system: Input should be a valid string or a list of text blocks")
	}
	out := make([]Block, 0, len(blocks))
	for i, rb := range blocks {
		path := fmt.Sprintf("system.%d", i)
		b, err := parseBlock(path, rb, []string{"text"}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// parseTools reads the custom tool definitions (agents-and-tools/tool-use/define-tools).
func parseTools(raw json.RawMessage) ([]Tool, *apiError) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalid("tools: Input should be a valid list")
	}
	tools := make([]Tool, 0, len(list))
	seen := map[string]bool{}
	for i, rt := range list {
		var fields map[string]json.RawMessage
		if json.Unmarshal(rt, &fields) != nil {
			return nil, invalid("tools.%d: Input should be a valid dictionary", i)
		}
		var t Tool
		if err := json.Unmarshal(rt, &t); err != nil {
			return nil, invalid("tools.%d: %v", i, err)
		}
		if t.Type != "" && t.Type != "custom" {
			return nil, invalid("tools.%d: tool type '%s' is not supported by this stand-in of the API (only custom tools are)", i, t.Type)
		}
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if !slices.Contains(toolFields, k) {
				return nil, invalid("tools.%d.custom.%s: Extra inputs are not permitted", i, k)
			}
		}
		if !toolName.MatchString(t.Name) {
			return nil, invalid("tools.%d.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if _, ok := fields["input_schema"]; !ok {
			return nil, invalid("tools.%d.custom.input_schema: Field required", i)
		}
		var schema struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return nil, invalid("tools.%d.custom.input_schema.type: Input should be 'object'", i)
		}
		if seen[t.Name] {
			return nil, invalid("tools: Tool names must be unique.")
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// parseMessages reads messages: roles, content as a string or blocks, block types per role,
// non-empty content (api/messages).
func parseMessages(raw json.RawMessage, media *mediaCount) ([]Message, *apiError) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalid("messages: Input should be a valid list")
	}
	if len(list) == 0 {
		return nil, invalid("messages: at least one message is required")
	}
	messages := make([]Message, 0, len(list))
	for i, rm := range list {
		var fields map[string]json.RawMessage
		if json.Unmarshal(rm, &fields) != nil {
			return nil, invalid("messages.%d: Input should be a valid dictionary", i)
		}
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if k != "role" && k != "content" {
				return nil, invalid("messages.%d.%s: Extra inputs are not permitted", i, k)
			}
		}
		var role string
		_ = json.Unmarshal(fields["role"], &role)
		if role != "user" && role != "assistant" && role != "system" {
			return nil, invalid("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		content, err := parseContent(fmt.Sprintf("messages.%d", i), fields["content"], role, media)
		if err != nil {
			return nil, err
		}
		messages = append(messages, Message{Role: role, Content: content})
	}
	if messages[0].Role != "user" {
		return nil, invalid(`messages: first message must use the "user" role`)
	}
	last := len(messages) - 1
	for i, m := range messages {
		if len(m.Content) == 0 && (i != last || m.Role != "assistant") {
			return nil, invalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
	}
	if m := messages[last]; m.Role == "assistant" && len(m.Content) > 0 {
		if b := m.Content[len(m.Content)-1]; b.Type == "text" && strings.TrimRightFunc(b.Text, isSpace) != b.Text {
			return nil, invalid("messages: final assistant content cannot end with trailing whitespace")
		}
	}
	return messages, nil
}

// parseContent reads one message's content: a string is one text block.
func parseContent(path string, raw json.RawMessage, role string, media *mediaCount) ([]Block, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, invalid("%s.content: Field required", path)
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		if s == "" {
			return nil, nil
		}
		if err := checkText("messages", s); err != nil {
			return nil, err
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalid("%s.content: Input should be a valid string or a list of content blocks", path)
	}
	blocks := make([]Block, 0, len(list))
	for j, rb := range list {
		b, err := parseBlock(fmt.Sprintf("%s.content.%d", path, j), rb, roleBlocks[role], media)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// parseBlock reads one content block of one of the allowed types, with only its own fields,
// its required ones present and of the right JSON types; text must not be empty; images,
// documents and tool_result content are checked in depth.
func parseBlock(path string, raw json.RawMessage, allowed []string, media *mediaCount) (Block, *apiError) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return Block{}, invalid("%s: Input should be a valid dictionary", path)
	}
	var typ string
	if json.Unmarshal(fields["type"], &typ) != nil || typ == "" {
		return Block{}, invalid("%s.type: Field required", path)
	}
	if !slices.Contains(allowed, typ) {
		return Block{}, invalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags: %s",
			path, typ, quoteAll(allowed))
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(blockFields[typ], k) {
			return Block{}, invalid("%s.%s.%s: Extra inputs are not permitted", path, typ, k)
		}
	}
	for _, k := range requiredFields[typ] {
		if _, ok := fields[k]; !ok {
			return Block{}, invalid("%s.%s.%s: Field required", path, typ, k)
		}
	}
	var b Block
	if err := json.Unmarshal(raw, &b); err != nil {
		return Block{}, invalid("%s.%s: %v", path, typ, err)
	}
	switch typ {
	case "text":
		if err := checkText(strings.SplitN(path, ".", 2)[0], b.Text); err != nil {
			return Block{}, err
		}
	case "tool_use":
		if in := bytes.TrimSpace(b.Input); len(in) == 0 || in[0] != '{' {
			return Block{}, invalid("%s.tool_use.input: Input should be a valid dictionary", path)
		}
	case "tool_result":
		if err := checkResultContent(path, b.Content, media); err != nil {
			return Block{}, err
		}
	case "image":
		if err := checkImage(path, b.Source, media); err != nil {
			return Block{}, err
		}
	case "document":
		if err := checkDocument(path, b.Source, media); err != nil {
			return Block{}, err
		}
	}
	return b, nil
}

// checkResultContent checks a tool_result's content: a string, or text, image and document
// blocks (agents-and-tools/tool-use/handle-tool-calls).
func checkResultContent(path string, raw json.RawMessage, media *mediaCount) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '"' {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return invalid("%s.tool_result.content: Input should be a valid string or a list of content blocks", path)
	}
	for k, rb := range list {
		if _, err := parseBlock(fmt.Sprintf("%s.tool_result.content.%d", path, k), rb, resultBlocks, media); err != nil {
			return err
		}
	}
	return nil
}

// checkText refuses empty and whitespace-only text blocks (api/errors, common validation
// errors).
func checkText(where, s string) *apiError {
	if s == "" {
		return invalid("%s: text content blocks must be non-empty", where)
	}
	if strings.TrimFunc(s, isSpace) == "" {
		return invalid("%s: text content blocks must contain non-whitespace text", where)
	}
	return nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + s + "'"
	}
	return strings.Join(q, ", ")
}

// checkToolUse checks the tool calls and results across messages
// (agents-and-tools/tool-use/handle-tool-calls): ids unique; names among the tools; every
// tool_use answered by a tool_result in the next message, the results first in it; every
// tool_result answering a tool_use of the message right before it.
func checkToolUse(req *Request) *apiError {
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Name] = true
	}
	seen := map[string]bool{}
	for i, m := range req.Messages {
		var calls []string
		for j, b := range m.Content {
			switch b.Type {
			case "tool_use", "tool_result":
				if len(req.Tools) == 0 {
					return invalid("Requests which include `tool_use` or `tool_result` blocks must define tools.")
				}
			}
			if b.Type != "tool_use" {
				continue
			}
			if seen[b.ID] {
				return invalid("messages.%d.content.%d: `tool_use` ids must be unique", i, j)
			}
			seen[b.ID] = true
			if !tools[b.Name] {
				return invalid("messages.%d.content.%d: tool_use.name: tool '%s' is not among the request's tools", i, j, b.Name)
			}
			calls = append(calls, b.ID)
		}
		if m.Role == "user" {
			if err := checkResults(req.Messages, i); err != nil {
				return err
			}
		}
		if len(calls) == 0 {
			continue
		}
		answered := map[string]bool{}
		if i+1 < len(req.Messages) {
			for _, b := range req.Messages[i+1].Content {
				if b.Type != "tool_result" {
					break // the results come first; one after other content answers nothing
				}
				answered[b.ToolUseID] = true
			}
		}
		var missing []string
		for _, id := range calls {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
				i, strings.Join(missing, ", "))
		}
	}
	return nil
}

// checkResults checks that every tool_result of user message i answers, once, a tool_use of
// message i-1.
func checkResults(messages []Message, i int) *apiError {
	calls := map[string]bool{}
	if i > 0 && messages[i-1].Role == "assistant" {
		for _, b := range messages[i-1].Content {
			if b.Type == "tool_use" {
				calls[b.ID] = true
			}
		}
	}
	for j, b := range messages[i].Content {
		if b.Type != "tool_result" {
			continue
		}
		if !calls[b.ToolUseID] {
			return invalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
				i, j, b.ToolUseID)
		}
		delete(calls, b.ToolUseID) // a second result for the same call is unexpected too
	}
	return nil
}

// checkToolChoice checks tool_choice: auto, any, tool (naming one of the tools) or none
// (agents-and-tools/tool-use/define-tools, "Forcing tool use").
func checkToolChoice(req *Request) *apiError {
	if len(req.ToolChoice) == 0 {
		return nil
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(req.ToolChoice, &tc) != nil {
		return invalid("tool_choice: Input should be a valid dictionary")
	}
	switch tc.Type {
	case "auto", "any", "none":
	case "tool":
		if !slices.ContainsFunc(req.Tools, func(t Tool) bool { return t.Name == tc.Name }) {
			return invalid("tool_choice.tool.name: tool '%s' is not among the request's tools", tc.Name)
		}
	default:
		return invalid("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type)
	}
	return nil
}

// checkSystemRole applies the rules of mid-conversation system messages
// (build-with-claude/mid-conversation-system-messages): only models that have them accept a
// role "system" message, and only right after a user turn.
func checkSystemRole(req *Request, midConversationSystem bool) *apiError {
	for i, m := range req.Messages {
		if m.Role != "system" {
			continue
		}
		if !midConversationSystem {
			return invalid("messages.%d.role: role 'system' is not supported on this model", i)
		}
		if i == 0 || req.Messages[i-1].Role != "user" {
			return invalid("messages.%d: a system message must immediately follow a user message", i)
		}
	}
	return nil
}
