// Package upstream is a strict local stand-in for the Anthropic Messages API
// (POST {URL}/v1/messages) for tests: it refuses what the real API refuses, with the status,
// error type and, where the documentation gives one, the message the real API answers, and
// otherwise answers with what the test's Script says the model generates, accounted (tokens,
// prompt cache, context window, max_tokens) the way the documentation describes. Our own
// model client (internal/model/anthropic) and the whole server (through the official SDK in
// internal/e2e) are run against it, so a request the real API would refuse fails a test here
// instead of a session in production.
//
// It is a normal package (not a _test.go file) because tests in several packages import it;
// it imports the standard library, the model catalog (models.go: limits and features per
// model) and testing, and nothing that runs in the server binary may import it.
//
// The rules, each checked in the file named and each with a test that fails without it
// (pages are under https://platform.claude.com/docs/en/):
//
//  1. Envelope (server.go: route, credentials, version, size; validate.go: the body;
//     api/messages, api/errors, api/versioning, api/overview): POST /v1/messages
//     only; an anthropic-version header; an API key as x-api-key or Authorization: Bearer
//     (401 authentication_error); a JSON body of at most 32 MB (413 request_too_large) with
//     no unknown top-level fields; model known to the catalog (404 not_found_error
//     "model: ID"); 1 ≤ max_tokens ≤ the model's output limit; messages non-empty, roles
//     user/assistant, the first one user; content a string or an array of blocks of the
//     types a role may send, each with only its own fields; text blocks non-empty; only the
//     final assistant message may be empty; system a string or an array of text blocks.
//  2. Tool use (validate.go; agents-and-tools/tool-use/handle-tool-calls,
//     agents-and-tools/tool-use/define-tools): tools named ^[a-zA-Z0-9_-]{1,64}$, uniquely,
//     with an object input_schema; tool_use ids unique; a tool_use's name among the tools;
//     every tool_use answered by a tool_result in the next (user) message, the tool_results
//     first in it; every tool_result answering a tool_use of the message before it.
//  3. Thinking, effort, speed (thinking.go; build-with-claude/extended-thinking,
//     build-with-claude/adaptive-thinking, build-with-claude/effort,
//     build-with-claude/fast-mode): thinking {type: enabled, budget_tokens ≥ 1024 and
//     < max_tokens} or {type: adaptive} or {type: disabled}, each only where the model
//     supports it; while a tool loop is in progress with thinking on, the last assistant
//     message starts with a thinking or redacted_thinking block (unless the server itself
//     produced it without one); every thinking signature and redacted_thinking data sent
//     back is byte for byte what this server produced (HMAC with a per-server key);
//     thinking.display summarized or omitted, omitted (the default of the adaptive-only
//     models) answering thinking blocks with an empty text and a signature, which come back
//     so;
//     output_config.effort low|medium|high|xhigh|max where the model has effort; speed
//     standard|fast, fast only on fast-mode models; with thinking on, no temperature but 1,
//     no top_k, top_p from 0.95 to 1 (and temperature and top_p within 0–1 always).
//  4. Images and documents (media.go; build-with-claude/vision,
//     build-with-claude/pdf-support): image sources base64 (image/jpeg, image/png,
//     image/gif, image/webp; valid base64 of at most 5 MB whose bytes are of the declared
//     type; at most 8000 px a side, 2000 px when more than 20 images) or url; at most 100
//     images a request; document sources base64 application/pdf (valid base64 of a PDF),
//     text/plain text, or url; the same inside tool_result content. The request body is at
//     most 32 MB (server.go).
//  5. Prompt caching (cache.go; build-with-claude/prompt-caching): see the comment there.
//  6. Context window (server.go; build-with-claude/context-windows, api/errors): a prompt
//     of more tokens than the window answers 400 "prompt is too long: N tokens > M maximum";
//     an answer that would overflow the window stops with model_context_window_exceeded.
//  7. Output (reply.go; build-with-claude/handling-stop-reasons): the reply is counted with
//     Tokens and cut at max_tokens (stop_reason max_tokens; a cut inside a tool_use leaves
//     its streamed input JSON incomplete); refusals carry stop_reason refusal and
//     stop_details.
//  8. Both a JSON message and, with "stream": true, server-sent events in the documented
//     shapes (stream.go; build-with-claude/streaming).
//
// Token counting is deterministic and deliberately simple, so tests can compute expected
// numbers: Tokens(s) is ceil(len(s)/4) bytes, and a block counts the Tokens of the text it
// carries (see blockTokens in tokens.go).
//
// For tests: WithClock and Server.Advance move the clock cache entries expire by;
// Server.Sign and Server.Seal make the thinking signatures and redacted_thinking data this
// server accepts, for conversations built by hand; a Script that answers what the API never
// would (a call of a tool the request does not define, thinking the request did not ask for)
// fails the test through t.Errorf and answers 500.
//
// Deliberately not modelled, so a test cannot rely on them: server tools, search results,
// Files API sources and container uploads (refused as block or tool types this stand-in does
// not know); system-role messages; PDF page counts; stop sequences (the Script cannot answer
// stop_sequence); the anthropic-beta header's values, except fast mode's. Where the
// documentation read did not settle a behaviour, the choice is written beside the code: a
// prompt that fits the window with too little room for max_tokens is answered and cut with
// model_context_window_exceeded, as the stop reason of the newer models says, rather than
// refused; a cut tool call's input in a JSON (not streamed) answer is {}; adaptive-only
// models still accept thinking {type: disabled}; omitted is the default display of every
// adaptive-only model of the catalog (documented for Opus 4.7 onward and Fable 5).
package upstream

