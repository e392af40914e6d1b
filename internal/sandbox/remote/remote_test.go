package remote

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

var fast = Retry{Max: 3, WaitMin: time.Millisecond, WaitMax: 5 * time.Millisecond}

// answering serves statuses in turn (the last one from then on) and counts requests.
func answering(t *testing.T, statuses ...int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		st := statuses[min(i, len(statuses)-1)]
		if st == 429 {
			w.Header().Set("Retry-After", "3600")
		}
		w.WriteHeader(st)
		_, _ = w.Write([]byte(`{"code":` + http.StatusText(st) + `,"message":"answer ` + http.StatusText(st) + `"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestClientRetries(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		statuses []int
		noRetry  bool
		want     int   // final status
		requests int32 // sent in all
	}{
		{"a GET through a 503 and a 429 (its hour-long Retry-After cut short)", "GET", []int{503, 429, 200}, false, 200, 3},
		{"a POST through a 503", "POST", []int{503, 201}, false, 201, 2},
		{"a POST's 502 is not repeated: the gateway cannot tell whether the upstream acted", "POST", []int{502, 201}, false, 502, 1},
		{"a GET through a 502", "GET", []int{502, 200}, false, 200, 2},
		{"a POST's 500 is not repeated: the request may have been carried out", "POST", []int{500, 201}, false, 500, 1},
		{"a DELETE's 500 is repeated", "DELETE", []int{500, 204}, false, 204, 2},
		{"a 404 is an answer", "GET", []int{404, 200}, false, 404, 1},
		{"the retries are bounded and the last answer is kept", "GET", []int{503}, false, 503, 4},
		{"NoRetry sends once", "GET", []int{503, 200}, true, 503, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, n := answering(t, tt.statuses...)
			c := NewClient(nil, fast, nil)
			ctx := context.Background()
			if tt.noRetry {
				ctx = NoRetry(ctx)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, srv.URL, strings.NewReader("body"))
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tt.want, resp.StatusCode)
			require.Equal(t, tt.requests, n.Load())
		})
	}
}

func TestClientTransportErrors(t *testing.T) {
	// A listener that accepts and hangs up at once: every request fails in transport.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	c := NewClient(nil, fast, nil)
	for _, tt := range []struct {
		method string
		want   int32
	}{{"GET", 4}, {"POST", 1}} {
		accepted.Store(0)
		req, err := http.NewRequest(tt.method, "http://"+l.Addr().String(), nil)
		require.NoError(t, err)
		_, err = c.Do(req)
		require.Error(t, err, tt.method)
		require.Eventually(t, func() bool { return accepted.Load() == tt.want }, 5*time.Second, time.Millisecond, tt.method)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		status int
		body   string
		is     error
		text   string
	}{
		{404, `{"code":404,"message":"sandbox abc not found"}`, ErrNotFound, "get sandbox: HTTP 404: sandbox abc not found"},
		{401, `{"message":"Invalid API key"}`, ErrAuth, "check MANAGED_AGENT_X_API_KEY"},
		{403, `forbidden`, ErrAuth, "HTTP 403: forbidden"},
		{429, `{"detail":"slow down"}`, sandbox.ErrUnavailable, "slow down"},
		{503, strings.Repeat("x", 20000), sandbox.ErrUnavailable, "…"},
		{400, `{"error":"bad template"}`, nil, "HTTP 400: bad template"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		rec.WriteHeader(tt.status)
		_, _ = rec.WriteString(tt.body)
		err := Check(rec.Result(), "get sandbox", "MANAGED_AGENT_X_API_KEY")
		require.Error(t, err)
		require.Contains(t, err.Error(), tt.text)
		require.Less(t, len(err.Error()), 500)
		if tt.is != nil {
			require.ErrorIs(t, err, tt.is)
		}
		var se *StatusError
		require.True(t, errors.As(err, &se))
		require.Equal(t, tt.status, se.Status)
	}
	rec := httptest.NewRecorder()
	rec.WriteHeader(201)
	require.NoError(t, Check(rec.Result(), "create", "V"))
}

func TestSettings(t *testing.T) {
	s := NewSettings(map[string]string{
		"A_URL": "ftp://x", "A_OK_URL": "https://api.example.com/v1/", "A_D": "5", "A_N": "0", "A_B": "maybe", "A_GOOD_D": "2m",
	})
	require.Nil(t, s.URL("A_URL", ""))
	require.Equal(t, "https://api.example.com/v1", s.URL("A_OK_URL", "").String())
	require.Equal(t, time.Minute, s.Duration("A_D", time.Minute, time.Second))
	require.Equal(t, 2*time.Minute, s.Duration("A_GOOD_D", time.Minute, time.Second))
	require.Equal(t, 3, s.Int("A_N", 3, 1, 10))
	require.True(t, s.Bool("A_B", true))
	require.Equal(t, "", s.Required("A_KEY", "the API key"))
	require.Equal(t, "def", s.String("A_UNSET", "def"))
	err := s.Err()
	require.Error(t, err)
	for _, name := range []string{`A_URL="ftp://x"`, `A_D="5"`, `A_N="0"`, `A_B="maybe"`, "A_KEY is not set: the API key"} {
		require.Contains(t, err.Error(), name)
	}
	require.NotContains(t, err.Error(), "A_OK_URL")
	require.NoError(t, NewSettings(nil).Err())
}
