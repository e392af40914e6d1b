// Package model defines the stateless model client the agent loop talks to: one request in,
// one complete assistant message out, optionally streamed as it is generated.
//
// Implementations live in sub-packages (fake, anthropic). This package must never import
// store, httpapi, sessions, workflow, Temporal or Kubernetes packages.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Block types used in messages.
const (
	BlockText             = "text"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockImage            = "image"
	BlockDocument         = "document"
)

// Stop reasons of a response.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
	StopRefusal   = "refusal"
	// StopContextWindow: generation stopped because the context window filled up
	// (stop_reason model_context_window_exceeded).
	StopContextWindow = "model_context_window_exceeded"
)

// Message is one turn of the conversation sent to the model.
type Message struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content []Block `json:"content"`
}

// Block is one content block. Only the fields of its Type are set.
type Block struct {
	Type string `json:"type"`
	// Text of a text block.
	Text string `json:"text,omitempty"`
	// Thinking text and its signature of a thinking block; Data is the opaque content of a
	// redacted_thinking block. Both go back to the model byte for byte.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// Source of an image or document block, in the Messages API's shape (base64, url or, for
	// documents, text), passed through unchanged; Title and Context of a document.
	Source  json.RawMessage `json:"source,omitempty"`
	Title   string          `json:"title,omitempty"`
	Context string          `json:"context,omitempty"`
	// ID, Name and Input of a tool_use block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError of a tool_result block.
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   []Block `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
	// Truncated marks a tool_use block the response was cut inside (stop reason max_tokens):
	// its Input is not the model's whole call and must never run.
	Truncated bool `json:"truncated,omitempty"`
}

// Tool is a tool offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model call.
type Request struct {
	Model     string    `json:"model"`
	System    string    `json:"system,omitempty"`
	Messages  []Message `json:"messages"`
	Tools     []Tool    `json:"tools,omitempty"`
	MaxTokens int       `json:"max_tokens"`
	// Thinking turns extended thinking on; nil leaves it off.
	Thinking *Thinking `json:"thinking,omitempty"`
	// Effort is the agent's effort level (low, medium, high, xhigh, max); "" sends none.
	Effort string `json:"effort,omitempty"`
	// Speed is "fast" for fast mode; "" or "standard" sends none.
	Speed string `json:"speed,omitempty"`
	// Cache asks the client to place prompt-cache breakpoints (clients without a cache
	// ignore it).
	Cache bool `json:"cache,omitempty"`
	// ToolChoice is "" (the model decides) or ToolChoiceNone (the tools are offered, so the
	// request keeps its cached prefix, but the model may not call them).
	ToolChoice string `json:"tool_choice,omitempty"`
}

// ToolChoiceNone forbids tool calls in a request that offers tools.
const ToolChoiceNone = "none"

// Thinking modes of a request, and the display that leaves the thinking text out of
// responses (the signature still carries it back to the model).
const (
	ThinkingAdaptive       = "adaptive"
	ThinkingEnabled        = "enabled"
	ThinkingDisplayOmitted = "omitted"
)

// Thinking configures extended thinking: Type adaptive (the model decides how much to think)
// or enabled with a BudgetTokens budget; Display, when set, how thinking text is returned.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// Usage is the token accounting of one call.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Response is the complete assistant message.
type Response struct {
	Content    []Block `json:"content"`
	StopReason string  `json:"stop_reason"`
	// StopDetails is the stop_details object the API sent with the stop reason (a refusal's
	// category and explanation), or nil.
	StopDetails json.RawMessage `json:"stop_details,omitempty"`
	Usage       Usage           `json:"usage"`
}

// Delta kinds of a stream.
const (
	// DeltaBlockStart announces content block Index of Type.
	DeltaBlockStart = "block_start"
	// DeltaText appends Text to text block Index.
	DeltaText = "text"
	// DeltaThinking appends Text to thinking block Index.
	DeltaThinking = "thinking"
	// DeltaBlockStop ends block Index.
	DeltaBlockStop = "block_stop"
)

// Delta is one piece of a streamed response, for previews only: the Response a stream
// returns is authoritative.
type Delta struct {
	Kind  string
	Index int
	// Type is the block type on DeltaBlockStart.
	Type string
	Text string
}

// Client calls a model. Implementations are stateless and safe for concurrent use.
type Client interface {
	// Create returns the complete response.
	Create(ctx context.Context, req Request) (Response, error)
	// Stream calls onDelta as the response is generated, then returns the complete response.
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}

// ErrorKind classifies model failures for retry decisions.
type ErrorKind string

// Kinds of model errors (API.md §5.5 maps them to session.error types).
const (
	ErrOverloaded  ErrorKind = "overloaded"   // 529: retryable
	ErrRateLimited ErrorKind = "rate_limited" // 429: retryable
	ErrServer      ErrorKind = "server"       // 5xx, timeouts, dropped connections: retryable
	ErrInvalid     ErrorKind = "invalid"      // other 4xx: not retryable
)

// Error is a failed model call.
type Error struct {
	Kind    ErrorKind
	Status  int
	Message string
	// PromptTooLong is set when the endpoint refused the request because the prompt does not
	// fit the model's context window ("prompt is too long"): compacting the conversation can
	// make it fit, retrying as it is cannot.
	PromptTooLong bool
	// RetryAfter is how long the endpoint asked the caller to wait before trying again
	// (retry-after / retry-after-ms on 429 and 529); zero when it did not say.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("model %s error (status %d): %s", e.Kind, e.Status, e.Message)
}

// Retryable reports whether trying again may succeed.
func (e *Error) Retryable() bool { return e.Kind != ErrInvalid }

// IsRetryable reports whether err is a model error worth retrying.
func IsRetryable(err error) bool {
	var me *Error
	return errors.As(err, &me) && me.Retryable()
}

type attemptKey struct{}

// WithAttempt marks calls made with ctx as try number n (1 = the first try) of one model call.
// Whoever owns retries sets it. A failed call leaves no trace in the conversation, so this is
// the only stateless way for a client (the fake model's /fail) to tell a retry from a first try.
func WithAttempt(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

// Attempt returns the try number recorded by WithAttempt, or 1 when none was recorded.
func Attempt(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok && n > 0 {
		return n
	}
	return 1
}