import (
	"encoding/json"
	"net/http"
)

// Block is the JSON shape of a content block, in requests and responses. Only the fields of
// its Type are set.
type Block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// thinking; a Reply's Signature is ignored: the server signs every thinking block.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// redacted_thinking; a Reply's Data is wrapped (sealed) by the server before it is sent.
	Data string `json:"data,omitempty"`
	// tool_use; a Reply's empty ID is filled in by the server.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result: Content is a string or an array of blocks, as sent.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// image and document
	Source    json.RawMessage `json:"source,omitempty"`
	Title     string          `json:"title,omitempty"`
	Context   string          `json:"context,omitempty"`
	Citations json.RawMessage `json:"citations,omitempty"`
	// any block that may be a cache breakpoint
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// Message is one message of a request.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"` // a string content arrives as one text block
}

// Tool is one tool definition of a request.
type Tool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// Request is a request as the server read it. Fields are set as far as the request was read
// before it was refused; Raw and Header always are.
type Request struct {
	Model        string
	MaxTokens    int
	System       []Block // a string system arrives as one text block
	Messages     []Message
	Tools        []Tool
	ToolChoice   json.RawMessage
	Thinking     json.RawMessage
	OutputConfig json.RawMessage
	Speed        string
	Temperature  *float64
	TopP         *float64
	TopK         *int
	CacheControl json.RawMessage // the top-level (automatic) cache breakpoint
	Stream       bool
	Raw          []byte // the body as sent
	Header       http.Header
}

// Script decides what the model generates for each request that passed every check.
type Script func(req *Request) Reply

// Reply is what the model "generates" for one request.
type Reply struct {
	// Content is what the model generates. Thinking blocks get a signature from the server,
	// redacted_thinking data is sealed by it, tool_use blocks without an ID get one.
	Content []Block
	// StopReason is "" for end_turn, or tool_use if Content has tool_use blocks; "refusal"
	// (with StopDetails) is passed through. The server itself answers max_tokens or
	// model_context_window_exceeded when it cuts the reply.
	StopReason string
	// StopDetails is sent as stop_details; for a refusal without it the server sends
	// {"type":"refusal","category":null,"explanation":null}.
	StopDetails json.RawMessage
	// Status, if not zero, answers this HTTP error status instead (429, 500, 529 …) with an
	// error body of the documented shape; ErrorMessage is its message (a default if empty)
	// and RetryAfter, if set, its retry-after header in seconds.
	Status       int
	ErrorMessage string
	RetryAfter   int
	// StreamError, if set, is an error type (overloaded_error, api_error …) that ends a
	// streamed answer after its content blocks with an error event instead of message_delta
	// and message_stop, as the API's stream may fail after its 200 (build-with-claude/
	// streaming, "Error events"). ErrorMessage is its message. A JSON answer ignores it.
	StreamError string
}

// Exchange is one request and what the server answered, refused requests included.
type Exchange struct {
	Request      *Request
	Status       int
	ErrorMessage string // of the refusal, or of the error event that ended a stream
	Usage        Usage
	StopReason   string
	Content      []Block // the content answered (cut, signed), for a 200
}

// Usage is the token accounting of one answer: the prompt's tokens are
// CacheReadInputTokens + CacheCreationInputTokens + InputTokens.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens int64
	CacheReadInputTokens     int64
	// The split of CacheCreationInputTokens by the TTL of the breakpoint that wrote them.
	Ephemeral5mInputTokens int64
	Ephemeral1hInputTokens int64
}

// Tokens is the token count rule of this server: ceil(len(s)/4), len in bytes.
func Tokens(s string) int64 { return (int64(len(s)) + 3) / 4 }
