package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sessions"
)

// fixedAuth accepts one key.
type fixedAuth struct{ key string }

func (a fixedAuth) Authenticate(_ context.Context, key string) (sessions.Principal, error) {
	if key != a.key {
		return sessions.Principal{}, sessions.ErrUnknownKey
	}
	return sessions.Principal{KeyID: "apikey_1", WorkspaceID: "wrkspc_1", Hint: "sk-ma-…abcd"}, nil
}

func (fixedAuth) WatchKey(string) (<-chan struct{}, func()) { return nil, func() {} }

// The access log: one info line per request with the request id, route, key hint, status and
// duration; never the body or the key.
func TestAccessLog(t *testing.T) {
	const key = "sk-ma-secretsecretsecretsecretabcd"
	cases := []struct {
		name         string
		method, path string
		headers      map[string]string
		body         string
		wantRoute    string
		wantKey      string
		wantStatus   int
	}{
		{"authenticated route", "POST", "/v1/agents", map[string]string{"x-api-key": key}, `{"name":"BODY-SECRET"}`, "POST /v1/agents", "sk-ma-…abcd", 404},
		{"bad key", "GET", "/v1/sessions/sesn_1", map[string]string{"authorization": "Bearer wrong"}, "", "GET /v1/sessions/{id}", "", 401},
		{"unknown route", "GET", "/v2/nothing", nil, "", "", "", 404},
		{"health", "GET", "/healthz", nil, "", "GET /healthz", "", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := New(Config{Auth: fixedAuth{key: key}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			require.Equal(t, tc.wantStatus, rec.Code)

			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			require.Len(t, lines, 1, "one line per request: %s", logs.String())
			var line map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
			require.Equal(t, "INFO", line["level"])
			require.Equal(t, "request", line["msg"])
			require.Equal(t, rec.Header().Get("request-id"), line["request_id"])
			require.Equal(t, tc.wantRoute, line["route"])
			require.Equal(t, tc.path, line["path"])
			require.Equal(t, tc.wantKey, line["key"])
			require.EqualValues(t, tc.wantStatus, line["status"])
			require.Contains(t, line, "duration")
			require.NotContains(t, logs.String(), "BODY-SECRET", "bodies are never logged")
			require.NotContains(t, logs.String(), key, "keys are never logged")
			require.NotContains(t, logs.String(), "wrong")
		})
	}
}
