package anthropic_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

// wantError is the *model.Error a failed call must return.
type wantError struct {
	kind       model.ErrorKind
	status     int
	message    string
	retryAfter time.Duration
}

func requireModelError(t *testing.T, err error, want wantError) {
	t.Helper()
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, want.kind, me.Kind, me.Error())
	require.Equal(t, want.status, me.Status, me.Error())
	require.Contains(t, me.Message, want.message)
	require.Equal(t, want.retryAfter, me.RetryAfter)
	require.Equal(t, want.kind != model.ErrInvalid, model.IsRetryable(err))
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	apiError := func(status int, typ, msg string, header ...string) func(http.ResponseWriter, *http.Request, apiRequest) {
		return func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			writeError(w, status, typ, msg)
		}
	}
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, *http.Request, apiRequest)
		want  wantError
	}{
		{name: "429 with retry-after seconds",
			reply: apiError(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "retry-after", "7"),
			want: wantError{kind: model.ErrRateLimited, status: 429, retryAfter: 7 * time.Second,
				message: "rate_limit_error: Number of request tokens has exceeded your per-minute rate limit (request req_test_1)"}},
		{name: "429 with retry-after-ms",
			reply: apiError(429, "rate_limit_error", "slow down", "retry-after-ms", "1500", "retry-after", "2"),
			want:  wantError{kind: model.ErrRateLimited, status: 429, retryAfter: 1500 * time.Millisecond, message: "slow down"}},
		{name: "529 overloaded",
			reply: apiError(529, "overloaded_error", "Overloaded"),
			want:  wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
		{name: "overloaded_error under another status",
			reply: apiError(503, "overloaded_error", "Overloaded"),
			want:  wantError{kind: model.ErrOverloaded, status: 503, message: "Overloaded"}},
		{name: "500 api_error",
			reply: apiError(500, "api_error", "Internal server error"),
			want:  wantError{kind: model.ErrServer, status: 500, message: "api_error: Internal server error"}},
		{name: "502 from a proxy with an HTML body",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte("<html><body>Bad gateway</body></html>"))
			},
			want: wantError{kind: model.ErrServer, status: 502, message: "<html><body>Bad gateway</body></html>"}},
		{name: "503 with an empty body",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				w.WriteHeader(http.StatusServiceUnavailable)
			},
			want: wantError{kind: model.ErrServer, status: 503, message: "Service Unavailable"}},
		{name: "408 is a timeout",
			reply: apiError(408, "timeout_error", "Request timed out"),
			want:  wantError{kind: model.ErrServer, status: 408, message: "Request timed out"}},
		{name: "400 with an error body",
			reply: apiError(400, "invalid_request_error", "messages.0.content: Field required"),
			want:  wantError{kind: model.ErrInvalid, status: 400, message: "invalid_request_error: messages.0.content: Field required"}},
		{name: "403 permission",
			reply: apiError(403, "permission_error", "Your API key does not have permission"),
			want:  wantError{kind: model.ErrInvalid, status: 403, message: "permission_error"}},
		{name: "413 too large",
			reply: apiError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes"),
			want:  wantError{kind: model.ErrInvalid, status: 413, message: "request_too_large"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newAPI(t, tt.reply)
			c := newClient(t, srv)
			_, err := c.Create(t.Context(), simpleRequest())
			requireModelError(t, err, tt.want)
			_, err = c.Stream(t.Context(), simpleRequest(), func(model.Delta) {})
			requireModelError(t, err, tt.want)
		})
	}
}

