package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
