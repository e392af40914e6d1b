package e2b_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b"
	"github.com/managed-agents/managed-agents/internal/sandbox/e2b/e2bfake"
	"github.com/managed-agents/managed-agents/internal/sandbox/remote"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	"github.com/managed-agents/managed-agents/internal/tools/toolstest"
	"github.com/managed-agents/managed-agents/internal/wire"
)

const key = "e2b_test_key"

var fast = remote.Retry{Max: 3, WaitMin: time.Millisecond, WaitMax: 5 * time.Millisecond}

func newFake(t testing.TB, opts e2bfake.Options) *e2bfake.Fake {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = key
	}
	opts.Dir = t.TempDir()
	f := e2bfake.New(opts)
	t.Cleanup(f.Close)
	return f
}

// e2bEnv is the worker's variables pointing the e2b provider at f.
func e2bEnv(f *e2bfake.Fake, extra ...string) map[string]string {
	env := map[string]string{
		"MANAGED_AGENT_E2B_API_URL":           f.URL(),
		"MANAGED_AGENT_E2B_API_KEY":           key,
		"MANAGED_AGENT_E2B_SANDBOX_PROXY_URL": f.EnvdURL(),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

func newProvider(t testing.TB, f *e2bfake.Fake, extra ...string) *e2b.Provider {
	t.Helper()
	cfg, err := e2b.ConfigFrom(e2bEnv(f, extra...))
	require.NoError(t, err)
	cfg.Retry = fast
	p, err := e2b.New(cfg)
	require.NoError(t, err)
	return p
}

// newSandbox creates and attaches a sandbox of a fresh session, destroyed after the test.
func newSandbox(t testing.TB, p *e2b.Provider, session string) (sandbox.Ref, sandbox.Sandbox) {
	t.Helper()
	spec := sandbox.SpecFor(session, wire.EnvironmentConfig{Type: "cloud"})
	ref, err := p.Create(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ref) })
	sb, err := p.Attach(context.Background(), ref)
	require.NoError(t, err)
	return ref, sb
}

var (
	fakes    sync.Map // *testing.T → *e2bfake.Fake
	sessions atomic.Int64
)

// session is a session id no other test of the process uses.
func session(prefix string) string { return fmt.Sprintf("%s_%d", prefix, sessions.Add(1)) }

func mustURL(t testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestProviderContract(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			// One fake per test, whichever instance asks: a fresh provider is a restart.
			f, _ := fakes.LoadOrStore(t, newFake(t, e2bfake.Options{}))
			return newProvider(t, f.(*e2bfake.Fake))
		},
		Forged: []sandbox.Ref{
			{Provider: e2b.NameE2B, ExternalID: ".."},
			{Provider: e2b.NameE2B, ExternalID: "../x"},
			{Provider: e2b.NameE2B, ExternalID: "a/b"},
			{Provider: e2b.NameE2B, ExternalID: "-leading-dash"},
			{Provider: e2b.NameE2B, ExternalID: "with space"},
			{Provider: e2b.NameE2B, ExternalID: "x.evil.example"},
			{Provider: e2b.NameE2B, ExternalID: strings.Repeat("a", 64)},
		},
	})
}

func TestToolsSuite(t *testing.T) {
	t.Parallel()
	f := newFake(t, e2bfake.Options{})
	p := newProvider(t, f)
	toolstest.Run(t, func(t *testing.T) sandbox.Sandbox {
		_, sb := newSandbox(t, p, session("sesn_tools"))
		return sb
	})
}

