package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/mcp"
	"github.com/managed-agents/managed-agents/internal/mcp/mcptest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func dial(t *testing.T, url string, o mcp.Options) *mcp.Conn {
	t.Helper()
	c, err := mcp.Dial(t.Context(), mcp.Server{Name: "test", URL: url}, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func texts(r mcp.Result) []string {
	var out []string
	for _, b := range r.Content {
		if b.Type == wire.ContentTypeText {
			out = append(out, *b.Text)
		}
	}
	return out
}

func TestDialAndListTools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []mcptest.Option
		transport string
	}{
		{"streamable", nil, "streamable-http"},
		{"sse only", []mcptest.Option{mcptest.WithSSEOnly()}, "sse"},
		{"streamable, one tool a page", []mcptest.Option{mcptest.WithPageSize(1)}, "streamable-http"},
		{"sse only, two tools a page", []mcptest.Option{mcptest.WithSSEOnly(), mcptest.WithPageSize(2)}, "sse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mcptest.Start(t, tc.opts...)
			c := dial(t, srv.URL, mcp.Options{})
			require.Equal(t, tc.transport, c.Transport())

			tools, err := c.ListTools(t.Context())
			require.NoError(t, err)
			byName := map[string]mcp.Tool{}
			for _, tool := range tools {
				byName[tool.Name] = tool
				var schema map[string]any
				require.NoError(t, json.Unmarshal(tool.InputSchema, &schema), tool.Name)
				require.Equal(t, "object", schema["type"], tool.Name)
			}
			require.Len(t, byName, 5)
			require.Equal(t, mcptest.EchoDescription, byName["echo"].Description)
			require.Equal(t, mcptest.AddDescription, byName["add"].Description)
			require.Equal(t, mcptest.SlowDescription, byName["slow"].Description)
			require.Equal(t, mcptest.FailDescription, byName["fail"].Description)
			require.Equal(t, mcptest.BigDescription, byName["big"].Description)

			var echo struct {
				Properties map[string]struct{ Type string } `json:"properties"`
				Required   []string                         `json:"required"`
			}
			require.NoError(t, json.Unmarshal(byName["echo"].InputSchema, &echo))
			require.Equal(t, "string", echo.Properties["text"].Type)
			require.Equal(t, []string{"text"}, echo.Required)

			res, err := c.CallTool(t.Context(), "echo", json.RawMessage(`{"text":"hi"}`), mcp.CallLimits{})
			require.NoError(t, err)
			require.False(t, res.IsError)
			require.Equal(t, []string{"hi"}, texts(res))
		})
	}
}

