package anthropic_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

// The platform tests run the client against local stand-ins for Amazon Bedrock, Google Vertex
// AI and Microsoft Foundry. Each stand-in checks the URL, the authentication and the body the
// way its platform does, strictly, then validates what is left of the body as the Messages
// API does (checkBody) and answers with the scripted messages of client_test.go.

// platformSeen is one request a stand-in accepted.
type platformSeen struct {
	path   string
	header http.Header
	body   map[string]json.RawMessage
}

// platformLog records the accepted requests of a stand-in.
type platformLog struct {
	mu   sync.Mutex
	seen []platformSeen
}

func (l *platformLog) add(r *http.Request, body map[string]json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, platformSeen{path: r.URL.EscapedPath(), header: r.Header.Clone(), body: body})
}

func (l *platformLog) requests() []platformSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// platformBody checks a body that a platform takes with the model in the URL and the API
// version in the body: no "model", the version wanted, "stream" only where the platform keeps
// it. It returns the body's fields and the Messages request they make once the model is put
// back and the platform's own fields removed, validated like the API does.
func platformBody(raw []byte, modelName, version string, keepsStream, stream bool) (map[string]json.RawMessage, apiRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, apiRequest{}, fmt.Errorf("invalid request body: %v", err)
	}
	if _, ok := fields["model"]; ok {
		return nil, apiRequest{}, fmt.Errorf("model: Extra inputs are not permitted (the model is in the URL)")
	}
	var got string
	if err := json.Unmarshal(fields["anthropic_version"], &got); err != nil || got != version {
		return nil, apiRequest{}, fmt.Errorf("anthropic_version: must be %q, got %s", version, fields["anthropic_version"])
	}
	_, hasStream := fields["stream"]
	switch {
	case !keepsStream && hasStream:
		return nil, apiRequest{}, fmt.Errorf("stream: Extra inputs are not permitted")
	case keepsStream && hasStream != stream:
		return nil, apiRequest{}, fmt.Errorf("stream: must be set exactly on streaming calls, got %s", fields["stream"])
	}
	rest := map[string]json.RawMessage{}
	for k, v := range fields {
		if k != "anthropic_version" && k != "anthropic_beta" {
			rest[k] = v
		}
	}
	rest["model"], _ = json.Marshal(modelName)
	body, _ := json.Marshal(rest)
	req, err := checkBody(body)
	return fields, req, err
}

// messageBody answers a non-streaming call with m, in the API's JSON.
func messageBody(w http.ResponseWriter, m message, modelName string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m.body(modelName))
}

func TestProviderIsExclusiveWithAnthropicOptions(t *testing.T) {
	t.Parallel()
	p, err := anthropic.Foundry(anthropic.FoundryOptions{Resource: "res", APIKey: "k"})
	require.NoError(t, err)
	for _, opt := range []anthropic.Option{
		anthropic.WithAPIKey(testKey), anthropic.WithBearerToken(testToken), anthropic.WithBaseURL("https://gateway.example"),
	} {
		_, err := anthropic.New(anthropic.WithProvider(p), opt)
		require.ErrorContains(t, err, "is for the Anthropic provider")
	}
	_, err = anthropic.New(anthropic.WithProvider(p))
	require.NoError(t, err)
}

// TestGatewayHeaders: a gateway is the Anthropic provider with a base URL, a bearer token
// and the extra headers the gateway wants, all sent on every call.
func TestGatewayHeaders(t *testing.T) {
	t.Parallel()
	api := &messagesAPI{path: "/gw/v1/messages", bearer: testToken, reply: replyWith(scripted[0].msg)}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c, err := anthropic.New(anthropic.WithBaseURL(srv.URL+"/gw"), anthropic.WithBearerToken(testToken),
		anthropic.WithHeader("X-Gateway-Team", "agents"), anthropic.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	_, err = c.Stream(t.Context(), simpleRequest(), nil)
	require.NoError(t, err)
	seen := api.requests()
	require.Len(t, seen, 1)
	require.Equal(t, "agents", seen[0].header.Get("X-Gateway-Team"))
	require.Equal(t, "Bearer "+testToken, seen[0].header.Get("Authorization"))
	require.Empty(t, seen[0].header.Get("x-api-key"))
}

// requireSameBody compares a body field with JSON.
func requireJSONField(t *testing.T, fields map[string]json.RawMessage, key, want string) {
	t.Helper()
	raw, ok := fields[key]
	require.True(t, ok, "body has %s", key)
	require.JSONEq(t, want, string(raw), key)
}

// noFieldsBut reports the keys of fields that are not in allowed.
func noFieldsBut(fields map[string]json.RawMessage, allowed ...string) []string {
	var extra []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return extra
}

// modelErrorOf returns err's *model.Error.
func modelErrorOf(t *testing.T, err error) *model.Error {
	t.Helper()
	var me *model.Error
	require.ErrorAs(t, err, &me)
	return me
}
