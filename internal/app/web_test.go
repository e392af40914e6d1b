package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestWebConfigFromEnv(t *testing.T) {
	t.Setenv("MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS", "yes")
	t.Setenv("MANAGED_AGENT_WEB_FETCH_TIMEOUT", "10s")
	t.Setenv("MANAGED_AGENT_WEB_FETCH_MAX_BYTES", "2m")
	t.Setenv("MANAGED_AGENT_WEB_SEARCH_BACKEND", "SearXNG")
	t.Setenv("MANAGED_AGENT_WEB_SEARCH_URL", "http://searxng:8080")
	t.Setenv("MANAGED_AGENT_WEB_SEARCH_API_KEY", "k")
	t.Setenv("MANAGED_AGENT_WEB_SEARCH_TIMEOUT", "5s")
	c := FromEnv(Config{})
	require.NoError(t, c.Validate())
	require.Equal(t, WebConfig{FetchAllowPrivateNetworks: true, FetchTimeout: 10 * time.Second, FetchMaxBytes: "2m",
		SearchBackend: "SearXNG", SearchURL: "http://searxng:8080", SearchAPIKey: "k", SearchTimeout: 5 * time.Second}, c.Web)
	n, err := c.Web.fetchMaxBytes()
	require.NoError(t, err)
	require.Equal(t, int64(2<<20), n)
}

func TestWebConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		w       WebConfig
		wantErr string
	}{
		{"unknown backend", WebConfig{SearchBackend: "bing", SearchURL: "http://x"}, `MANAGED_AGENT_WEB_SEARCH_BACKEND="bing": must be searxng, or empty for none`},
		{"backend without URL", WebConfig{SearchBackend: "searxng"}, "MANAGED_AGENT_WEB_SEARCH_URL is required with MANAGED_AGENT_WEB_SEARCH_BACKEND=searxng"},
		{"URL without backend", WebConfig{SearchURL: "http://searxng:8080"}, "MANAGED_AGENT_WEB_SEARCH_URL is set but MANAGED_AGENT_WEB_SEARCH_BACKEND is not: set it to searxng"},
		{"URL without scheme", WebConfig{SearchBackend: "searxng", SearchURL: "searxng:8080"}, "MANAGED_AGENT_WEB_SEARCH_URL: must be an http or https URL"},
		{"URL that does not parse", WebConfig{SearchBackend: "searxng", SearchURL: "http://[::1"}, "MANAGED_AGENT_WEB_SEARCH_URL: must be an http or https URL"},
		{"max bytes", WebConfig{FetchMaxBytes: "lots"}, `MANAGED_AGENT_WEB_FETCH_MAX_BYTES="lots": must be a size of at least 1k`},
		{"max bytes too small", WebConfig{FetchMaxBytes: "100"}, `MANAGED_AGENT_WEB_FETCH_MAX_BYTES="100"`},
		{"negative fetch timeout", WebConfig{FetchTimeout: -time.Second}, "MANAGED_AGENT_WEB_FETCH_TIMEOUT=-1s: must not be negative"},
		{"negative search timeout", WebConfig{SearchTimeout: -time.Second}, "MANAGED_AGENT_WEB_SEARCH_TIMEOUT=-1s: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Config{Web: tt.w}
			require.ErrorContains(t, c.Validate(), tt.wantErr)
			_, _, err := c.WebTools()
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestWebConfigUnparsedValues(t *testing.T) {
	t.Setenv("MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS", "sometimes")
	t.Setenv("MANAGED_AGENT_WEB_FETCH_TIMEOUT", "soon")
	t.Setenv("MANAGED_AGENT_WEB_SEARCH_TIMEOUT", "later")
	err := FromEnv(Config{}).Validate()
	require.ErrorContains(t, err, `MANAGED_AGENT_WEB_FETCH_ALLOW_PRIVATE_NETWORKS="sometimes": must be a boolean: 1, true, yes, on or 0, false, no, off`)
	require.ErrorContains(t, err, `MANAGED_AGENT_WEB_FETCH_TIMEOUT="soon": must be a duration such as 30s`)
	require.ErrorContains(t, err, `MANAGED_AGENT_WEB_SEARCH_TIMEOUT="later": must be a duration such as 15s`)
}

func TestWebToolsDefaults(t *testing.T) {
	t.Parallel()
	fetcher, searcher, err := Config{}.WebTools()
	require.NoError(t, err)
	t.Cleanup(fetcher.Close)
	require.False(t, searcher.Configured(), "no backend by default")
	tools := agentWebTools{fetch: fetcher, search: searcher} // as the worker's agent loop runs them
	content, isError := run(t, tools, wire.ToolNameWebSearch, `{"query":"q"}`)
	require.True(t, isError)
	require.Contains(t, *content[0].Text, "web_search is not configured on this server: set MANAGED_AGENT_WEB_SEARCH_BACKEND")
	// Private networks are refused by default: a literal loopback URL, before any connection.
	content, isError = run(t, tools, wire.ToolNameWebFetch, `{"url":"http://127.0.0.1:1/"}`)
	require.True(t, isError)
	require.Contains(t, *content[0].Text, "url_not_allowed")
}

func TestWebToolsSearXNG(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.Header.Get("Authorization") != "Bearer key" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		fmt.Fprint(w, `{"query":"q","results":[{"url":"https://go.dev/","title":"Go","content":"The Go language","publishedDate":null}]}`)
	}))
	t.Cleanup(srv.Close)
	fetcher, searcher, err := Config{Web: WebConfig{SearchBackend: "searxng", SearchURL: srv.URL, SearchAPIKey: "key"}}.WebTools()
	require.NoError(t, err)
	t.Cleanup(fetcher.Close)
	require.True(t, searcher.Configured())
	content, isError := run(t, agentWebTools{fetch: fetcher, search: searcher}, wire.ToolNameWebSearch, `{"query":"q"}`)
	require.False(t, isError)
	require.Len(t, content, 1)
	require.Equal(t, "https://go.dev/", content[0].SourceURL())
}

