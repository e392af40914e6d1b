package anthropic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// messagesAPI is a local stand-in for POST /v1/messages written from the public Messages API
// format: it checks the path, headers and request body the way the API does (400, 401 and 404
// in the API's error shape) and answers with the test's scripted reply.
type messagesAPI struct {
	path   string
	apiKey string // the x-api-key it accepts; when empty it wants Authorization: Bearer bearer
	bearer string
	reply  func(w http.ResponseWriter, r *http.Request, req apiRequest)

	mu   sync.Mutex
	seen []seenRequest
}

// seenRequest is one request that passed the checks.
type seenRequest struct {
	header http.Header
	body   []byte
	req    apiRequest
}

// apiRequest holds the body fields the API accepts that these tests (and the SDK) send.
type apiRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	Messages      []apiMessage    `json:"messages"`
	System        json.RawMessage `json:"system,omitempty"`
	Tools         []apiTool       `json:"tools,omitempty"`
	Stream        *bool           `json:"stream,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	Thinking      json.RawMessage `json:"thinking,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
}

type apiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type apiTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

const testKey, testToken = "sk-ant-test", "bearer-test"

// apiVersions are the anthropic-version values the server accepts: the one this client sends
// and the one SDK v2 sends.
var apiVersions = []string{"2023-06-01", "2026-10-21"}

// newAPI starts a server that accepts x-api-key testKey and replies with reply.
func newAPI(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, req apiRequest)) (*messagesAPI, *httptest.Server) {
	t.Helper()
	api := &messagesAPI{path: "/v1/messages", apiKey: testKey, reply: reply}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv
}

func (a *messagesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != a.path {
		writeError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "Method not allowed")
		return
	}
	if msg := a.checkAuth(r.Header); msg != "" {
		writeError(w, http.StatusUnauthorized, "authentication_error", msg)
		return
	}
	if v := r.Header.Get("anthropic-version"); !slices.Contains(apiVersions, v) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("anthropic-version: invalid version %q", v))
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "Content-Type must be application/json, got "+ct)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req, err := checkBody(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	a.mu.Lock()
	a.seen = append(a.seen, seenRequest{header: r.Header.Clone(), body: body, req: req})
	a.mu.Unlock()
	a.reply(w, r, req)
}

func (a *messagesAPI) checkAuth(h http.Header) string {
	if a.apiKey != "" {
		if h.Get("x-api-key") != a.apiKey {
			return "invalid x-api-key"
		}
		return ""
	}
	if h.Get("Authorization") != "Bearer "+a.bearer {
		return "invalid bearer token"
	}
	return ""
}

// requests returns the requests that passed the checks so far.
func (a *messagesAPI) requests() []seenRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// checkBody validates a request body like the API: unknown fields, required fields, roles and
// the block types each role may send. Messages name the field path as the API does.
func checkBody(body []byte) (apiRequest, error) {
	var req apiRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return apiRequest{}, fmt.Errorf("invalid request body: %v", err)
	}
	switch {
	case req.Model == "":
		return apiRequest{}, fmt.Errorf("model: Field required")
	case req.MaxTokens < 1:
		return apiRequest{}, fmt.Errorf("max_tokens: must be at least 1")
	case len(req.Messages) == 0:
		return apiRequest{}, fmt.Errorf("messages: at least one message is required")
	}
	if len(req.System) > 0 {
		if err := checkSystem(req.System); err != nil {
			return apiRequest{}, fmt.Errorf("system: %w", err)
		}
	}
	for i, m := range req.Messages {
		if err := checkMessage(m); err != nil {
			return apiRequest{}, fmt.Errorf("messages.%d.%w", i, err)
		}
	}
	for i, t := range req.Tools {
		var schema struct {
			Type string `json:"type"`
		}
		if !toolName.MatchString(t.Name) {
			return apiRequest{}, fmt.Errorf("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", i)
		}
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema.Type != "object" {
			return apiRequest{}, fmt.Errorf("tools.%d.input_schema.type: Input should be 'object'", i)
		}
	}
	return req, nil
}

func checkSystem(raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return fmt.Errorf("Input should be a valid string or list of text blocks")
	}
	for i, b := range blocks {
		if err := checkBlock(b, "text"); err != nil {
			return fmt.Errorf("%d.%w", i, err)
		}
	}
	return nil
}

// allowedBlocks lists the block types each role may send (images and documents are not used here).
var allowedBlocks = map[string][]string{
	"user":      {"text", "tool_result"},
	"assistant": {"text", "thinking", "redacted_thinking", "tool_use"},
}

func checkMessage(m apiMessage) error {
	allowed, ok := allowedBlocks[m.Role]
	if !ok {
		return fmt.Errorf("role: Input should be 'user' or 'assistant'")
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return nil
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return fmt.Errorf("content: Input should be a valid string or list")
	}
	for i, b := range blocks {
		if err := checkBlock(b, allowed...); err != nil {
			return fmt.Errorf("content.%d.%w", i, err)
		}
	}
	return nil
}

// requiredFields lists, per block type, the fields it must have and their JSON kinds.
var requiredFields = map[string]map[string]byte{
	"text":              {"text": '"'},
	"thinking":          {"thinking": '"', "signature": '"'},
	"redacted_thinking": {"data": '"'},
	"tool_use":          {"id": '"', "name": '"', "input": '{'},
	"tool_result":       {"tool_use_id": '"'},
}

