package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sessions"
)

// TestSetRetryAfter: both headers round up, so a client that waits as told is never early,
// and retry-after is at least 1 (it has no fractions).
func TestSetRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d          time.Duration
		secs, msec string
	}{
		{0, "1", "1"},
		{time.Microsecond, "1", "1"},
		{20 * time.Millisecond, "1", "20"},
		{1500 * time.Millisecond, "2", "1500"},
		{2 * time.Second, "2", "2000"},
		{2*time.Second + time.Microsecond, "3", "2001"},
	} {
		w := httptest.NewRecorder()
		setRetryAfter(w, tc.d)
		require.Equal(t, tc.secs, w.Header().Get("retry-after"), tc.d)
		require.Equal(t, tc.msec, w.Header().Get("retry-after-ms"), tc.d)
	}
}

// TestLimiterFailed: only a limiter that could not answer lets the request through; a
// refusal, or a client already gone, does not.
func TestLimiterFailed(t *testing.T) {
	t.Parallel()
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest(http.MethodGet, "/v1/agents", nil)
	require.True(t, s.limiterFailed(r, errors.New("connection refused")))
	require.False(t, s.limiterFailed(r, &sessions.Error{Kind: sessions.KindRateLimited}))
	ctx, cancel := context.WithCancel(r.Context())
	cancel()
	require.False(t, s.limiterFailed(r.WithContext(ctx), context.Canceled))
}
