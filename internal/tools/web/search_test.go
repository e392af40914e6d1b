package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// searxngResult is one entry of a SearXNG /search?format=json answer, in the shape the
// instance sends it (searx/webapp.py; keys the backend ignores included).
func searxngResult(url, title, content string, published any) map[string]any {
	return map[string]any{
		"url": url, "title": title, "content": content, "publishedDate": published,
		"engine": "duckduckgo", "engines": []string{"duckduckgo", "brave"}, "positions": []int{1, 3},
		"parsed_url": []string{"https", "example.com", "/", "", "", ""}, "template": "default.html",
		"score": 2.5, "category": "general", "thumbnail": nil, "img_src": "", "priority": "",
	}
}

// fakeSearXNG serves /search like a SearXNG instance with json enabled; it records the
// requests it got.
type fakeSearXNG struct {
	mu       sync.Mutex
	requests []*http.Request
	results  []map[string]any
	status   int
	body     string
	delay    time.Duration
}

func (f *fakeSearXNG) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(f.delay):
		}
	}
	if r.URL.Path != "/searx/search" || r.URL.Query().Get("format") != "json" {
		http.NotFound(w, r)
		return
	}
	if f.status != 0 {
		http.Error(w, "backend trouble", f.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if f.body != "" {
		fmt.Fprint(w, f.body)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"query": r.URL.Query().Get("q"), "number_of_results": 0, "results": f.results,
		"answers": []any{}, "corrections": []any{}, "infoboxes": []any{}, "suggestions": []string{"more"},
		"unresponsive_engines": [][]string{{"google", "timeout"}},
	})
}

func (f *fakeSearXNG) lastQuery() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1].URL.Query().Get("q")
}

func (f *fakeSearXNG) first() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[0]
}

func newSearXNGSearcher(t *testing.T, fake *fakeSearXNG, apiKey string, cfg SearchConfig) *Searcher {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	b, err := NewSearXNG(SearXNGConfig{BaseURL: srv.URL + "/searx/", APIKey: apiKey})
	require.NoError(t, err)
	t.Cleanup(b.client.CloseIdleConnections)
	return NewSearcher(b, cfg)
}

func query(q string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"query": q})
	return b
}

// hitsOf checks that a result is valid tool_result content that survives the log's JSON round
// trip, and returns each search_result's URL, title and text.
func hitsOf(t *testing.T, r Result) [][3]string {
	t.Helper()
	require.False(t, r.IsError, r.Text())
	b, err := json.Marshal(r.Content)
	require.NoError(t, err)
	var back []wire.ContentBlock
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, wire.ValidateContent("content", back, wire.ToolResultBlocks))
	var out [][3]string
	for _, c := range back {
		require.Equal(t, wire.ContentTypeSearchResult, c.Type)
		require.JSONEq(t, `{"enabled":true}`, string(c.Citations))
		require.Len(t, c.Content, 1)
		out = append(out, [3]string{c.SourceURL(), *c.Title, *c.Content[0].Text})
	}
	return out
}

func TestSearchSearXNG(t *testing.T) {
	t.Parallel()
	fake := &fakeSearXNG{results: []map[string]any{
		searxngResult("https://go.dev/doc/", "Documentation - The Go\n Programming Language", "The Go programming language is an open source project.", "2024-05-01T00:00:00"),
		searxngResult("https://pkg.go.dev/net/http", "http package", "", nil),
		searxngResult("https://go.dev/doc/", "duplicate", "dup", nil),
		searxngResult("javascript:alert(1)", "not a page", "x", nil),
		searxngResult("https://blog.example.com/go", "", "A blog post", 12345),
		searxngResult("https://long.example.com/", strings.Repeat("t", 400), "long", nil),
	}}
	s := newSearXNGSearcher(t, fake, "secret-key", SearchConfig{})
	got := hitsOf(t, s.Search(t.Context(), query("golang docs"), Options{}))
	require.Equal(t, [][3]string{
		{"https://go.dev/doc/", "Documentation - The Go Programming Language", "The Go programming language is an open source project.\n(published 2024-05-01T00:00:00)"},
		{"https://pkg.go.dev/net/http", "http package", "http package"},
		{"https://blog.example.com/go", "https://blog.example.com/go", "A blog post"},
		{"https://long.example.com/", strings.Repeat("t", maxTitleRunes-1) + "…", "long"},
	}, got, "duplicates and non-http URLs dropped; empty snippets and titles filled")
	require.Equal(t, "golang docs", fake.lastQuery())
	require.Equal(t, "Bearer secret-key", fake.first().Header.Get("Authorization"))
	require.Equal(t, "1", fake.first().URL.Query().Get("pageno"))
}

