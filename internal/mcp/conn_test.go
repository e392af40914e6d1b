package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
)

// The session outlives the connect timeout: the SSE transport's stream is not tied to it.
func TestSessionOutlivesTheConnectTimeout(t *testing.T) {
	t.Parallel()
	for _, sseOnly := range []bool{false, true} {
		t.Run(fmt.Sprint("sse only ", sseOnly), func(t *testing.T) {
			t.Parallel()
			var opts []mcptest.Option
			if sseOnly {
				opts = append(opts, mcptest.WithSSEOnly())
			}
			srv := mcptest.Start(t, opts...)
			ctx, cancel := context.WithCancel(t.Context())
			// Long enough for a connect under -race on a loaded CI machine (200 ms was not: a
			// connect ran out of it once), short enough to wait out below.
			const connectTimeout = 2 * time.Second
			c, err := mcp.Dial(ctx, mcp.Server{Name: "s", URL: srv.URL}, mcp.Options{ConnectTimeout: connectTimeout})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()); require.NoError(t, c.Close()) })
			cancel() // nor to Dial's context
			time.Sleep(connectTimeout + 200*time.Millisecond)
			res, err := c.CallTool(t.Context(), "echo", json.RawMessage(`{"text":"still here"}`), mcp.CallLimits{})
			require.NoError(t, err)
			require.Equal(t, []string{"still here"}, texts(res))
		})
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	c := dial(t, srv.URL, mcp.Options{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			res, err := c.CallTool(t.Context(), "add", json.RawMessage(fmt.Sprintf(`{"a":%d,"b":1}`, i)), mcp.CallLimits{})
			require.NoError(t, err)
			require.Equal(t, []string{fmt.Sprint(i + 1)}, texts(res))
		})
	}
	wg.Wait()
	require.Equal(t, 20, srv.Calls("add"))
}

type countingTransport struct {
	n    atomic.Int64
	base http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// A caller's client carries every request (the lead may route through a proxy); its
// Timeout does not cut the session's long-lived streams.
func TestCallersHTTPClient(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t, mcptest.WithSSEOnly(), mcptest.WithBearer(func(tok string) bool { return tok == "v" }))
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	rt := &countingTransport{base: base}
	c := dial(t, srv.URL, mcp.Options{HTTPClient: &http.Client{Transport: rt, Timeout: 100 * time.Millisecond}, Token: "v"})
	res, err := c.CallTool(t.Context(), "slow", json.RawMessage(`{"ms":300}`), mcp.CallLimits{})
	require.NoError(t, err)
	require.Equal(t, []string{"slept 300ms"}, texts(res))
	require.NotZero(t, rt.n.Load())
	require.Contains(t, srv.Tokens(), "v")
}

func TestDialWithAContextAlreadyDone(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := mcp.Dial(ctx, mcp.Server{Name: "s", URL: srv.URL}, mcp.Options{})
	require.ErrorIs(t, err, mcp.ErrConnect)
	require.ErrorIs(t, err, context.Canceled)
}

// A server that offers no tools: an empty list, whether it answers tools/list or not.
func TestServerWithoutTools(t *testing.T) {
	t.Parallel()
	srv := sdk.NewServer(&sdk.Implementation{Name: "empty", Version: "v1"}, nil)
	for _, s := range []*httptest.Server{
		httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)),
	} {
		t.Cleanup(func() {
			s.CloseClientConnections()
			for ss := range srv.Sessions() {
				_ = ss.Close()
			}
			s.Close()
		})
		c := dial(t, s.URL, mcp.Options{})
		tools, err := c.ListTools(t.Context())
		require.NoError(t, err)
		require.Empty(t, tools)
	}
}

// Close does not wait long for a server that never answers the session's DELETE.
func TestCloseIsBounded(t *testing.T) {
	t.Parallel()
	srv := sdk.NewServer(&sdk.Implementation{Name: "hangs", Version: "v1"}, nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	release := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(release)
		s.CloseClientConnections()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		s.Close()
	})
	c, err := mcp.Dial(t.Context(), mcp.Server{Name: "s", URL: s.URL}, mcp.Options{})
	require.NoError(t, err)
	start := time.Now()
	_ = c.Close()
	require.Less(t, time.Since(start), 4*time.Second)
}
