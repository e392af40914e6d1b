package upstream_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// response is what one raw call answered.
type response struct {
	status  int
	header  http.Header
	raw     []byte
	errType string
	errMsg  string
	msg     map[string]any // a 200's JSON message
}

// usage reads the usage of a 200's JSON message.
func (r response) usage(t *testing.T) map[string]int64 {
	t.Helper()
	u, ok := r.msg["usage"].(map[string]any)
	require.True(t, ok, "no usage in %s", r.raw)
	out := map[string]int64{}
	for k, v := range u {
		if f, ok := v.(float64); ok {
			out[k] = int64(f)
		}
	}
	return out
}

// post sends body (a string, or anything JSON encodes) to the server with the default
// headers; edit changes the request before it is sent.
func post(t *testing.T, srv *upstream.Server, body any, edit ...func(*http.Request)) response {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL()+"/v1/messages", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("x-api-key", upstream.DefaultAPIKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	for _, e := range edit {
		e(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := response{status: resp.StatusCode, header: resp.Header}
	out.raw, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
			RequestID string `json:"request_id"`
		}
		require.NoError(t, json.Unmarshal(out.raw, &e), "error body %s", out.raw)
		require.Equal(t, "error", e.Type)
		require.True(t, strings.HasPrefix(e.RequestID, "req_"), "request_id in %s", out.raw)
		require.Equal(t, e.RequestID, resp.Header.Get("request-id"))
		out.errType, out.errMsg = e.Error.Type, e.Error.Message
		return out
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(out.raw, &out.msg))
	}
	return out
}

// ok asserts a 200.
func (r response) ok(t *testing.T) response {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s: %s", r.errType, r.errMsg)
	return r
}

// refused asserts a refusal with this status, type and a message containing want.
func (r response) refused(t *testing.T, status int, typ, want string) {
	t.Helper()
	require.Equal(t, status, r.status, "answered %s", r.raw)
	require.Equal(t, typ, r.errType)
	require.Contains(t, r.errMsg, want)
}

// obj is a JSON object literal.
type obj = map[string]any

// arr is a JSON array literal.
type arr = []any

// request is a minimal valid request: testModel, max_tokens 100, one user message.
func request(messages ...any) obj {
	if len(messages) == 0 {
		messages = arr{user("Hello")}
	}
	return obj{"model": testModel, "max_tokens": 100, "messages": arr(messages)}
}

func user(content any) obj      { return obj{"role": "user", "content": content} }
func assistant(content any) obj { return obj{"role": "assistant", "content": content} }
func text(s string) obj         { return obj{"type": "text", "text": s} }

func toolUse(id, name string) obj {
	return obj{"type": "tool_use", "id": id, "name": name, "input": obj{}}
}

func toolResult(id string, content any) obj {
	return obj{"type": "tool_result", "tool_use_id": id, "content": content}
}

// tool is a custom tool definition with an object schema.
func tool(name string) obj {
	return obj{"name": name, "description": "a tool", "input_schema": obj{"type": "object"}}
}

// with returns a copy of o with the fields set.
func with(o obj, kv ...any) obj {
	out := obj{}
	for k, v := range o {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// without returns a copy of o without the fields.
func without(o obj, keys ...string) obj {
	out := with(o)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// tokens is a string of exactly n tokens by the server's rule.
func tokens(n int) string { return strings.Repeat("abcd", n) }

// replyText is a Script that answers one text block.
func replyText(s string) upstream.Script {
	return func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: s}}}
	}
}