func TestCallTool(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	c := dial(t, srv.URL, mcp.Options{})
	for _, tc := range []struct {
		name, tool string
		args       string
		limits     mcp.CallLimits
		isError    bool
		timedOut   bool
		truncated  bool
		text       []string
	}{
		{name: "echo", tool: "echo", args: `{"text":"hello"}`, text: []string{"hello"}},
		{name: "add", tool: "add", args: `{"a":2,"b":40.5}`, text: []string{"42.5"}},
		{name: "tool error", tool: "fail", args: `{"message":"boom"}`, isError: true, text: []string{"tool failed: boom"}},
		{name: "null args are {}", tool: "fail", args: `null`, isError: true, text: []string{"tool failed: "}},
		{name: "no args are {}", tool: "fail", args: ``, isError: true, text: []string{"tool failed: "}},
		{name: "slow within its timeout", tool: "slow", args: `{"ms":10}`, limits: mcp.CallLimits{Timeout: 5 * time.Second}, text: []string{"slept 10ms"}},
		{name: "slow cut by its timeout", tool: "slow", args: `{"ms":10000}`, limits: mcp.CallLimits{Timeout: 200 * time.Millisecond}, isError: true, timedOut: true,
			text: []string{`MCP tool "slow" on server "test" timed out after 200ms and was cancelled.`}},
		{name: "big under the cap", tool: "big", args: `{"n":100}`, limits: mcp.CallLimits{MaxOutputChars: 100}, text: []string{strings.Repeat("x", 100)}},
		{name: "big over the cap", tool: "big", args: `{"n":250}`, limits: mcp.CallLimits{MaxOutputChars: 100}, truncated: true,
			text: []string{strings.Repeat("x", 100), "[output truncated: 100 of 250 characters of text shown]"}},
		{name: "big over the default cap", tool: "big", args: `{"n":100001}`, truncated: true,
			text: []string{strings.Repeat("x", 100_000), "[output truncated: 100000 of 100001 characters of text shown]"}},
		{name: "unknown tool", tool: "nope", args: `{}`, isError: true},
		{name: "arguments the schema refuses", tool: "echo", args: `{"text":3}`, isError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.CallTool(t.Context(), tc.tool, json.RawMessage(tc.args), tc.limits)
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError)
			require.Equal(t, tc.timedOut, res.TimedOut)
			require.Equal(t, tc.truncated, res.Truncated)
			if tc.text != nil {
				require.Equal(t, tc.text, texts(res))
			} else {
				require.NotEmpty(t, texts(res))
			}
			require.NoError(t, wire.ValidateContent("content", res.Content, wire.ToolResultBlocks))
		})
	}
	// The cut call was cancelled on the server, and the connection still works.
	require.Eventually(t, func() bool { return srv.Cancelled("slow") == 1 }, 5*time.Second, 10*time.Millisecond)
	res, err := c.CallTool(t.Context(), "add", json.RawMessage(`{"a":1,"b":1}`), mcp.CallLimits{})
	require.NoError(t, err)
	require.Equal(t, []string{"2"}, texts(res))
	require.Equal(t, 2, srv.Calls("add"))
}

func TestCallToolRefusesArgumentsThatAreNotAnObject(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	c := dial(t, srv.URL, mcp.Options{})
	for _, args := range []string{`[]`, `"text"`, `3`, `{"text":`, `true`} {
		_, err := c.CallTool(t.Context(), "echo", json.RawMessage(args), mcp.CallLimits{})
		require.ErrorIs(t, err, mcp.ErrInvalidArguments, args)
	}
	require.Zero(t, srv.Calls("echo"))
}

func TestCallerCancellationIsAnError(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	c := dial(t, srv.URL, mcp.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-srv.Started("slow")
		cancel()
	}()
	_, err := c.CallTool(ctx, "slow", json.RawMessage(`{"ms":10000}`), mcp.CallLimits{})
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, mcp.ErrConnect)
	require.Equal(t, 1, srv.Calls("slow"))
	require.Eventually(t, func() bool { return srv.Cancelled("slow") == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestBearer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		sseOnly bool
	}{{"streamable", false}, {"sse only", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := []mcptest.Option{mcptest.WithBearer(func(tok string) bool { return tok == "s3cret" })}
			if tc.sseOnly {
				opts = append(opts, mcptest.WithSSEOnly())
			}
			srv := mcptest.Start(t, opts...)
			for _, token := range []string{"", "wrong"} {
				_, err := mcp.Dial(t.Context(), mcp.Server{Name: "gh", URL: srv.URL}, mcp.Options{Token: token})
				require.ErrorIs(t, err, mcp.ErrAuth, "token %q", token)
				require.NotErrorIs(t, err, mcp.ErrConnect)
				require.Contains(t, err.Error(), `mcp server "gh"`)
				if token != "" {
					require.NotContains(t, err.Error(), token)
				}
			}
			c := dial(t, srv.URL, mcp.Options{Token: "s3cret"})
			res, err := c.CallTool(t.Context(), "echo", json.RawMessage(`{"text":"ok"}`), mcp.CallLimits{})
			require.NoError(t, err)
			require.Equal(t, []string{"ok"}, texts(res))
			require.Contains(t, srv.Tokens(), "s3cret")
			require.Contains(t, srv.Tokens(), "wrong")
		})
	}
}

