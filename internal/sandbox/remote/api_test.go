package remote

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

func TestSendJSON(t *testing.T) {
	type seen struct {
		method, contentType, key string
		body                     map[string]any
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, contentType: r.Header.Get("Content-Type"), key: r.Header.Get("X-Key")}
		data, _ := io.ReadAll(r.Body)
		if len(data) > 0 {
			require.NoError(t, json.Unmarshal(data, &s.body))
		}
		got <- s
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"no such sandbox"}`))
		case "/denied":
			w.WriteHeader(http.StatusUnauthorized)
		default:
			_, _ = w.Write([]byte(`{"id":"sb1"}`))
		}
	}))
	t.Cleanup(srv.Close)
	header := func(r *http.Request) { r.Header.Set("X-Key", "k") }
	c := NewClient(nil, fast, nil)

	tests := []struct {
		name   string
		method string
		path   string
		body   any
		want   seen
		is     error
		status int
		text   string
	}{
		{name: "a body is sent as JSON with its content type", method: "POST", path: "/sandboxes", body: map[string]any{"a": 1},
			want: seen{method: "POST", contentType: "application/json", key: "k", body: map[string]any{"a": float64(1)}}},
		{name: "no body, no content type", method: "GET", path: "/sandboxes/sb1", want: seen{method: "GET", key: "k"}},
		{name: "a 404 is a StatusError with the provider's message", method: "GET", path: "/missing", want: seen{method: "GET", key: "k"},
			is: ErrNotFound, status: 404, text: "get sandbox: HTTP 404: no such sandbox"},
		{name: "a 401 names the credential's variable", method: "DELETE", path: "/denied", want: seen{method: "DELETE", key: "k"},
			is: ErrAuth, status: 401, text: "check MANAGED_AGENT_X_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := SendJSON(t.Context(), c, tt.method, srv.URL+tt.path, tt.body, header, "get sandbox", "MANAGED_AGENT_X_API_KEY")
			require.Equal(t, tt.want, <-got)
			if tt.is == nil {
				require.NoError(t, err)
				defer resp.Body.Close()
				data, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.JSONEq(t, `{"id":"sb1"}`, string(data))
				return
			}
			require.Nil(t, resp)
			require.ErrorIs(t, err, tt.is)
			require.ErrorContains(t, err, tt.text)
			var se *StatusError
			require.True(t, errors.As(err, &se))
			require.Equal(t, tt.status, se.Status)
		})
	}
}

func TestSendJSONFailures(t *testing.T) {
	c := NewClient(nil, fast, nil)
	_, err := SendJSON(t.Context(), c, "POST", "http://127.0.0.1:1/x", func() {}, nil, "create sandbox", "V")
	require.ErrorContains(t, err, "create sandbox: json: unsupported type")

	// Nothing listens on port 1 of the loopback: a transport error, unavailable.
	_, err = SendJSON(t.Context(), c, "GET", "http://127.0.0.1:1/x", nil, nil, "get sandbox", "V")
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	require.ErrorContains(t, err, "get sandbox: ")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = SendJSON(ctx, c, "GET", "http://127.0.0.1:1/x", nil, nil, "get sandbox", "V")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, sandbox.ErrUnavailable)
}

func TestCheckRef(t *testing.T) {
	id := regexp.MustCompile(`^[a-z0-9]{1,8}$`)
	tests := []struct {
		ref sandbox.Ref
		is  error
	}{
		{sandbox.Ref{Provider: "p", ExternalID: "abc1"}, nil},
		{sandbox.Ref{ExternalID: "abc1"}, nil},
		{sandbox.Ref{Provider: "other", ExternalID: "abc1"}, sandbox.ErrForeignRef},
		{sandbox.Ref{Provider: "p", ExternalID: "../x"}, sandbox.ErrInvalidRef},
		{sandbox.Ref{Provider: "p"}, sandbox.ErrInvalidRef},
	}
	for _, tt := range tests {
		err := CheckRef(tt.ref, "p", id)
		if tt.is == nil {
			require.NoError(t, err, tt.ref)
			continue
		}
		require.ErrorIs(t, err, tt.is, tt.ref)
	}
	require.EqualError(t, CheckRef(sandbox.Ref{Provider: "p", ExternalID: "A/B"}, "p", id), `p sandbox id "A/B": `+sandbox.ErrInvalidRef.Error())
}
