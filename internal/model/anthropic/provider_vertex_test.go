package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
)

const (
	vertexProject = "agents-test-project"
	vertexRegion  = "us-east5"
	vertexModel   = "claude-test-1@20260101"
	vertexToken   = "ya29.vertex-test-token"
)

// vertexAPI is a local stand-in for rawPredict and streamRawPredict of Claude on Vertex AI:
// the model and the method in the URL, a Google access token as the bearer, the version in
// the body; errors in Google's shape when it is the platform that refuses.
type vertexAPI struct {
	reply func(w http.ResponseWriter, stream bool, req apiRequest)
	platformLog
}

func (a *vertexAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	prefix := "/v1/projects/" + vertexProject + "/locations/" + vertexRegion + "/publishers/anthropic/models/" + vertexModel + ":"
	method, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok || (method != "rawPredict" && method != "streamRawPredict") || r.Method != http.MethodPost {
		writeGoogleError(w, http.StatusNotFound, "NOT_FOUND", "Publisher Model `"+r.URL.Path+"` was not found")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+vertexToken {
		writeGoogleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	if v := r.Header.Get("anthropic-version"); v != "" {
		writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic-version belongs in the body, got header "+v)
		return
	}
	stream := method == "streamRawPredict"
	fields, req, err := platformBody(body, vertexModel, anthropic.VertexVersion, true, stream)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	a.add(r, fields)
	a.reply(w, stream, req)
}

func writeGoogleError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

// sseReply answers with m as the Anthropic API does: JSON, or server-sent events.
func sseReply(m message, modelName string) func(http.ResponseWriter, bool, apiRequest) {
	return func(w http.ResponseWriter, stream bool, _ apiRequest) {
		if !stream {
			messageBody(w, m, modelName)
			return
		}
		s := newSSE(w)
		for _, ev := range m.events(modelName) {
			s.send(ev.name, ev.data)
		}
	}
}

// fakeTokens is a token source that counts its calls.
type fakeTokens struct {
	calls atomic.Int32
	token string
	err   error
}

func (f *fakeTokens) get(context.Context) (string, error) {
	f.calls.Add(1)
	return f.token, f.err
}

func newVertexClient(t *testing.T, api *vertexAPI, tokens *fakeTokens) *anthropic.Client {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	p, err := anthropic.Vertex(anthropic.VertexOptions{Region: vertexRegion, ProjectID: vertexProject, BaseURL: srv.URL, Tokens: tokens.get})
	require.NoError(t, err)
	c, err := anthropic.New(anthropic.WithProvider(p), anthropic.WithHTTPClient(srv.Client()), anthropic.WithHeader("anthropic-beta", "beta-one"))
	require.NoError(t, err)
	return c
}

func vertexRequest() model.Request {
	req := simpleRequest()
	req.Model = vertexModel
	return req
}

func TestVertexReplies(t *testing.T) {
	t.Parallel()
	for _, tt := range scripted {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &vertexAPI{reply: sseReply(tt.msg, vertexModel)}
			tokens := &fakeTokens{token: vertexToken}
			c := newVertexClient(t, api, tokens)

			created, err := c.Create(t.Context(), vertexRequest())
			require.NoError(t, err)
			require.Equal(t, tt.want, created)
			var deltas []model.Delta
			streamed, err := c.Stream(t.Context(), vertexRequest(), func(d model.Delta) { deltas = append(deltas, d) })
			require.NoError(t, err)
			require.Equal(t, tt.want, streamed)
			requireDeltasMatch(t, streamed.Content, deltas)

			seen := api.requests()
			require.Len(t, seen, 2)
			require.True(t, strings.HasSuffix(seen[0].path, "/models/"+vertexModel+":rawPredict"), seen[0].path)
			require.True(t, strings.HasSuffix(seen[1].path, "/models/"+vertexModel+":streamRawPredict"), seen[1].path)
			require.Empty(t, noFieldsBut(seen[0].body, "anthropic_version", "max_tokens", "messages"))
			require.Empty(t, noFieldsBut(seen[1].body, "anthropic_version", "max_tokens", "messages", "stream"))
			for _, s := range seen {
				require.Equal(t, "beta-one", s.header.Get("anthropic-beta"), "Vertex takes betas as a header")
			}
			require.EqualValues(t, 2, tokens.calls.Load(), "a token for every call")
		})
	}
}

