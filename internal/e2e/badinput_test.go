//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"
)

// invalidUTF8 is a byte that can start no UTF-8 sequence.
const invalidUTF8 = "\xff"

// nested returns n nested JSON arrays around 1: [[[1]]].
func nested(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }

// schemaOfSize is a custom tool input_schema whose compact JSON is exactly n bytes.
func schemaOfSize(n int) string {
	const frame = `{"type":"object","description":""}`
	return `{"type":"object","description":"` + strings.Repeat("d", n-len(frame)) + `"}`
}

func customAgentBody(name string, schemas ...string) string {
	tools := make([]string, len(schemas))
	for i, s := range schemas {
		tools[i] = fmt.Sprintf(`{"type":"custom","name":"t%d","description":"d","input_schema":%s}`, i, s)
	}
	return `{"name":"` + name + `","model":"claude-opus-5","tools":[` + strings.Join(tools, ",") + `]}`
}

// TestBadInputIs400 sends text that PostgreSQL or the clients cannot take (NUL, invalid
// UTF-8, lone surrogates), over-deep and oversized JSON, bad base64 and unclean paths through
// every door of the API: each answer is a 4xx in the error envelope naming the field, and
// nothing is written.
func TestBadInputIs400(t *testing.T) {
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	agentPath, envPath, sessPath := "/v1/agents/"+f.agent.ID, "/v1/environments/"+f.envID, "/v1/sessions/"+sess.ID
	msg := func(block string) string { return `{"events":[{"type":"user.message","content":[` + block + `]}]}` }
	forged, err := json.Marshal(map[string]any{"k": "agents", "o": "desc", "t": "2026-01-01T00:00:00Z", "i": "agent_\u0000"})
	require.NoError(t, err)
	forgedPage := "page_" + base64.RawURLEncoding.EncodeToString(forged)
	hugeKey := strings.Repeat("k", 1<<20)

	cases := []struct {
		name, method, path, body string
		status                   int
		msgPart                  string
	}{
		// NUL and invalid UTF-8 in bodies, named by their JSON path.
		{"agent name NUL", "POST", "/v1/agents", `{"name":"a\u0000b","model":"claude-opus-5"}`, 400, "name: must not contain NUL"},
		{"agent name invalid UTF-8", "POST", "/v1/agents", `{"name":"a` + invalidUTF8 + `b","model":"claude-opus-5"}`, 400, "name: must be valid UTF-8"},
		{"agent name lone surrogate", "POST", "/v1/agents", `{"name":"a\ud800b","model":"claude-opus-5"}`, 400, "name: must be valid UTF-8"},
		{"agent system NUL", "POST", "/v1/agents", `{"name":"a","model":"claude-opus-5","system":"\u0000"}`, 400, "system: must not contain NUL"},
		{"agent model id NUL", "POST", "/v1/agents", `{"name":"a","model":{"id":"m\u0000"}}`, 400, "model.id: must not contain NUL"},
		{"agent metadata key NUL", "POST", "/v1/agents", `{"name":"a","model":"claude-opus-5","metadata":{"k\u0000":"v"}}`, 400, "metadata: keys must not contain NUL"},
		{"agent metadata value invalid UTF-8", "POST", "/v1/agents", `{"name":"a","model":"claude-opus-5","metadata":{"k":"` + invalidUTF8 + `"}}`, 400, "metadata.k: must be valid UTF-8"},
		{"tool schema NUL", "POST", "/v1/agents", customAgentBody("a", `{"type":"object","properties":{"x":{"type":"string","description":"\u0000"}}}`), 400, "tools[0].input_schema.properties.x.description: must not contain NUL"},
		{"agent update name NUL", "POST", agentPath, `{"version":1,"name":"\u0000"}`, 400, "name: must not contain NUL"},
		{"agent archive body NUL key", "POST", agentPath + "/archive", `{"\u0000":1}`, 400, "keys must not contain NUL"},
		{"environment name NUL", "POST", "/v1/environments", `{"name":"e\u0000"}`, 400, "name: must not contain NUL"},
		{"environment package NUL", "POST", "/v1/environments", `{"name":"e","config":{"type":"cloud","packages":{"pip":["numpy\u0000"]}}}`, 400, "config.packages.pip[0]: must not contain NUL"},
		{"environment update metadata invalid UTF-8", "POST", envPath, `{"metadata":{"k":"` + invalidUTF8 + `"}}`, 400, "metadata.k: must be valid UTF-8"},
		{"session title NUL", "POST", "/v1/sessions", `{"agent":"` + f.agent.ID + `","environment_id":"` + f.envID + `","title":"\u0000"}`, 400, "title: must not contain NUL"},
		{"session agent id NUL", "POST", "/v1/sessions", `{"agent":"agent_\u0000","environment_id":"` + f.envID + `"}`, 400, "agent: must not contain NUL"},
		{"session environment id invalid UTF-8", "POST", "/v1/sessions", `{"agent":"` + f.agent.ID + `","environment_id":"env_` + invalidUTF8 + `"}`, 400, "environment_id: must be valid UTF-8"},
		{"session update title invalid UTF-8", "POST", sessPath, `{"title":"` + invalidUTF8 + `"}`, 400, "title: must be valid UTF-8"},
		{"event text NUL", "POST", sessPath + "/events", msg(`{"type":"text","text":"a\u0000b"}`), 400, "events[0].content[0].text: must not contain NUL"},
		{"event text invalid UTF-8", "POST", sessPath + "/events", msg(`{"type":"text","text":"a` + invalidUTF8 + `"}`), 400, "events[0].content[0].text: must be valid UTF-8"},
		{"event type NUL", "POST", sessPath + "/events", `{"events":[{"type":"user.message\u0000"}]}`, 400, "events[0].type: must not contain NUL"},

		// Depth, size and count limits.
		{"nesting deeper than 64", "POST", "/v1/agents", customAgentBody("a", `{"type":"object","default":`+nested(61)+`}`), 400, "nesting is deeper than 64 levels"},
		{"nesting 1,000 deep in an event", "POST", sessPath + "/events", msg(`{"type":"text","text":"x","x":` + nested(1000) + `}`), 400, "nesting is deeper than 64 levels"},
		{"input_schema over 64 KiB", "POST", "/v1/agents", customAgentBody("a", schemaOfSize(64<<10+1)), 400, "tools[0].input_schema: must be at most 65536 bytes"},
		{"input_schemas over 256 KiB in all", "POST", "/v1/agents", customAgentBody("a", schemaOfSize(64<<10), schemaOfSize(64<<10), schemaOfSize(64<<10), schemaOfSize(64<<10), schemaOfSize(100)), 400, "tools[4].input_schema: the input_schemas of all custom tools must total at most 262144 bytes"},
		{"too many packages", "POST", "/v1/environments", `{"name":"e","config":{"type":"cloud","packages":{"npm":[` + strings.TrimSuffix(strings.Repeat(`"p",`, 101), ",") + `]}}}`, 400, "config.packages.npm: at most 100 packages"},
		{"package spec too long", "POST", "/v1/environments", `{"name":"e","config":{"type":"cloud","packages":{"apt":["` + strings.Repeat("p", 513) + `"]}}}`, 400, "config.packages.apt[0]: must be at most 512 characters"},

		// Content blocks.
		{"image base64 not base64", "POST", sessPath + "/events", msg(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!"}}`), 400, "events[0].content[0].source.data: must be non-empty standard base64"},
		{"image media type not an image", "POST", sessPath + "/events", msg(`{"type":"image","source":{"type":"base64","media_type":"text/html","data":"aGk="}}`), 400, "events[0].content[0].source.media_type: must be image/jpeg, image/png, image/gif, image/webp"},
		{"document base64 not a PDF", "POST", sessPath + "/events", msg(`{"type":"document","source":{"type":"base64","media_type":"image/png","data":"aGk="}}`), 400, "source.media_type: must be application/pdf"},

		// Path ids, query parameters and headers.
		{"session id NUL", "GET", "/v1/sessions/sesn_%00", "", 400, "session_id: must not contain NUL"},
		{"session id invalid UTF-8", "GET", "/v1/sessions/sesn_%FF", "", 400, "session_id: must be valid UTF-8"},
		{"delete session id NUL", "DELETE", "/v1/sessions/sesn_%00", "", 400, "session_id: must not contain NUL"},
		{"session events id NUL", "POST", "/v1/sessions/sesn_%00/events", msg(`{"type":"text","text":"x"}`), 400, "session_id: must not contain NUL"},
		{"agent id NUL", "GET", "/v1/agents/agent_%00", "", 400, "agent_id: must not contain NUL"},
		{"agent versions id invalid UTF-8", "GET", "/v1/agents/agent_%C3/versions", "", 400, "agent_id: must be valid UTF-8"},
		{"environment id NUL", "GET", "/v1/environments/env_%00", "", 400, "environment_id: must not contain NUL"},
		{"agent_id filter NUL", "GET", "/v1/sessions?agent_id=agent_%00", "", 400, "agent_id: must not contain NUL"},
		{"agent_id filter invalid UTF-8", "GET", "/v1/sessions?agent_id=%FF", "", 400, "agent_id: must be valid UTF-8"},
		{"after_id NUL", "GET", sessPath + "/events/stream?after_id=sevt_%00", "", 400, "after_id: must not contain NUL"},
		{"unknown parameter NUL", "GET", "/v1/agents?x=%00", "", 400, "x: must not contain NUL"},
		{"forged page cursor with NUL", "GET", "/v1/agents?page=" + forgedPage, "", 400, "invalid page cursor"},

		// Paths the mux would redirect with a 307 and an HTML body.
		{"empty id segment", "POST", "/v1/sessions//events", msg(`{"type":"text","text":"x"}`), 404, "Not found"},
		{"dot-dot segment", "GET", "/v1/agents/../x", "", 404, "Not found"},
		{"dot segment", "GET", "/v1/./agents", "", 404, "Not found"},
		{"double slash", "GET", "//v1/agents", "", 404, "Not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.raw(tc.method, tc.path, tc.body)
			errType := "invalid_request_error"
			if tc.status == http.StatusNotFound {
				errType = "not_found_error"
			}
			requireRawErr(t, resp, body, tc.status, errType, tc.msgPart)
		})
	}

	t.Run("Last-Event-ID invalid UTF-8", func(t *testing.T) {
		resp, body := f.raw("GET", sessPath+"/events/stream", "", "Last-Event-ID", "sevt_"+invalidUTF8)
		requireRawErr(t, resp, body, 400, "invalid_request_error", "Last-Event-ID: must be valid UTF-8")
	})
	t.Run("a 1 MB input is not echoed", func(t *testing.T) {
		resp, body := f.raw("POST", "/v1/agents", `{"name":"a","model":"claude-opus-5","metadata":{"`+hugeKey+`":"v"}}`)
		eb := requireRawErr(t, resp, body, 400, "invalid_request_error", "metadata")
		require.Less(t, len(eb.Error.Message), 2048)
		resp, body = f.raw("POST", "/v1/agents", `{"name":"a","model":"claude-opus-5","`+hugeKey+`":1}`)
		eb = requireRawErr(t, resp, body, 400, "invalid_request_error", "unknown field")
		require.Less(t, len(eb.Error.Message), 2048)
	})

	// Nothing of any rejected request was written.
	page, err := f.client.Beta.Agents.List(context.Background(), anthropic.BetaAgentListParams{})
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	envs, err := f.client.Beta.Environments.List(context.Background(), anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Len(t, envs.Data, 1)
	sessions, err := f.client.Beta.Sessions.List(context.Background(), anthropic.BetaSessionListParams{})
	require.NoError(t, err)
	require.Len(t, sessions.Data, 1)
	require.Empty(t, f.eventsOf(sess.ID))
}

// TestSDKListsTheDeepestAndLargestAgent stores the deepest and the largest agents the limits
// accept and checks that the official SDK still parses the lists that return them (before the
// limits, one over-deep schema made GET /v1/agents unreadable for the SDK).
func TestSDKListsTheDeepestAndLargestAgent(t *testing.T) {
	f := newSessionFixture(t)
	ctx := context.Background()
	// body object, tools, tool, input_schema: 4 levels, so 60 arrays reach the 64 limit.
	deepest := customAgentBody("deepest", `{"type":"object","default":`+nested(60)+`}`)
	quarter := schemaOfSize(64 << 10)
	largest := customAgentBody("largest", quarter, quarter, quarter, quarter)
	for _, body := range []string{deepest, largest} {
		resp, out := f.raw("POST", "/v1/agents", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, out[:min(len(out), 300)])
		var a struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(out), &a))
		f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}})
	}
	resp, out := f.raw("POST", "/v1/agents", customAgentBody("too-deep", `{"type":"object","default":`+nested(61)+`}`))
	requireRawErr(t, resp, out, 400, "invalid_request_error", "nesting is deeper than 64 levels")

	agents, err := f.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)
	require.Len(t, agents.Data, 3)
	names := []string{agents.Data[0].Name, agents.Data[1].Name}
	require.ElementsMatch(t, []string{"deepest", "largest"}, names)
	sessions, err := f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	require.NoError(t, err)
	require.Len(t, sessions.Data, 2)
	for _, s := range sessions.Data {
		require.Len(t, s.Agent.Tools, map[string]int{"deepest": 1, "largest": 4}[s.Agent.Name], s.Agent.Name)
	}
}
