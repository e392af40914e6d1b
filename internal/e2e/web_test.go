//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// webToolset is the agent toolset with web_fetch limited to domains and both web tools
// allowed.
func webToolset(t *testing.T, e *env, fetchConfig string) string {
	t.Helper()
	resp, body := e.raw("POST", "/v1/agents", `{"name":"web","model":"claude-opus-5","tools":[{"type":"agent_toolset_20260401",
		"configs":[`+fetchConfig+`]}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var agent struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &agent))
	return agent.ID
}

func newWebFixture(t *testing.T, e *env, agentID string) *turnFixture {
	t.Helper()
	envr, err := e.client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: "web-" + t.Name()})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agentID, envr.ID)
	require.NoError(t, err)
	return &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}
}

func TestWebFetchAndSearchEndToEnd(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Release notes</title><script>alert(1)</script></head>
			<body><h1>Version 2</h1><p>Faster <a href="/more">turns</a>.</p></body></html>`)
	}))
	t.Cleanup(page.Close)
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"query":%q,"results":[
			{"url":"https://go.dev/doc","title":"Go docs","content":"Documentation for Go."},
			{"url":"https://ads.example.com/x","title":"Ad","content":"Buy now."}]}`, r.URL.Query().Get("q"))
	}))
	t.Cleanup(searx.Close)

	e := newRunningEnv(t, func(c *app.Config) {
		// The page is on 127.0.0.1, which web_fetch refuses unless the deployment allows it.
		c.Web.FetchAllowPrivateNetworks = true
		c.Web.SearchBackend, c.Web.SearchURL = "searxng", searx.URL
	})
	agentID := webToolset(t, e, `{"name":"web_search","blocked_domains":["ads.example.com"]}`)
	f := newWebFixture(t, e, agentID)

	f.send(userMessage(fmt.Sprintf("/tool web_fetch {\"url\":%q}", page.URL+"/notes")))
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	res := fieldsOf(t, find(t, evs, "agent.tool_result"))
	require.Equal(t, false, res["is_error"], "%v", res)
	doc := res["content"].([]any)[0].(map[string]any)
	require.Equal(t, "document", doc["type"])
	require.Equal(t, "Release notes", doc["title"])
	data := doc["source"].(map[string]any)["data"].(string)
	require.Contains(t, data, "Version 2")
	require.Contains(t, data, "Faster")
	require.NotContains(t, data, "alert(1)", "scripts are not text")
	usage := fieldsOf(t, find(t, evs, "session.usage"))["usage"].(map[string]any)["server_tool_use"]
	require.Equal(t, map[string]any{"web_fetch_requests": 1.0, "web_search_requests": 0.0}, usage)

	f.send(userMessage(`/tool web_search {"query":"golang docs"}`))
	evs = f.untilIdle()
	res = fieldsOf(t, find(t, evs, "agent.tool_result"))
	require.Equal(t, false, res["is_error"], "%v", res)
	hits := res["content"].([]any)
	require.Len(t, hits, 1, "blocked_domains filters the ad")
	hit := hits[0].(map[string]any)
	require.Equal(t, "search_result", hit["type"])
	require.Equal(t, "https://go.dev/doc", hit["source"])
	require.Equal(t, "Go docs", hit["title"])
	usage = fieldsOf(t, find(t, evs, "session.usage"))["usage"].(map[string]any)["server_tool_use"]
	require.Equal(t, map[string]any{"web_fetch_requests": 1.0, "web_search_requests": 1.0}, usage, "usage is cumulative")

	sess, err := e.client.Beta.Sessions.Get(context.Background(), f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.EqualValues(t, 1, sess.Usage.ServerToolUse.WebFetchRequests)
	require.EqualValues(t, 1, sess.Usage.ServerToolUse.WebSearchRequests)
}

func TestWebFetchRefusesPrivateAddressesByDefault(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32 // the server's handler runs on its own goroutines
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(local.Close)
	e := newRunningEnv(t)
	f := newWebFixture(t, e, webToolset(t, e, ""))

	f.send(userMessage(fmt.Sprintf("/tool web_fetch {\"url\":%q}\n/tool web_search {\"query\":\"x\"}", local.URL)))
	evs := f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	var texts []string
	for _, ev := range evs {
		if ev.Type == "agent.tool_result" {
			text, isErr := mcpResultText(t, ev)
			require.True(t, isErr)
			texts = append(texts, text)
		}
	}
	require.Len(t, texts, 2)
	require.Contains(t, texts[0], "url_not_allowed", "the cluster's own addresses are not the model's to read")
	require.Contains(t, texts[1], "MANAGED_AGENT_WEB_SEARCH_BACKEND", "an unconfigured search says how to configure it")
	require.Zero(t, hits.Load())
	usage := fieldsOf(t, find(t, evs, "session.usage"))["usage"].(map[string]any)["server_tool_use"]
	require.Equal(t, map[string]any{"web_fetch_requests": 1.0, "web_search_requests": 1.0}, usage, "a refused request still counts as a request the tool handled")
}