func TestSearchDomainsAndLimits(t *testing.T) {
	t.Parallel()
	var many []map[string]any
	for i := range 15 {
		many = append(many, searxngResult(fmt.Sprintf("https://docs.example.com/p%d", i), fmt.Sprintf("page %d", i), "s", nil))
	}
	mixed := []map[string]any{
		searxngResult("https://docs.example.com/api/v1", "api", "s", nil),
		searxngResult("https://docs.example.com/apix", "apix", "s", nil),
		searxngResult("https://www.docs.example.com/guide", "guide", "s", nil),
		searxngResult("https://ads.example.net/buy", "ad", "s", nil),
		searxngResult("https://x.ads.example.net/buy", "ad2", "s", nil),
		searxngResult("https://notdocs.example.com/", "other", "s", nil),
	}
	tests := []struct {
		name      string
		results   []map[string]any
		opts      Options
		cfg       SearchConfig
		wantURLs  []string
		wantQuery string
	}{
		{name: "at most 10 by default", results: many, wantURLs: urls("https://docs.example.com/p%d", 10), wantQuery: "q"},
		{name: "a lower cap", results: many, cfg: SearchConfig{MaxResults: 3}, wantURLs: urls("https://docs.example.com/p%d", 3), wantQuery: "q"},
		{name: "one allowed domain: filtered, and a site: term", results: mixed, opts: Options{AllowedDomains: []string{"docs.example.com"}},
			wantURLs:  []string{"https://docs.example.com/api/v1", "https://docs.example.com/apix", "https://www.docs.example.com/guide"},
			wantQuery: "q site:docs.example.com"},
		{name: "an allowed domain with a path", results: mixed, opts: Options{AllowedDomains: []string{"docs.example.com/api"}},
			wantURLs: []string{"https://docs.example.com/api/v1"}, wantQuery: "q"},
		{name: "two allowed domains: filtered only", results: mixed, opts: Options{AllowedDomains: []string{"notdocs.example.com", "ads.example.net"}},
			wantURLs: []string{"https://ads.example.net/buy", "https://x.ads.example.net/buy", "https://notdocs.example.com/"}, wantQuery: "q"},
		{name: "blocked domains", results: mixed, opts: Options{BlockedDomains: []string{"ads.example.net", "docs.example.com/api"}},
			wantURLs:  []string{"https://docs.example.com/apix", "https://www.docs.example.com/guide", "https://notdocs.example.com/"},
			wantQuery: "q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeSearXNG{results: tt.results}
			s := newSearXNGSearcher(t, fake, "", tt.cfg)
			var got []string
			for _, h := range hitsOf(t, s.Search(t.Context(), query("q"), tt.opts)) {
				got = append(got, h[0])
			}
			require.Equal(t, tt.wantURLs, got)
			require.Equal(t, tt.wantQuery, fake.lastQuery())
			require.Empty(t, fake.first().Header.Get("Authorization"))
		})
	}
}

func urls(format string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(format, i))
	}
	return out
}

func TestSearchNoResults(t *testing.T) {
	t.Parallel()
	fake := &fakeSearXNG{results: []map[string]any{searxngResult("https://ads.example.net/", "ad", "s", nil)}}
	s := newSearXNGSearcher(t, fake, "", SearchConfig{})
	r := s.Search(t.Context(), query("q"), Options{BlockedDomains: []string{"ads.example.net"}})
	require.False(t, r.IsError)
	require.Equal(t, `No results for "q" within the agent's allowed_domains/blocked_domains.`, r.Text())
	empty := newSearXNGSearcher(t, &fakeSearXNG{}, "", SearchConfig{})
	require.Equal(t, `No results for "q".`, empty.Search(t.Context(), query("q"), Options{}).Text())
}

func TestSearchErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fake    *fakeSearXNG
		cfg     SearchConfig
		input   string
		wantErr string
	}{
		{"backend 500", &fakeSearXNG{status: 500}, SearchConfig{}, `{"query":"q"}`, "web_search error (unavailable): the search backend failed: searxng at 127.0.0.1:"},
		{"json not enabled", &fakeSearXNG{status: 403}, SearchConfig{}, `{"query":"q"}`, "HTTP 403: the instance does not serve format=json (add json to search.formats in its settings.yml)"},
		{"rate limited", &fakeSearXNG{status: 429}, SearchConfig{}, `{"query":"q"}`, "HTTP 429: rate limited"},
		{"not SearXNG's JSON", &fakeSearXNG{body: "<html>"}, SearchConfig{}, `{"query":"q"}`, "the answer is not SearXNG's JSON"},
		{"timeout", &fakeSearXNG{delay: 5 * time.Second}, SearchConfig{Timeout: 100 * time.Millisecond}, `{"query":"q"}`, "web_search error (unavailable): the search backend did not answer within 100ms"},
		{"no query", &fakeSearXNG{}, SearchConfig{}, `{}`, "web_search error (invalid_tool_input): query is required"},
		{"blank query", &fakeSearXNG{}, SearchConfig{}, `{"query":"  "}`, "query is required"},
		{"unknown field", &fakeSearXNG{}, SearchConfig{}, `{"query":"q","n":3}`, "web_search error (invalid_tool_input)"},
		{"not an object", &fakeSearXNG{}, SearchConfig{}, `"q"`, "expected a JSON object"},
		{"query too long", &fakeSearXNG{}, SearchConfig{}, `{"query":"` + strings.Repeat("é", maxQueryChars+1) + `"}`, "web_search error (query_too_long): the query has 1001 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSearXNGSearcher(t, tt.fake, "", tt.cfg)
			r := s.Search(t.Context(), json.RawMessage(tt.input), Options{})
			require.True(t, r.IsError)
			require.Len(t, r.Content, 1)
			require.Contains(t, r.Text(), tt.wantErr)
			require.NotContains(t, r.Text(), "search?q=", "the query URL stays out of the message")
		})
	}
}

func TestSearchNotConfigured(t *testing.T) {
	t.Parallel()
	s := NewSearcher(nil, SearchConfig{})
	require.False(t, s.Configured())
	r := s.Search(t.Context(), query("q"), Options{})
	require.True(t, r.IsError)
	require.Equal(t, "web_search error (unavailable): web_search is not configured on this server: set MANAGED_AGENT_WEB_SEARCH_BACKEND (searxng) and MANAGED_AGENT_WEB_SEARCH_URL (docs/web-tools.md)", r.Text())
	again := s.Search(t.Context(), query("q"), OptionsFor(wire.ToolConfig{}))
	content, isError := again.Content, again.IsError
	require.True(t, isError)
	require.Equal(t, r.Content, content)
	var nilSearcher *Searcher
	require.False(t, nilSearcher.Configured())
}

// Any Backend plugs in; the Searcher hands it the agent's settings.
type recordingBackend struct{ got Query }

func (b *recordingBackend) Search(_ context.Context, q Query) ([]Hit, error) {
	b.got = q
	return []Hit{{URL: "https://a.example/", Title: "A", Snippet: "a"}}, nil
}

func TestSearchBackendGetsTheQuery(t *testing.T) {
	t.Parallel()
	b := &recordingBackend{}
	loc := &wire.ToolUserLocation{Type: wire.ToolUserLocationApproximate, Country: ptr("US")}
	s := NewSearcher(b, SearchConfig{MaxResults: 4})
	require.True(t, s.Configured())
	require.Len(t, hitsOf(t, s.Search(t.Context(), query(" q "), Options{AllowedDomains: []string{"a.example"}, UserLocation: loc})), 1)
	require.Equal(t, Query{Text: "q", MaxResults: 4, AllowedDomains: []string{"a.example"}, UserLocation: loc}, b.got)
}

func TestNewSearXNGValidatesTheURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "searxng:8080", "ftp://x", "http://"} {
		_, err := NewSearXNG(SearXNGConfig{BaseURL: bad})
		require.ErrorContains(t, err, "must be an http or https URL", bad)
	}
	b, err := NewSearXNG(SearXNGConfig{BaseURL: "https://search.example/sub/?x=1#f"})
	require.NoError(t, err)
	require.Equal(t, "https://search.example/sub/search", b.search.String())
}