func TestStreamFailures(t *testing.T) {
	t.Parallel()
	// started writes the opening of a text answer, so failures happen mid-stream.
	started := func(w http.ResponseWriter) sse {
		s := newSSE(w)
		for _, ev := range scripted[0].msg.events("m")[:4] {
			s.send(ev.name, ev.data)
		}
		return s
	}
	errorEvent := func(typ, msg string) func(http.ResponseWriter, *http.Request, apiRequest) {
		return func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
			started(w).send("error", map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		}
	}
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, *http.Request, apiRequest)
		want  wantError
	}{
		{name: "mid-stream overloaded_error", reply: errorEvent("overloaded_error", "Overloaded"),
			want: wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
		{name: "mid-stream api_error", reply: errorEvent("api_error", "Internal server error"),
			want: wantError{kind: model.ErrServer, status: 500, message: "api_error: Internal server error"}},
		{name: "mid-stream error of an unknown type", reply: errorEvent("brand_new_error", "?"),
			want: wantError{kind: model.ErrServer, message: "brand_new_error: ?"}},
		{name: "mid-stream invalid_request_error", reply: errorEvent("invalid_request_error", "prompt is too long"),
			want: wantError{kind: model.ErrInvalid, status: 400, message: "prompt is too long"}},
		{name: "connection dropped mid-stream",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				started(w).raw("event: content_block_delta\ndata: {\"type\":\"content_blo")
				panic(http.ErrAbortHandler) // closes the connection without ending the chunked body
			},
			want: wantError{kind: model.ErrServer, message: "unexpected EOF"}},
		{name: "stream ends before message_stop",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) { started(w) },
			want:  wantError{kind: model.ErrServer, message: "stream ended before message_stop"}},
		{name: "tool input that is not JSON",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				s := newSSE(w)
				s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
					"content_block": map[string]any{"type": "tool_use", "id": "toolu_x", "name": "bash", "input": map[string]any{}}})
				s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": `{"command": "l`}})
				s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
				// Only a max_tokens stop explains an incomplete input; tool_use does not.
				s.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}})
				s.send("message_stop", map[string]any{"type": "message_stop"})
			},
			want: wantError{kind: model.ErrServer, message: `malformed stream: tool_use block toolu_x: input is not valid JSON: {"command": "l`}},
		{name: "delta for a block that never started",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				newSSE(w).send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 3,
					"delta": map[string]any{"type": "text_delta", "text": "x"}})
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: content_block_delta for content block 3 that never started"}},
		{name: "text delta for a tool_use block",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				s := newSSE(w)
				s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
					"content_block": map[string]any{"type": "tool_use", "id": "toolu_x", "name": "bash", "input": map[string]any{}}})
				s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
					"delta": map[string]any{"type": "text_delta", "text": "x"}})
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: text_delta for tool_use block 0"}},
		{name: "block started twice",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				s := newSSE(w)
				for range 2 {
					s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
						"content_block": map[string]any{"type": "text", "text": ""}})
				}
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: content block 0 started twice"}},
		{name: "delta after the block stopped",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				s := newSSE(w)
				s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
					"content_block": map[string]any{"type": "text", "text": ""}})
				s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
				s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
					"delta": map[string]any{"type": "text_delta", "text": "late"}})
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: content_block_delta for content block 0 after its stop"}},
		{name: "event data that is not JSON",
			reply: func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
				newSSE(w).raw("event: message_start\ndata: {oops\n\n")
			},
			want: wantError{kind: model.ErrServer, message: "malformed stream: message_start event: invalid character"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newAPI(t, tt.reply)
			_, err := newClient(t, srv).Stream(t.Context(), simpleRequest(), func(model.Delta) {})
			requireModelError(t, err, tt.want)
		})
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()

	t.Run("own timeout", func(t *testing.T) {
		t.Parallel()
		_, srv := newAPI(t, func(w http.ResponseWriter, r *http.Request, _ apiRequest) {
			newSSE(w).send("ping", map[string]any{"type": "ping"})
			<-r.Context().Done() // never finishes: only the client's timeout ends the call
		})
		c := newClient(t, srv, anthropic.WithTimeout(50*time.Millisecond))
		_, err := c.Stream(t.Context(), simpleRequest(), nil)
		requireModelError(t, err, wantError{kind: model.ErrServer, message: "the stream was silent for 50ms"})
	})

	t.Run("a stream longer than the timeout is not cut while it speaks", func(t *testing.T) {
		t.Parallel()
		_, srv := newAPI(t, func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
			s := newSSE(w)
			for range 8 { // 8 × 30ms: longer than the timeout, never silent for it
				s.send("ping", map[string]any{"type": "ping"})
				time.Sleep(30 * time.Millisecond)
			}
			s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"usage": map[string]any{"input_tokens": 1}}})
			s.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}})
			s.send("message_stop", map[string]any{"type": "message_stop"})
		})
		c := newClient(t, srv, anthropic.WithTimeout(150*time.Millisecond))
		resp, err := c.Stream(t.Context(), simpleRequest(), nil)
		require.NoError(t, err)
		require.Equal(t, model.StopEndTurn, resp.StopReason)
	})

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c := newClient(t, srv)
		_, err := c.Create(t.Context(), simpleRequest())
		requireModelError(t, err, wantError{kind: model.ErrServer, message: "connect"})
	})

	t.Run("truncated JSON body", func(t *testing.T) {
		t.Parallel()
		_, srv := newAPI(t, func(w http.ResponseWriter, _ *http.Request, _ apiRequest) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"content":[{"type":"text","te`))
		})
		_, err := newClient(t, srv).Create(t.Context(), simpleRequest())
		requireModelError(t, err, wantError{kind: model.ErrServer, message: "malformed response body"})
	})
}
