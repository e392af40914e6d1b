package sandboxd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/sandbox/workspace"
	"github.com/managed-agents/managed-agents/internal/sandboxd"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
)

const token = "test-token-0123456789abcdef"

// daemon is one sandboxd on a real loopback listener.
type daemon struct {
	url string
	hc  *http.Client
}

// serve starts a daemon for sb on 127.0.0.1 and stops it when the test ends.
func serve(tb testing.TB, sb sandbox.Sandbox, noSearch bool) daemon {
	tb.Helper()
	d, stop := start(tb, sandboxd.Config{Sandbox: sb, Token: token, NoSearch: noSearch})
	tb.Cleanup(stop)
	return d
}

// start runs a daemon on a real loopback listener until stop.
func start(tb testing.TB, c sandboxd.Config) (daemon, func()) {
	tb.Helper()
	srv, err := sandboxd.New(c)
	require.NoError(tb, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	// Its own transport, so the test's idle connections can be closed and leave nothing
	// running behind it.
	hc := &http.Client{Transport: &http.Transport{}}
	stop := sync.OnceFunc(func() {
		cancel()
		require.NoError(tb, <-done)
		hc.CloseIdleConnections()
	})
	return daemon{url: "http://" + ln.Addr().String(), hc: hc}, stop
}

func (d daemon) connect(tb testing.TB) sandbox.Sandbox {
	tb.Helper()
	sb, err := sandboxd.Connect(tb.(interface{ Context() context.Context }).Context(), d.url, token, d.hc)
	require.NoError(tb, err)
	return sb
}

// newWorkspace is an empty workspace directory with the environment local gives commands.
func newWorkspace(t *testing.T) (*workspace.Workspace, string) {
	t.Helper()
	dir := t.TempDir()
	ws, err := workspace.New(dir, workspace.Config{
		Env:       []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8"},
		Timeout:   local.DefaultTimeout,
		MaxOutput: local.DefaultMaxOutput,
	})
	require.NoError(t, err)
	return ws, dir
}

func TestToolsSuite(t *testing.T) {
	t.Parallel()
	for _, noSearch := range []bool{false, true} {
		name := map[bool]string{false: "DaemonWithSearch", true: "DaemonWithoutSearch"}[noSearch]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
				ws, _ := newWorkspace(t)
				sb := serve(t, ws, noSearch).connect(t)
				_, isSearcher := sb.(sandbox.FileSearcher)
				require.Equal(t, !noSearch, isSearcher, "the client offers search exactly when the daemon does")
				return sb
			})
		})
	}
}

// daemonProvider is the local provider whose sandboxes are reached through a sandboxd each:
// the provider contract run with every sandbox operation over HTTP.
type daemonProvider struct {
	*local.Provider
	tb testing.TB
}

func (p daemonProvider) Attach(ctx context.Context, ref sandbox.Ref) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Attach(ctx, ref)
	if err != nil {
		return nil, err
	}
	d := serve(p.tb, sb, false)
	return sandboxd.Connect(ctx, d.url, token, d.hc)
}

var roots sync.Map // testing.TB → provider root

func TestProviderContractOverHTTP(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			root, _ := roots.LoadOrStore(t, t.TempDir())
			return daemonProvider{Provider: local.New(root.(string)), tb: t}
		},
	})
}

func BenchmarkProviderOverHTTP(b *testing.B) {
	sandboxtest.Bench(b, daemonProvider{Provider: local.New(b.TempDir()), tb: b})
}

// do sends one raw request to the daemon.
func do(t *testing.T, d daemon, method, route, auth string, body io.Reader) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, d.url+route, body)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := d.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(data) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(data, &out), "%s", data)
	}
	return resp.StatusCode, out
}

func errorType(t *testing.T, body map[string]any) string {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "an error body: %v", body)
	require.NotEmpty(t, e["message"])
	return e["type"].(string)
}

