package upstream_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

func TestEnvelope(t *testing.T) {
	srv := upstream.Start(t)
	tests := []struct {
		name   string
		body   any
		edit   func(*http.Request)
		status int
		typ    string
		want   string
	}{
		{"another path", request(), func(r *http.Request) { r.URL.Path = "/v1/complete" }, 404, "not_found_error", "Not Found"},
		{"not a POST", request(), func(r *http.Request) { r.Method = http.MethodPut }, 405, "invalid_request_error", "Method Not Allowed"},
		{"no key", request(), func(r *http.Request) { r.Header.Del("x-api-key") }, 401, "authentication_error", "x-api-key header is required"},
		{"a wrong key", request(), func(r *http.Request) { r.Header.Set("x-api-key", "nope") }, 401, "authentication_error", "invalid x-api-key"},
		{"a wrong bearer token", request(), func(r *http.Request) {
			r.Header.Del("x-api-key")
			r.Header.Set("Authorization", "Bearer nope")
		}, 401, "authentication_error", "invalid x-api-key"},
		{"no anthropic-version", request(), func(r *http.Request) { r.Header.Del("anthropic-version") }, 400, "invalid_request_error", "anthropic-version: header is required"},
		{"an unknown anthropic-version", request(), func(r *http.Request) { r.Header.Set("anthropic-version", "2020-01-01") }, 400, "invalid_request_error", "anthropic-version: invalid version"},
		{"not JSON", request(), func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 400, "invalid_request_error", "Content-Type must be application/json"},
		{"malformed JSON", `{"model":`, nil, 400, "invalid_request_error", "error parsing the body"},
		{"an unknown field", with(request(), "temprature", 0.5), nil, 400, "invalid_request_error", "temprature: Extra inputs are not permitted"},
		{"no model", without(request(), "model"), nil, 400, "invalid_request_error", "model: Field required"},
		{"no max_tokens", without(request(), "max_tokens"), nil, 400, "invalid_request_error", "max_tokens: Field required"},
		{"an unknown model", with(request(), "model", "claude-nope-9"), nil, 404, "not_found_error", "model: claude-nope-9"},
		{"a Bedrock spelling of a model", with(request(), "model", "anthropic.claude-sonnet-4-5-20250929-v1:0"), nil, 404, "not_found_error", "model: anthropic."},
		{"max_tokens 0", with(request(), "max_tokens", 0), nil, 400, "invalid_request_error", "max_tokens: Input should be greater than or equal to 1"},
		{"max_tokens over the model's output limit", with(request(), "max_tokens", 64001), nil, 400, "invalid_request_error",
			"max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5"},
		{"no messages", with(request(), "messages", arr{}), nil, 400, "invalid_request_error", "messages: at least one message is required"},
		{"an unknown role", request(obj{"role": "tool", "content": "x"}), nil, 400, "invalid_request_error", "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{"a system role message first", request(obj{"role": "system", "content": "x"}), nil, 400, "invalid_request_error", `messages: first message must use the "user" role`},
		{"a system role message on a model without them", request(user("Hi"), obj{"role": "system", "content": "be brief"}), nil, 400, "invalid_request_error",
			"messages.1.role: role 'system' is not supported on this model"},
		{"a system role message after an assistant turn", with(request(user("Hi"), assistant("Hello"), obj{"role": "system", "content": "be brief"}), "model", "claude-opus-5"), nil, 400, "invalid_request_error",
			"messages.2: a system message must immediately follow a user message"},
		{"an assistant first", request(assistant("Hi"), user("Hello")), nil, 400, "invalid_request_error", `messages: first message must use the "user" role`},
		{"an extra message field", request(with(user("Hi"), "name", "bob")), nil, 400, "invalid_request_error", "messages.0.name: Extra inputs are not permitted"},
		{"an empty user content", request(user("")), nil, 400, "invalid_request_error", "messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{"an empty content list", request(user(arr{})), nil, 400, "invalid_request_error", "messages.0: all messages must have non-empty content"},
		{"an empty assistant in the middle", request(user("Hi"), assistant(arr{}), user("Hi")), nil, 400, "invalid_request_error", "messages.1: all messages must have non-empty content"},
		{"an empty text block", request(user(arr{text("")})), nil, 400, "invalid_request_error", "messages: text content blocks must be non-empty"},
		{"a whitespace text block", request(user(arr{text(" \n")})), nil, 400, "invalid_request_error", "messages: text content blocks must contain non-whitespace text"},
		{"a final assistant ending in whitespace", request(user("Hi"), assistant("The answer is ")), nil, 400, "invalid_request_error", "final assistant content cannot end with trailing whitespace"},
		{"a content that is neither string nor list", request(user(42)), nil, 400, "invalid_request_error", "messages.0.content: Input should be a valid string or a list"},
		{"a block field of another type", request(user(arr{with(text("Hi"), "signature", "x")})), nil, 400, "invalid_request_error", "messages.0.content.0.text.signature: Extra inputs are not permitted"},
		{"a block without its text", request(user(arr{obj{"type": "text"}})), nil, 400, "invalid_request_error", "messages.0.content.0.text.text: Field required"},
		{"a block type the API does not know", request(user(arr{obj{"type": "picture", "url": "x"}})), nil, 400, "invalid_request_error",
			"messages.0.content.0: Input tag 'picture' found using 'type' does not match any of the expected tags"},
		{"a tool_result from the assistant", request(user("Hi"), assistant(arr{toolResult("t", "x")})), nil, 400, "invalid_request_error",
			"messages.1.content.0: Input tag 'tool_result' found"},
		{"thinking from the user", request(user(arr{obj{"type": "thinking", "thinking": "x", "signature": "y"}})), nil, 400, "invalid_request_error",
			"messages.0.content.0: Input tag 'thinking' found"},
		{"a system of another block type", with(request(), "system", arr{obj{"type": "image", "source": obj{"type": "url", "url": "https://x"}}}), nil, 400, "invalid_request_error",
			"system.0: Input tag 'image' found"},
		{"an empty system text block", with(request(), "system", arr{text("")}), nil, 400, "invalid_request_error", "system: text content blocks must be non-empty"},
		{"a system of neither kind", with(request(), "system", 7), nil, 400, "invalid_request_error", "system: Input should be a valid string or a list of text blocks"},
		{"a temperature over 1", with(request(), "temperature", 1.5), nil, 400, "invalid_request_error", "temperature: Input should be between 0 and 1"},
		{"a negative top_p", with(request(), "top_p", -0.1), nil, 400, "invalid_request_error", "top_p: Input should be between 0 and 1"},
		{"a temperature that is not a number", with(request(), "temperature", "warm"), nil, 400, "invalid_request_error", "temperature: Input should be a valid number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit []func(*http.Request)
			if tt.edit != nil {
				edit = append(edit, tt.edit)
			}
			post(t, srv, tt.body, edit...).refused(t, tt.status, tt.typ, tt.want)
		})
	}
}

func TestEnvelopeAccepts(t *testing.T) {
	srv := upstream.Start(t)
	tests := []struct {
		name string
		body any
		edit func(*http.Request)
	}{
		{"a minimal request", request(), nil},
		{"a bearer token", request(), func(r *http.Request) {
			r.Header.Del("x-api-key")
			r.Header.Set("Authorization", "Bearer "+upstream.DefaultAPIKey)
		}},
		{"the SDK's anthropic-version", request(), func(r *http.Request) { r.Header.Set("anthropic-version", "2026-10-21") }},
		{"a dated model id", with(request(), "model", "claude-sonnet-4-5-20250929"), nil},
		{"max_tokens at the model's limit", with(request(), "max_tokens", 64000), nil},
		{"a prefilled (empty) final assistant message", request(user("Hi"), assistant(arr{})), nil},
		{"a prefilled final assistant message", request(user("Hi"), assistant("The answer is")), nil},
		{"two user messages in a row", request(user("Hi"), user("again")), nil},
		{"a string system", with(request(), "system", "Be brief."), nil},
		{"a system of text blocks", with(request(), "system", arr{text("Be brief."), text("Be kind.")}), nil},
		{"the documented optional fields", with(request(), "metadata", obj{"user_id": "u"}, "stop_sequences", arr{"END"}, "temperature", 0.2), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit []func(*http.Request)
			if tt.edit != nil {
				edit = append(edit, tt.edit)
			}
			post(t, srv, tt.body, edit...).ok(t)
		})
	}
}

