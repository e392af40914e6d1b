package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/model"
)

// statusOverloaded is the API's non-standard "overloaded" status.
const statusOverloaded = 529

// errorBody is the API's error shape, in error responses and in mid-stream error events:
// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_..."}.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// statusOfType is the HTTP status the API uses for each error type, for errors that arrive
// inside a 200 stream.
var statusOfType = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      statusOverloaded,
}

// kindOf classifies a status and error type for the caller's retry decision.
func kindOf(status int, errType string) model.ErrorKind {
	switch {
	case status == statusOverloaded || errType == "overloaded_error":
		return model.ErrOverloaded
	case status == http.StatusTooManyRequests:
		return model.ErrRateLimited
	// 408 is the server giving up waiting for the request: a timeout, so worth retrying.
	case status >= 500 || status == http.StatusRequestTimeout:
		return model.ErrServer
	default:
		return model.ErrInvalid
	}
}

// statusError reads a non-2xx response into a *model.Error.
func statusError(resp *http.Response, now time.Time) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body errorBody
	_ = json.Unmarshal(raw, &body) // a proxy's HTML page is no API error; the raw text is used instead
	if body.RequestID == "" {
		body.RequestID = resp.Header.Get("request-id")
	}
	return &model.Error{
		Kind:          kindOf(resp.StatusCode, body.Error.Type),
		Status:        resp.StatusCode,
		Message:       errorMessage(body, raw, resp.StatusCode),
		RetryAfter:    retryAfter(resp.Header, now),
		PromptTooLong: promptTooLong(resp.StatusCode, body),
	}
}

// promptTooLong tells the context-window refusal from other invalid requests. The Messages
// API answers a prompt that does not fit with 400 invalid_request_error "prompt is too long:
// N tokens > M maximum" (platform.claude.com/docs/en/build-with-claude/context-windows); its
// message is the only mark it has.
func promptTooLong(status int, body errorBody) bool {
	return status == http.StatusBadRequest && body.Error.Type == "invalid_request_error" &&
		strings.Contains(strings.ToLower(body.Error.Message), "prompt is too long")
}

// streamError converts the data of a mid-stream error event. Unknown types count as server
// errors: the request was accepted, so it was not the request that was wrong.
func streamError(data []byte) error {
	var body errorBody
	if err := json.Unmarshal(data, &body); err != nil {
		return protocolError("error event: %v", err)
	}
	status, ok := statusOfType[body.Error.Type]
	kind := model.ErrServer
	if ok {
		kind = kindOf(status, body.Error.Type)
	}
	return &model.Error{Kind: kind, Status: status, Message: errorMessage(body, data, status), PromptTooLong: promptTooLong(status, body)}
}

// errorMessage prefers the API's own words, then the raw body, then the status text.
func errorMessage(body errorBody, raw []byte, status int) string {
	msg := body.Error.Message
	if body.Error.Type != "" {
		msg = strings.TrimSpace(body.Error.Type + ": " + msg)
	}
	if msg == "" {
		msg = strings.TrimSpace(truncate(string(raw), 500))
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	if body.RequestID != "" {
		msg += " (request " + body.RequestID + ")"
	}
	return msg
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// maxRetryAfter ignores absurd waits (a buggy header must not park a session for days).
const maxRetryAfter = time.Hour

// retryAfter reads retry-after-ms, then retry-after (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if d, ok := seconds(v, time.Millisecond); ok {
			return d
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if d, ok := seconds(v, time.Second); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d <= maxRetryAfter {
			return d
		}
	}
	return 0
}

func seconds(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f*float64(unit) > float64(maxRetryAfter) {
		return 0, false
	}
	return time.Duration(f * float64(unit)), true
}

// protocolError is a stream the client cannot make sense of: a server fault, worth a retry.
func protocolError(format string, args ...any) error {
	return &model.Error{Kind: model.ErrServer, Message: "malformed stream: " + fmt.Sprintf(format, args...)}
}