func TestCubeSandbox(t *testing.T) {
	t.Parallel()
	// CubeAPI: Bearer auth, envd 0.2.0, which has no default user and takes uploads as
	// multipart only.
	f := newFake(t, e2bfake.Options{Bearer: true, EnvdVersion: "0.2.0"})
	_, err := e2b.CubeConfigFrom(map[string]string{})
	require.ErrorContains(t, err, "MANAGED_AGENT_CUBESANDBOX_API_URL is not set")
	require.ErrorContains(t, err, "MANAGED_AGENT_CUBESANDBOX_TEMPLATE is not set")
	cfg, err := e2b.CubeConfigFrom(map[string]string{
		"MANAGED_AGENT_CUBESANDBOX_API_URL":           f.URL(),
		"MANAGED_AGENT_CUBESANDBOX_API_KEY":           key,
		"MANAGED_AGENT_CUBESANDBOX_TEMPLATE":          "tpl-python",
		"MANAGED_AGENT_CUBESANDBOX_SANDBOX_PROXY_URL": f.EnvdURL(),
		"MANAGED_AGENT_CUBESANDBOX_USER":              "agent",
	})
	require.NoError(t, err)
	require.False(t, cfg.AutoPause, "CubeSandbox does not auto-pause by default")
	cfg.Retry = fast
	p, err := e2b.New(cfg)
	require.NoError(t, err)
	require.Equal(t, e2b.NameCube, p.Name())

	ref, sb := newSandbox(t, p, session("sesn_cube"))
	require.Equal(t, e2b.NameCube, ref.Provider)
	require.NoError(t, sb.WriteFile(t.Context(), "d/hello.txt", []byte("hi")))
	data, err := sb.ReadFile(t.Context(), "d/hello.txt")
	require.NoError(t, err)
	require.Equal(t, "hi", string(data))
	res, err := sb.Exec(t.Context(), sandbox.ExecRequest{Command: "cat d/hello.txt; echo"})
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(res.Output))
	require.Equal(t, "tpl-python", f.Sandboxes()[0].Template)
	require.False(t, f.Sandboxes()[0].AutoPause)

	// CubeAPI reads auto-pause from lifecycle.onTimeout.
	cfg.AutoPause = true
	paused, err := e2b.New(cfg)
	require.NoError(t, err)
	pref, err := paused.Create(t.Context(), sandbox.SpecFor(session("sesn_cube_pause"), wire.EnvironmentConfig{}))
	require.NoError(t, err)
	for _, s := range f.Sandboxes() {
		if s.ID == pref.ExternalID {
			require.True(t, s.AutoPause)
		}
	}

	users := f.Users()
	require.Positive(t, users["agent"], "every data-plane request names the configured user")
	require.Zero(t, users[""], "none goes without it")

	// What a client that leaves the user out gets from envd 0.2.0.
	req, err := http.NewRequest(http.MethodGet, f.EnvdURL()+"/health", nil)
	require.NoError(t, err)
	req.Header.Set("E2b-Sandbox-Id", ref.ExternalID)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// X-API-Key is E2B's header: the Cube flavour sends the key as a Bearer token.
	wrong := newFake(t, e2bfake.Options{Bearer: false})
	cfg.APIURL = mustURL(t, wrong.URL())
	p2, err := e2b.New(cfg)
	require.NoError(t, err)
	_, err = p2.Create(t.Context(), sandbox.SpecFor("sesn_x", wire.EnvironmentConfig{}))
	require.ErrorIs(t, err, remote.ErrAuth)
	require.ErrorContains(t, err, "MANAGED_AGENT_CUBESANDBOX_API_KEY")
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := e2b.ConfigFrom(map[string]string{
		"MANAGED_AGENT_E2B_API_URL":   "ftp://x",
		"MANAGED_AGENT_E2B_TIMEOUT":   "5s",
		"MANAGED_AGENT_E2B_WORKSPACE": "relative",
		"MANAGED_AGENT_E2B_USER":      "Bad User",
		"MANAGED_AGENT_E2B_DOMAIN":    "a/b",
	})
	require.Error(t, err)
	for _, name := range []string{"MANAGED_AGENT_E2B_API_URL", "MANAGED_AGENT_E2B_API_KEY is not set", "MANAGED_AGENT_E2B_TIMEOUT",
		"MANAGED_AGENT_E2B_WORKSPACE", "MANAGED_AGENT_E2B_USER", "MANAGED_AGENT_E2B_DOMAIN"} {
		require.ErrorContains(t, err, name)
	}
	cfg, err := e2b.ConfigFrom(map[string]string{"MANAGED_AGENT_E2B_API_KEY": "k"})
	require.NoError(t, err)
	require.Equal(t, e2b.DefaultE2BAPIURL, cfg.APIURL.String())
	require.Equal(t, "base", cfg.Template)
	require.True(t, cfg.AutoPause)
	require.False(t, cfg.Bearer)
	require.Nil(t, cfg.ProxyURL)
	require.ElementsMatch(t, e2b.Settings, keysWithPrefix(e2b.Settings, "MANAGED_AGENT_E2B_"))
	require.NoError(t, e2b.Check(map[string]string{"MANAGED_AGENT_E2B_API_KEY": "k"}))
}

func keysWithPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