func TestEveryRouteNeedsTheToken(t *testing.T) {
	t.Parallel()
	ws, _ := newWorkspace(t)
	d := serve(t, ws, false)
	routes := []struct{ method, route, body string }{
		{http.MethodGet, sandboxd.RouteHealth, ""},
		{http.MethodPost, sandboxd.RouteExec, `{"command":"touch pwned"}`},
		{http.MethodGet, sandboxd.RouteFile + "?path=a", ""},
		{http.MethodPut, sandboxd.RouteFile + "?path=pwned", "x"},
		{http.MethodPost, sandboxd.RouteFind, `{"pattern":"**"}`},
		{http.MethodPost, sandboxd.RouteGrep, `{"pattern":"x"}`},
	}
	for _, r := range routes {
		for _, auth := range []string{"", "Bearer wrong-token-0123456789abc", "Bearer " + token + "x", "Bearer " + token[:len(token)-1], token, "Basic " + token} {
			status, body := do(t, d, r.method, r.route, auth, strings.NewReader(r.body))
			require.Equal(t, http.StatusUnauthorized, status, "%s %s with %q", r.method, r.route, auth)
			require.Equal(t, "unauthorized", errorType(t, body))
		}
	}
	_, err := os.Stat(filepath.Join(ws.Dir(), "pwned"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing ran without the token")

	status, _ := do(t, d, http.MethodGet, sandboxd.RouteHealth, "Bearer "+token, nil)
	require.Equal(t, http.StatusOK, status)

	_, err = sandboxd.Connect(t.Context(), d.url, "wrong-token-0123456789abc", d.hc)
	require.ErrorContains(t, err, "refused the sandbox token")
	require.NotErrorIs(t, err, sandbox.ErrUnavailable, "a wrong token is no transport failure")
}

func TestBadRequestsGetJSONErrors(t *testing.T) {
	t.Parallel()
	ws, _ := newWorkspace(t)
	d := serve(t, ws, true)
	auth := "Bearer " + token
	cases := []struct {
		name, method, route, body string
		status                    int
		typ                       string
	}{
		{"unknown field", http.MethodPost, sandboxd.RouteExec, `{"command":"true","shell":"zsh"}`, 400, "invalid_request"},
		{"not JSON", http.MethodPost, sandboxd.RouteExec, `command=true`, 400, "invalid_request"},
		{"two values", http.MethodPost, sandboxd.RouteExec, `{"command":"true"}{"command":"true"}`, 400, "invalid_request"},
		{"negative timeout", http.MethodPost, sandboxd.RouteExec, `{"command":"true","timeout_ms":-1}`, 400, "invalid_request"},
		{"wrong method", http.MethodDelete, sandboxd.RouteFile + "?path=a", "", 405, "invalid_request"},
		{"no path", http.MethodGet, sandboxd.RouteFile, "", 400, "invalid_request"},
		{"two paths", http.MethodGet, sandboxd.RouteFile + "?path=a&path=b", "", 400, "invalid_request"},
		{"unknown route", http.MethodGet, "/v1/nothing", "", 404, "not_found"},
		{"search not offered", http.MethodPost, sandboxd.RouteFind, `{"pattern":"**"}`, 404, "not_found"},
		{"missing file", http.MethodGet, sandboxd.RouteFile + "?path=missing", "", 404, "not_found"},
		{"outside", http.MethodGet, sandboxd.RouteFile + "?path=../../etc/passwd", "", 403, "outside_workspace"},
		{"a directory", http.MethodGet, sandboxd.RouteFile + "?path=.", "", 422, "failed"},
		{"oversized JSON", http.MethodPost, sandboxd.RouteExec, `{"command":"` + strings.Repeat("x", sandboxd.MaxJSONBody) + `"}`, 413, "too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := do(t, d, c.method, c.route, auth, strings.NewReader(c.body))
			require.Equal(t, c.status, status)
			require.Equal(t, c.typ, errorType(t, body))
		})
	}
}

func TestOversizedWritesAreRefused(t *testing.T) {
	t.Parallel()
	ws, dir := newWorkspace(t)
	d := serve(t, ws, false)
	big := make([]byte, sandboxd.MaxWriteBody+1)

	// Declared too large: refused before the body is read.
	status, body := do(t, d, http.MethodPut, sandboxd.RouteFile+"?path=big", "Bearer "+token, bytes.NewReader(big))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "too_large", errorType(t, body))
	// Streamed without a length: cut at the limit.
	status, body = do(t, d, http.MethodPut, sandboxd.RouteFile+"?path=big", "Bearer "+token, io.MultiReader(bytes.NewReader(big)))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "too_large", errorType(t, body))
	_, err := os.Stat(filepath.Join(dir, "big"))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused write leaves nothing")

	sb := d.connect(t)
	require.ErrorContains(t, sb.WriteFile(t.Context(), "big", big), "the limit is")
	require.NoError(t, sb.WriteFile(t.Context(), "max", big[:sandboxd.MaxWriteBody]), "exactly the limit is fine")
	got, err := sb.ReadFile(t.Context(), "max")
	require.NoError(t, err)
	require.Len(t, got, sandboxd.MaxWriteBody)
}