func TestForbidden(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t, mcptest.WithForbidden())
	_, err := mcp.Dial(t.Context(), mcp.Server{Name: "gh", URL: srv.URL}, mcp.Options{Token: "t"})
	require.ErrorIs(t, err, mcp.ErrAuth)
}

// A token revoked after connecting: the call fails with ErrAuth, not a tool error.
func TestAuthFailureDuringACall(t *testing.T) {
	t.Parallel()
	valid := make(chan bool, 1)
	valid <- true
	srv := mcptest.Start(t, mcptest.WithBearer(func(string) bool {
		v := <-valid
		valid <- v
		return v
	}))
	c := dial(t, srv.URL, mcp.Options{Token: "t"})
	<-valid
	valid <- false
	_, err := c.CallTool(t.Context(), "echo", json.RawMessage(`{"text":"x"}`), mcp.CallLimits{})
	require.ErrorIs(t, err, mcp.ErrAuth)
	_, err = c.ListTools(t.Context())
	require.Error(t, err)
}

func TestDialFailures(t *testing.T) {
	t.Parallel()
	closedPort := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		return "http://" + addr + "/mcp"
	}
	notMCP := func(t *testing.T) string {
		s := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(s.Close)
		return s.URL + "/mcp"
	}
	htmlOK := func(t *testing.T) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>hello</html>"))
		}))
		t.Cleanup(s.Close)
		return s.URL + "/mcp"
	}
	silent := func(t *testing.T) string {
		stop := make(chan struct{})
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() { close(stop); s.Close() })
		return s.URL + "/mcp"
	}
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		want error
	}{
		{"closed port", closedPort, nil},
		{"not an MCP server (404 everywhere)", notMCP, nil},
		{"an HTML page", htmlOK, nil},
		{"a server that never answers", silent, context.DeadlineExceeded},
		{"not a URL", func(*testing.T) string { return "ftp://example.com" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := mcp.Dial(t.Context(), mcp.Server{Name: "x", URL: tc.url(t)}, mcp.Options{ConnectTimeout: time.Second})
			require.ErrorIs(t, err, mcp.ErrConnect)
			require.NotErrorIs(t, err, mcp.ErrAuth)
			require.Less(t, time.Since(start), 3*time.Second)
			require.Contains(t, err.Error(), `mcp server "x"`)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

// A broken connection during a call is a Go error wrapping ErrConnect.
func TestServerGoneDuringACall(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	c := dial(t, srv.URL, mcp.Options{})
	go func() {
		<-srv.Started("slow")
		srv.Close()
	}()
	_, err := c.CallTool(t.Context(), "slow", json.RawMessage(`{"ms":10000}`), mcp.CallLimits{Timeout: 20 * time.Second})
	require.ErrorIs(t, err, mcp.ErrConnect)
}

func TestTokenIsNotSentToAnotherHost(t *testing.T) {
	t.Parallel()
	other := mcptest.Start(t)
	redirect := httptest.NewServer(http.RedirectHandler(other.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	c, err := mcp.Dial(t.Context(), mcp.Server{Name: "r", URL: redirect.URL + "/mcp"}, mcp.Options{Token: "s3cret"})
	if err == nil {
		_ = c.Close()
	}
	require.NotContains(t, other.Tokens(), "s3cret")
}

func TestErrorsNameNoSecret(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t, mcptest.WithForbidden())
	_, err := mcp.Dial(t.Context(), mcp.Server{Name: "q", URL: srv.URL + "?api_key=k3y"}, mcp.Options{Token: "tok3n"})
	require.ErrorIs(t, err, mcp.ErrAuth)
	require.NotContains(t, err.Error(), "k3y")
	require.NotContains(t, err.Error(), "tok3n")
	require.True(t, errors.Is(err, mcp.ErrAuth))
}