func checkBlock(b map[string]json.RawMessage, allowed ...string) error {
	var typ string
	_ = json.Unmarshal(b["type"], &typ)
	if !slices.Contains(allowed, typ) {
		return fmt.Errorf("type: block type %q is not allowed here (expected one of %s)", typ, strings.Join(allowed, ", "))
	}
	for field, kind := range requiredFields[typ] {
		v := bytes.TrimSpace(b[field])
		if len(v) == 0 || v[0] != kind {
			return fmt.Errorf("%s.%s: Field required", typ, field)
		}
	}
	if typ != "tool_result" {
		return nil
	}
	if c, ok := b["content"]; ok {
		var s string
		if json.Unmarshal(c, &s) == nil {
			return nil
		}
		var blocks []map[string]json.RawMessage
		if err := json.Unmarshal(c, &blocks); err != nil {
			return fmt.Errorf("tool_result.content: Input should be a valid string or list")
		}
		for i, inner := range blocks {
			if err := checkBlock(inner, "text"); err != nil {
				return fmt.Errorf("tool_result.content.%d.%w", i, err)
			}
		}
	}
	return nil
}

// writeError writes the API's error shape.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_test_1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": "req_test_1",
	})
}

// message is a scripted assistant message, written the way the API returns it.
type message struct {
	content []map[string]any
	stop    string
	// usage is the final usage; startUsage is what message_start announces, deltaUsage what
	// message_delta carries (by default the input side from usage, then output_tokens).
	usage, startUsage, deltaUsage map[string]any
}

func (m message) body(model string) map[string]any {
	return map[string]any{
		"id": "msg_01TestMessage", "type": "message", "role": "assistant", "model": model,
		"content": m.content, "stop_reason": m.stop, "stop_sequence": nil, "usage": m.usage,
	}
}

// replyJSON answers a non-streaming call with m, and a streaming one with m's events.
func replyWith(m message) func(w http.ResponseWriter, r *http.Request, req apiRequest) {
	return func(w http.ResponseWriter, _ *http.Request, req apiRequest) {
		if req.Stream != nil && *req.Stream {
			sse := newSSE(w)
			for _, ev := range m.events(req.Model) {
				sse.send(ev.name, ev.data)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m.body(req.Model))
	}
}

type event struct {
	name string
	data map[string]any
}

// events is the stream the API sends for m: message_start, a ping, each block started,
// filled by small deltas and stopped, message_delta, message_stop.
func (m message) events(model string) []event {
	start := m.body(model)
	start["content"] = []any{}
	start["stop_reason"] = nil
	startUsage := m.startUsage
	if startUsage == nil {
		startUsage = map[string]any{"input_tokens": m.usage["input_tokens"], "output_tokens": 1}
	}
	start["usage"] = startUsage
	deltaUsage := m.deltaUsage
	if deltaUsage == nil {
		deltaUsage = map[string]any{"output_tokens": m.usage["output_tokens"]}
	}
	evs := []event{
		{"message_start", map[string]any{"type": "message_start", "message": start}},
		{"ping", map[string]any{"type": "ping"}},
	}
	for i, b := range m.content {
		evs = append(evs, blockEvents(i, b)...)
	}
	return append(evs,
		event{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": m.stop, "stop_sequence": nil}, "usage": deltaUsage}},
		event{"message_stop", map[string]any{"type": "message_stop"}},
	)
}

func blockEvents(i int, b map[string]any) []event {
	delta := func(d map[string]any) event {
		return event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}}
	}
	startBlock := map[string]any{}
	for k, v := range b {
		startBlock[k] = v
	}
	var deltas []event
	switch b["type"] {
	case "text":
		startBlock["text"] = ""
		for _, c := range chunks(b["text"].(string), 5) {
			deltas = append(deltas, delta(map[string]any{"type": "text_delta", "text": c}))
		}
	case "thinking":
		startBlock["thinking"], startBlock["signature"] = "", ""
		for _, c := range chunks(b["thinking"].(string), 7) {
			deltas = append(deltas, delta(map[string]any{"type": "thinking_delta", "thinking": c}))
		}
		deltas = append(deltas, delta(map[string]any{"type": "signature_delta", "signature": b["signature"]}))
	case "tool_use":
		startBlock["input"] = map[string]any{}
		input, _ := json.Marshal(b["input"])
		deltas = append(deltas, delta(map[string]any{"type": "input_json_delta", "partial_json": ""}))
		for _, c := range chunks(string(input), 3) {
			deltas = append(deltas, delta(map[string]any{"type": "input_json_delta", "partial_json": c}))
		}
	}
	evs := []event{{"content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": startBlock}}}
	evs = append(evs, deltas...)
	return append(evs, event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": i}})
}

// chunks cuts s into pieces of n characters (never inside a character, as the API does).
func chunks(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// sse writes server-sent events, flushing each one like the API.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w: w}
}

func (s sse) send(name string, data map[string]any) {
	b, _ := json.Marshal(data)
	s.raw(fmt.Sprintf("event: %s\ndata: %s\n\n", name, b))
}

func (s sse) raw(frame string) {
	_, _ = io.WriteString(s.w, frame)
	s.w.(http.Flusher).Flush()
}