// Private networks allowed: web_fetch reaches a server on 127.0.0.1.
func TestWebToolsAllowPrivateNetworks(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "intranet page")
	}))
	t.Cleanup(srv.Close)
	tools, stop, err := Config{Web: WebConfig{FetchAllowPrivateNetworks: true}}.AgentWebTools()
	require.NoError(t, err)
	t.Cleanup(stop)
	in, _ := json.Marshal(map[string]string{"url": srv.URL + "/"})
	content, isError := run(t, tools, wire.ToolNameWebFetch, string(in))
	require.False(t, isError, "%+v", content)
	text, ok := content[0].TextSource()
	require.True(t, ok)
	require.Equal(t, "intranet page", text)
}

// run calls a web tool the way the agent loop does, with an enabled config of that tool.
func run(t *testing.T, tools agent.WebTools, name, input string) ([]wire.ContentBlock, bool) {
	t.Helper()
	r := tools.RunWeb(t.Context(), name, json.RawMessage(input), wire.ToolConfig{Name: name, Enabled: true})
	return r.Content, r.IsError
}

func TestAgentWebTools(t *testing.T) {
	t.Parallel()
	tools, stop, err := Config{}.AgentWebTools()
	require.NoError(t, err)
	t.Cleanup(stop)
	res := tools.RunWeb(t.Context(), wire.ToolNameWebFetch, json.RawMessage(`{"url":"http://169.254.169.254/"}`), wire.ToolConfig{Name: wire.ToolNameWebFetch, Enabled: true})
	require.True(t, res.IsError)
	require.Len(t, res.Content, 1)
	require.Contains(t, res.Text, "web_fetch error (url_not_allowed): http://169.254.169.254/: 169.254.169.254 is the cloud metadata address")
	res = tools.RunWeb(t.Context(), wire.ToolNameWebSearch, json.RawMessage(`{"query":"q"}`), wire.ToolConfig{Name: wire.ToolNameWebSearch})
	require.True(t, res.IsError)
	require.Contains(t, res.Text, "web_search is not configured on this server")
	res = tools.RunWeb(t.Context(), wire.ToolNameBash, nil, wire.ToolConfig{})
	require.True(t, res.IsError)
	require.Equal(t, `"bash" is not a web tool (web_fetch, web_search)`, res.Text)
	_, _, err = Config{Web: WebConfig{SearchBackend: "bing"}}.AgentWebTools()
	require.ErrorContains(t, err, "MANAGED_AGENT_WEB_SEARCH_BACKEND")
}
