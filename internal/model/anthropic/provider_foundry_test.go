package anthropic_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

const (
	foundryKey        = "foundry-test-key-0123456789abcdef"
	foundryToken      = "eyJ0eXAiOiJKV1QiLCJhbGciOi.entra-test"
	foundryDeployment = "my-claude-deployment"
)

// foundryAPI is a local stand-in for Claude in Microsoft Foundry: the Messages API under
// /anthropic/v1/messages, with the deployment name as the model, taking the resource's key
// in api-key or an Entra ID token as the bearer.
type foundryAPI struct {
	apiKey string // the api-key it accepts; when empty it wants Authorization: Bearer foundryToken
	reply  func(w http.ResponseWriter, stream bool, req apiRequest)
	platformLog
}

func (a *foundryAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/anthropic/v1/messages" || r.Method != http.MethodPost {
		writeError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.URL.Path)
		return
	}
	switch {
	case a.apiKey != "" && r.Header.Get("api-key") != a.apiKey,
		a.apiKey == "" && r.Header.Get("Authorization") != "Bearer "+foundryToken,
		a.apiKey == "" && r.Header.Get("api-key") != "":
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid credentials")
		return
	}
	if r.Header.Get("x-api-key") != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "an Anthropic API key has no place here")
		return
	}
	if v := r.Header.Get("anthropic-version"); v != anthropic.APIVersion {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: invalid version "+v)
		return
	}
	req, err := checkBody(body)
	if err == nil && req.Model != foundryDeployment {
		err = errors.New("model: deployment " + req.Model + " not found")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields)
	a.add(r, fields)
	a.reply(w, req.Stream != nil && *req.Stream, req)
}

func newFoundryClient(t *testing.T, api *foundryAPI, o anthropic.FoundryOptions) *anthropic.Client {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	o.BaseURL = srv.URL + "/anthropic/"
	p, err := anthropic.Foundry(o)
	require.NoError(t, err)
	c, err := anthropic.New(anthropic.WithProvider(p), anthropic.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	return c
}

func foundryRequest() model.Request {
	req := simpleRequest()
	req.Model = foundryDeployment
	return req
}

func TestFoundryReplies(t *testing.T) {
	t.Parallel()
	auths := []struct {
		name   string
		apiKey string
		opts   anthropic.FoundryOptions
	}{
		{name: "API key", apiKey: foundryKey, opts: anthropic.FoundryOptions{APIKey: foundryKey}},
		{name: "Entra ID", opts: anthropic.FoundryOptions{Tokens: (&fakeTokens{token: foundryToken}).get}},
	}
	for _, auth := range auths {
		for _, tt := range scripted {
			t.Run(auth.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				api := &foundryAPI{apiKey: auth.apiKey, reply: sseReply(tt.msg, foundryDeployment)}
				c := newFoundryClient(t, api, auth.opts)
				created, err := c.Create(t.Context(), foundryRequest())
				require.NoError(t, err)
				require.Equal(t, tt.want, created)
				var deltas []model.Delta
				streamed, err := c.Stream(t.Context(), foundryRequest(), func(d model.Delta) { deltas = append(deltas, d) })
				require.NoError(t, err)
				require.Equal(t, tt.want, streamed)
				requireDeltasMatch(t, streamed.Content, deltas)
				require.Len(t, api.requests(), 2)
			})
		}
	}
}

func TestFoundryAuthentication(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		apiKey string
		opts   anthropic.FoundryOptions
		want   *wantError
	}{
		{name: "wrong key", apiKey: foundryKey, opts: anthropic.FoundryOptions{APIKey: "other"},
			want: &wantError{kind: model.ErrInvalid, status: 401, message: "authentication_error"}},
		{name: "token where a key is wanted", apiKey: foundryKey, opts: anthropic.FoundryOptions{Tokens: (&fakeTokens{token: foundryToken}).get},
			want: &wantError{kind: model.ErrInvalid, status: 401, message: "authentication_error"}},
		{name: "key where a token is wanted", opts: anthropic.FoundryOptions{APIKey: foundryKey},
			want: &wantError{kind: model.ErrInvalid, status: 401, message: "authentication_error"}},
		{name: "wrong token", opts: anthropic.FoundryOptions{Tokens: (&fakeTokens{token: "eyJ.other"}).get},
			want: &wantError{kind: model.ErrInvalid, status: 401, message: "authentication_error"}},
		{name: "token source fails", opts: anthropic.FoundryOptions{Tokens: (&fakeTokens{err: errors.New("AADSTS700016")}).get},
			want: &wantError{kind: model.ErrServer, message: "foundry: get an access token: AADSTS700016"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &foundryAPI{apiKey: tt.apiKey, reply: sseReply(scripted[0].msg, foundryDeployment)}
			c := newFoundryClient(t, api, tt.opts)
			_, err := c.Stream(t.Context(), foundryRequest(), nil)
			requireModelError(t, err, *tt.want)
			require.Empty(t, api.requests())
		})
	}
}

func TestFoundryErrors(t *testing.T) {
	t.Parallel()
	apiError := func(status int, typ, msg string) func(http.ResponseWriter, bool, apiRequest) {
		return func(w http.ResponseWriter, _ bool, _ apiRequest) { writeError(w, status, typ, msg) }
	}
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, bool, apiRequest)
		want  wantError
	}{
		{name: "429", reply: apiError(429, "rate_limit_error", "slow down"),
			want: wantError{kind: model.ErrRateLimited, status: 429, message: "rate_limit_error: slow down"}},
		{name: "529", reply: apiError(529, "overloaded_error", "Overloaded"),
			want: wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
		{name: "500", reply: apiError(500, "api_error", "Internal server error"),
			want: wantError{kind: model.ErrServer, status: 500, message: "api_error: Internal server error"}},
		{name: "400", reply: apiError(400, "invalid_request_error", "max_tokens: too large"),
			want: wantError{kind: model.ErrInvalid, status: 400, message: "invalid_request_error: max_tokens: too large"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newFoundryClient(t, &foundryAPI{apiKey: foundryKey, reply: tt.reply}, anthropic.FoundryOptions{APIKey: foundryKey})
			_, err := c.Create(t.Context(), foundryRequest())
			requireModelError(t, err, tt.want)
			_, err = c.Stream(t.Context(), foundryRequest(), nil)
			requireModelError(t, err, tt.want)
		})
	}
}

func TestFoundryOptions(t *testing.T) {
	t.Parallel()
	p, err := anthropic.Foundry(anthropic.FoundryOptions{Resource: "my-resource", APIKey: foundryKey})
	require.NoError(t, err)
	req, err := p.Request(t.Context(), anthropic.Call{Model: foundryDeployment, Body: []byte(`{}`), Header: http.Header{}})
	require.NoError(t, err)
	require.Equal(t, "https://my-resource.services.ai.azure.com/anthropic/v1/messages", req.URL.String())
	require.Equal(t, foundryKey, req.Header.Get("api-key"))

	tokens := (&fakeTokens{token: foundryToken}).get
	for _, bad := range []anthropic.FoundryOptions{
		{Resource: "my-resource"},                                     // no credentials
		{Resource: "my-resource", APIKey: foundryKey, Tokens: tokens}, // both credentials
		{APIKey: foundryKey},                                          // no endpoint
		{Resource: "my-resource", BaseURL: "https://x.example/anthropic", APIKey: foundryKey},
		{Resource: "bad.resource/x", APIKey: foundryKey},
		{BaseURL: "x.example/anthropic", APIKey: foundryKey},
	} {
		_, err := anthropic.Foundry(bad)
		require.Error(t, err, "%+v", bad)
	}
}
