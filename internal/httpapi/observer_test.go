package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/httpapi"
)

type request struct {
	route  string
	status int
}

type recordingObserver struct {
	mu       sync.Mutex
	requests []request
}

func (o *recordingObserver) Request(route string, status int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, request{route, status})
}
func (o *recordingObserver) StreamOpened() {}
func (o *recordingObserver) StreamClosed() {}

// The observer sees the matched pattern, never the request's own path: a route's values are
// this package's routes, so a metric labelled with it stays bounded.
func TestObserverSeesRoutesNotPaths(t *testing.T) {
	t.Parallel()
	obs := &recordingObserver{}
	h := httpapi.New(httpapi.Config{Logger: slog.New(slog.DiscardHandler), Observer: obs})
	for _, c := range []struct {
		method, path string
		want         request
	}{
		{http.MethodGet, "/healthz", request{"GET /healthz", http.StatusOK}},
		{http.MethodGet, "/v1/nowhere/sesn_123", request{"", http.StatusNotFound}},
		{http.MethodGet, "/v1/agents/../x", request{"", http.StatusNotFound}},
		{http.MethodGet, "/v1/agents/agent_1", request{"GET /v1/agents/{id}", http.StatusUnauthorized}},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		_, _ = io.Copy(io.Discard, rec.Body)
		obs.mu.Lock()
		got := obs.requests[len(obs.requests)-1]
		obs.mu.Unlock()
		require.Equal(t, c.want, got, "%s %s", c.method, c.path)
	}
}

// Without an observer the server records nothing and still serves.
func TestNoObserver(t *testing.T) {
	t.Parallel()
	h := httpapi.New(httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}