func TestErrorsMapToTheSandboxSentinels(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ws, dir := newWorkspace(t)
	sb := serve(t, ws, false).connect(t)

	_, err := sb.ReadFile(ctx, "missing.txt")
	require.ErrorIs(t, err, sandbox.ErrNotExist)
	require.Equal(t, `read "missing.txt": file does not exist`, err.Error(), "the sandbox's own message")
	_, err = sb.ReadFile(ctx, "../outside")
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
	require.ErrorIs(t, sb.WriteFile(ctx, "/etc/x", nil), sandbox.ErrOutsideWorkspace)
	_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "true", Dir: "../.."})
	require.ErrorIs(t, err, sandbox.ErrOutsideWorkspace)
	_, err = sb.(sandbox.FileSearcher).FindFiles(ctx, sandbox.FindRequest{Dir: "nowhere", Pattern: "**"})
	require.ErrorIs(t, err, sandbox.ErrNotExist)

	// The pod's workspace removed from under the daemon: the sandbox is gone.
	require.NoError(t, os.RemoveAll(dir))
	_, err = sb.ReadFile(ctx, "a")
	require.ErrorIs(t, err, sandbox.ErrGone)
	_, err = sb.Exec(ctx, sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrGone)
}

func TestUnreachableDaemonIsUnavailable(t *testing.T) {
	t.Parallel()
	ws, _ := newWorkspace(t)
	d, stop := start(t, sandboxd.Config{Sandbox: ws, Token: token})
	t.Cleanup(stop)
	sb := d.connect(t)
	stop()

	_, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	_, err = sandboxd.Connect(t.Context(), d.url, token, d.hc)
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	var netErr net.Error
	require.True(t, errors.As(err, &netErr), "the transport error is kept: %v", err)
}

func TestConfigIsChecked(t *testing.T) {
	t.Parallel()
	ws, _ := newWorkspace(t)
	_, err := sandboxd.New(sandboxd.Config{Sandbox: ws, Token: "short"})
	require.ErrorContains(t, err, "at least 16 bytes")
	_, err = sandboxd.New(sandboxd.Config{Token: token})
	require.Error(t, err)
	_, err = sandboxd.Connect(t.Context(), "ftp://x", token, nil)
	require.ErrorContains(t, err, "http or https")
}

func TestCommandLimitsAreClampedToTheServers(t *testing.T) {
	t.Parallel()
	ws, _ := newWorkspace(t)
	srv, err := sandboxd.New(sandboxd.Config{Sandbox: ws, Token: token, MaxOutput: 10, MaxTimeout: time.Second})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	sb, err := sandboxd.Connect(t.Context(), ts.URL, token, ts.Client())
	require.NoError(t, err)

	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "printf '%0100d' 0", MaxOutput: 1000})
	require.NoError(t, err)
	require.True(t, res.Truncated)
	require.Len(t, res.Output, 10, "the server's ceiling wins over the request")

	res, err = sb.Exec(t.Context(), sandbox.ExecRequest{Command: "sleep 30", Timeout: time.Hour})
	require.NoError(t, err)
	require.True(t, res.TimedOut, "the server's longest timeout wins over the request")
}