func TestRequestTooLarge(t *testing.T) {
	t.Parallel() // the biggest bodies: let them overlap the rest
	srv := upstream.Start(t)
	// Built as bytes: encoding a 32 MB string is slow under the race detector.
	big := `{"model":"` + testModel + `","max_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("x", 32<<20) + `"}]}`
	post(t, srv, big).refused(t, 413, "request_too_large", "Request exceeds the maximum allowed number of bytes")
}

func TestRequestAsRead(t *testing.T) {
	var seen *upstream.Request
	srv := upstream.Start(t, upstream.WithScript(func(r *upstream.Request) upstream.Reply {
		seen = r
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "ok"}}}
	}))
	post(t, srv, with(request(user("Hi")), "system", "Be brief.", "tools", arr{tool("lookup")})).ok(t)
	require.NotNil(t, seen)
	require.Equal(t, testModel, seen.Model)
	require.Equal(t, 100, seen.MaxTokens)
	require.Equal(t, []upstream.Block{{Type: "text", Text: "Be brief."}}, seen.System)
	require.Equal(t, []upstream.Message{{Role: "user", Content: []upstream.Block{{Type: "text", Text: "Hi"}}}}, seen.Messages)
	require.Len(t, seen.Tools, 1)
	require.Equal(t, "lookup", seen.Tools[0].Name)
	require.Equal(t, "2023-06-01", seen.Header.Get("anthropic-version"))
	require.Contains(t, string(seen.Raw), `"Be brief."`)
}

func TestExchangesRecordRefusals(t *testing.T) {
	srv := upstream.Start(t)
	post(t, srv, request()).ok(t)
	post(t, srv, without(request(), "model")).refused(t, 400, "invalid_request_error", "model: Field required")
	ex := srv.Exchanges()
	require.Len(t, ex, 2)
	require.Equal(t, 200, ex[0].Status)
	require.Equal(t, "end_turn", ex[0].StopReason)
	require.Equal(t, []upstream.Block{{Type: "text", Text: "ok"}}, ex[0].Content)
	require.Equal(t, int64(2), ex[0].Usage.InputTokens) // "Hello"
	require.Equal(t, int64(1), ex[0].Usage.OutputTokens)
	require.Equal(t, 400, ex[1].Status)
	require.Equal(t, "model: Field required", ex[1].ErrorMessage)
	require.NotEmpty(t, ex[1].Request.Raw)
}

func TestMidConversationSystemMessage(t *testing.T) {
	var seen *upstream.Request
	srv := upstream.Start(t, upstream.WithScript(func(r *upstream.Request) upstream.Reply {
		seen = r
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "ok"}}}
	}))
	post(t, srv, with(request(user("Hi"), obj{"role": "system", "content": arr{obj{"type": "text", "text": "Answer in French."}}}), "model", "claude-opus-5")).ok(t)
	require.Len(t, seen.Messages, 2)
	require.Equal(t, "system", seen.Messages[1].Role)
	require.Equal(t, "Answer in French.", seen.Messages[1].Content[0].Text)
}