func TestVertexAuthentication(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tokens *fakeTokens
		want   wantError
		sent   bool
	}{
		{name: "wrong token", tokens: &fakeTokens{token: "ya29.someone-else"}, sent: true,
			want: wantError{kind: model.ErrInvalid, status: http.StatusUnauthorized, message: "Request had invalid authentication credentials."}},
		{name: "token source fails", tokens: &fakeTokens{err: errors.New("metadata server unreachable")},
			want: wantError{kind: model.ErrServer, message: "vertex: get an access token: metadata server unreachable"}},
		{name: "token source returns nothing", tokens: &fakeTokens{},
			want: wantError{kind: model.ErrServer, message: "vertex: the token source returned an empty access token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			api := &vertexAPI{reply: func(w http.ResponseWriter, stream bool, req apiRequest) {
				sseReply(scripted[0].msg, vertexModel)(w, stream, req)
			}}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				api.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			p, err := anthropic.Vertex(anthropic.VertexOptions{Region: vertexRegion, ProjectID: vertexProject, BaseURL: srv.URL, Tokens: tt.tokens.get})
			require.NoError(t, err)
			c, err := anthropic.New(anthropic.WithProvider(p), anthropic.WithHTTPClient(srv.Client()))
			require.NoError(t, err)
			_, err = c.Stream(t.Context(), vertexRequest(), nil)
			requireModelError(t, err, tt.want)
			require.Equal(t, tt.sent, hits.Load() > 0)
		})
	}
}

func TestVertexErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply func(http.ResponseWriter, bool, apiRequest)
		want  wantError
	}{
		{name: "429 RESOURCE_EXHAUSTED from the platform",
			reply: func(w http.ResponseWriter, _ bool, _ apiRequest) {
				writeGoogleError(w, 429, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model")
			},
			want: wantError{kind: model.ErrRateLimited, status: 429, message: "Quota exceeded"}},
		{name: "529 overloaded_error from the model",
			reply: func(w http.ResponseWriter, _ bool, _ apiRequest) {
				writeError(w, 529, "overloaded_error", "Overloaded")
			},
			want: wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
		{name: "500 INTERNAL",
			reply: func(w http.ResponseWriter, _ bool, _ apiRequest) {
				writeGoogleError(w, 500, "INTERNAL", "Internal error encountered.")
			},
			want: wantError{kind: model.ErrServer, status: 500, message: "Internal error encountered."}},
		{name: "400 invalid_request_error",
			reply: func(w http.ResponseWriter, _ bool, _ apiRequest) {
				writeError(w, 400, "invalid_request_error", "prompt is too long")
			},
			want: wantError{kind: model.ErrInvalid, status: 400, message: "invalid_request_error: prompt is too long"}},
		{name: "mid-stream overloaded_error",
			reply: func(w http.ResponseWriter, stream bool, _ apiRequest) {
				if !stream {
					writeError(w, 529, "overloaded_error", "Overloaded")
					return
				}
				s := newSSE(w)
				for _, ev := range scripted[0].msg.events(vertexModel)[:4] {
					s.send(ev.name, ev.data)
				}
				s.send("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
			},
			want: wantError{kind: model.ErrOverloaded, status: 529, message: "overloaded_error: Overloaded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newVertexClient(t, &vertexAPI{reply: tt.reply}, &fakeTokens{token: vertexToken})
			_, err := c.Create(t.Context(), vertexRequest())
			requireModelError(t, err, tt.want)
			_, err = c.Stream(t.Context(), vertexRequest(), nil)
			requireModelError(t, err, tt.want)
		})
	}
}

func TestVertexEndpoints(t *testing.T) {
	t.Parallel()
	// The provider's default base URL per region, seen through the URL it asks for.
	tests := []struct{ region, host string }{
		{"us-east5", "us-east5-aiplatform.googleapis.com"},
		{"europe-west1", "europe-west1-aiplatform.googleapis.com"},
		{"global", "aiplatform.googleapis.com"},
		{"us", "aiplatform.us.rep.googleapis.com"},
		{"eu", "aiplatform.eu.rep.googleapis.com"},
	}
	for _, tt := range tests {
		t.Run(tt.region, func(t *testing.T) {
			t.Parallel()
			p, err := anthropic.Vertex(anthropic.VertexOptions{Region: tt.region, ProjectID: vertexProject, Tokens: (&fakeTokens{token: vertexToken}).get})
			require.NoError(t, err)
			req, err := p.Request(t.Context(), anthropic.Call{Model: vertexModel, Body: []byte(`{"model":"x","max_tokens":1,"messages":[]}`), Header: http.Header{}})
			require.NoError(t, err)
			require.Equal(t, "https://"+tt.host+"/v1/projects/"+vertexProject+"/locations/"+tt.region+
				"/publishers/anthropic/models/"+vertexModel+":rawPredict", req.URL.String())
		})
	}
	for _, bad := range []anthropic.VertexOptions{
		{Region: "", ProjectID: vertexProject, Tokens: (&fakeTokens{}).get},
		{Region: "us-east5/..", ProjectID: vertexProject, Tokens: (&fakeTokens{}).get},
		{Region: vertexRegion, ProjectID: "Bad Project", Tokens: (&fakeTokens{}).get},
		{Region: vertexRegion, ProjectID: vertexProject},
	} {
		_, err := anthropic.Vertex(bad)
		require.Error(t, err, "%+v", bad)
	}
}
