//go:build integration

package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/sessions"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	stopSharedTemporal()
	removeBinary()
	os.Exit(code)
}

// env is one running server on its own database.
type env struct {
	t   testing.TB
	api *app.API
	srv *httptest.Server
	// dbURL is the env's database, for processes the test starts.
	dbURL string
	// sandboxDir is where a running env's worker keeps its local sandboxes.
	sandboxDir string
	// worker and startWorker exist in running envs (newRunningEnv).
	worker      *app.Worker
	startWorker func() *app.Worker
	// key is an API key of the first workspace; client uses it.
	key    string
	client anthropic.Client
}

// newEnv starts the API alone (nothing runs sessions) on a fresh database with one
// workspace and its key.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newAPIEnv(t, app.Config{}, nil)
}

// newAPIEnv starts the API with cfg (its DatabaseURL set to a fresh database) and, if tc is
// set, a runner on cfg.TaskQueue.
func newAPIEnv(t testing.TB, cfg app.Config, tc client.Client) *env {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dbURL := pgtest.URL(t)
	cfg.DatabaseURL = dbURL
	api, err := app.NewAPI(ctx, cfg, tc, logger)
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		api.Close()
	})
	e := &env{t: t, api: api, srv: srv, dbURL: dbURL}
	e.key = e.newKey()
	e.client = e.clientFor(e.key)
	return e
}

// newKey creates a key in a new workspace, as an operator does (admin create).
func (e *env) newKey() string {
	e.t.Helper()
	ctx := context.Background()
	ws, err := e.api.Service.CreateWorkspace(ctx, "test admin", "test-"+ids.New(""))
	require.NoError(e.t, err)
	k, err := e.api.Service.CreateKey(ctx, "test admin", sessions.KeyRequest{WorkspaceID: ws.ID, Label: e.t.Name()})
	require.NoError(e.t, err)
	return k.Secret
}

// clientFor is the official SDK pointed at the server, retries off so every request is
// seen exactly once.
func (e *env) clientFor(key string, opts ...option.RequestOption) anthropic.Client {
	base := []option.RequestOption{option.WithBaseURL(e.srv.URL), option.WithAPIKey(key), option.WithMaxRetries(0)}
	return anthropic.NewClient(append(base, opts...)...)
}

// raw sends a request with curl-like headers (x-api-key, the beta) and returns status and body.
func (e *env) raw(method, path, body string, headers ...string) (*http.Response, string) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("x-api-key", e.key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", "managed-agents-2026-04-01")
	req.Header.Set("content-type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp, string(b)
}
