//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/pagination"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// sessionKeys is every key of a session object (API.md §4.2); nullable ones included.
var sessionKeys = []string{"id", "type", "status", "title", "agent", "environment_id", "resources", "vault_ids", "metadata",
	"budget", "outcome_evaluations", "stats", "usage", "deployment_id", "created_at", "updated_at", "archived_at"}

// snapshotKeys is every key of a session's agent snapshot.
var snapshotKeys = []string{"id", "type", "version", "name", "description", "system", "model", "tools", "mcp_servers",
	"skills", "multiagent", "execution_identity"}

// sessionFixture is one workspace with an agent (built-in, MCP and custom tools, an MCP
// server and a skill) and a cloud environment to create sessions against.
type sessionFixture struct {
	*env
	agent *anthropic.BetaManagedAgentsAgent
	envID string
}

func newSessionFixture(t *testing.T) *sessionFixture {
	t.Helper()
	e := newEnv(t)
	f := &sessionFixture{env: e}
	f.agent = f.newAgent(t, "session-agent")
	envr, err := e.client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: "session-env"})
	require.NoError(t, err)
	f.envID = envr.ID
	return f
}

// newAgent creates an agent whose snapshot exercises every part of the agent config.
func (f *sessionFixture) newAgent(t *testing.T, name string) *anthropic.BetaManagedAgentsAgent {
	t.Helper()
	a, err := f.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name:        name,
		Description: param.NewOpt("agent for session tests"),
		System:      param.NewOpt("Answer briefly."),
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5",
			Effort: anthropic.BetaManagedAgentsModelConfigParamsEffortUnion{OfBetaManagedAgentsModelConfigEffortBetaManagedAgentsEffortLevel: param.NewOpt("high")}},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}},
			{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "docs"}},
			{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "lookup", Description: "Looks a word up.",
				InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{
					Properties: map[string]any{"word": map[string]any{"type": "string"}}, Required: []string{"word"}}}},
		},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: "https://docs.example.com/mcp"}},
		Skills:     []anthropic.BetaManagedAgentsSkillParamsUnion{{OfAnthropic: &anthropic.BetaManagedAgentsAnthropicSkillParams{SkillID: "xlsx"}}},
	})
	require.NoError(t, err)
	return a
}

// newSession creates a session on the fixture's agent (latest version) and environment.
func (f *sessionFixture) newSession(t *testing.T, p anthropic.BetaSessionNewParams) *anthropic.BetaManagedAgentsSession {
	t.Helper()
	if param.IsOmitted(p.Agent.OfString) && p.Agent.OfBetaManagedAgentsAgent == nil && p.Agent.OfBetaManagedAgentsAgentWithOverrides == nil {
		p.Agent = anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(f.agent.ID)}
	}
	if p.EnvironmentID == "" {
		p.EnvironmentID = f.envID
	}
	s, err := f.client.Beta.Sessions.New(context.Background(), p)
	require.NoError(t, err)
	return s
}

// userMessage is a user.message event param with one text block.
func userMessage(text string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
		Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}
}

// workspaceID is the workspace of the env's key.
func (e *env) workspaceID() string {
	e.t.Helper()
	p, err := e.api.Service.Authenticate(context.Background(), e.key)
	require.NoError(e.t, err)
	return p.WorkspaceID
}

// setSessionStatus writes a status straight into the session row: there is no agent runtime
// yet that could make a session run.
func (e *env) setSessionStatus(id, status string) {
	e.t.Helper()
	ctx := context.Background()
	rec, err := e.api.Store.GetSession(ctx, e.workspaceID(), id, false)
	require.NoError(e.t, err)
	rec.Status = status
	require.NoError(e.t, e.api.Store.UpdateSession(ctx, rec))
}

// eventsOf returns a session's whole log as raw JSON objects, in log order.
func (e *env) eventsOf(sessionID string) []map[string]any {
	e.t.Helper()
	resp, body := e.raw(http.MethodGet, "/v1/sessions/"+sessionID+"/events?limit=1000", "")
	require.Equal(e.t, http.StatusOK, resp.StatusCode, body)
	var page struct {
		Data []map[string]any `json:"data"`
	}
	require.NoError(e.t, json.Unmarshal([]byte(body), &page))
	return page.Data
}

// sessionCount counts the workspace's sessions, archived ones included.
func (e *env) sessionCount() int {
	e.t.Helper()
	n := 0
	iter := e.client.Beta.Sessions.ListAutoPaging(context.Background(), anthropic.BetaSessionListParams{IncludeArchived: param.NewOpt(true)})
	for iter.Next() {
		n++
	}
	require.NoError(e.t, iter.Err())
	return n
}

// jsonOf re-encodes a decoded JSON value so two of them can be compared with JSONEq.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestSessionCreateResponseShape(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})

	obj := objectOf(t, sess.RawJSON())
	requireKeys(t, obj, sessionKeys...)
	require.True(t, strings.HasPrefix(sess.ID, "sesn_"), sess.ID)
	require.Equal(t, "session", obj["type"])
	require.Equal(t, "idle", obj["status"])
	require.Equal(t, f.envID, obj["environment_id"])
	for _, k := range []string{"title", "budget", "deployment_id", "archived_at"} {
		require.Nil(t, obj[k], k)
	}
	for _, k := range []string{"resources", "vault_ids", "outcome_evaluations"} {
		require.Equal(t, []any{}, obj[k], k)
	}
	require.Equal(t, map[string]any{}, obj["metadata"])
	require.JSONEq(t, `{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,
		"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"active_seconds":0,
		"list_cost":{"amount":"0","currency":"USD"},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0}}`,
		jsonOf(t, obj["usage"]))
	stats := obj["stats"].(map[string]any)
	requireKeys(t, stats, "active_seconds", "duration_seconds")
	require.Equal(t, float64(0), stats["active_seconds"])
	require.GreaterOrEqual(t, stats["duration_seconds"].(float64), float64(0))
	require.Equal(t, obj["created_at"], obj["updated_at"])
	createdAt, err := time.Parse(time.RFC3339Nano, obj["created_at"].(string))
	require.NoError(t, err)
	require.Equal(t, time.UTC, createdAt.Location())

	// The snapshot is the full resolved agent: every shared key equals the agent resource.
	snap := obj["agent"].(map[string]any)
	requireKeys(t, snap, snapshotKeys...)
	agentObj := objectOf(t, f.agent.RawJSON())
	for _, k := range snapshotKeys {
		require.Equal(t, jsonOf(t, agentObj[k]), jsonOf(t, snap[k]), "snapshot %s", k)
	}
	require.Equal(t, float64(1), snap["version"])
	require.Len(t, snap["tools"], 3)

	// GET returns the same object (stats.duration_seconds moves with the clock).
	got, err := f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	gotObj := objectOf(t, got.RawJSON())
	delete(gotObj, "stats")
	delete(obj, "stats")
	require.Equal(t, obj, gotObj)

	// Creating a session appends no event (API.md §17).
	require.Empty(t, f.eventsOf(sess.ID))
}

func TestSessionCreateTitleAndMetadata(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{Title: param.NewOpt("Weekly report"), Metadata: map[string]string{"team": "data", "run": "7"}})
	require.Equal(t, "Weekly report", sess.Title)
	require.Equal(t, map[string]string{"team": "data", "run": "7"}, sess.Metadata)
}

func TestSessionCreatePinnedVersion(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	v2, err := f.client.Beta.Agents.Update(ctx, f.agent.ID, anthropic.BetaAgentUpdateParams{Version: param.NewOpt(int64(1)), System: param.NewOpt("Answer at length.")})
	require.NoError(t, err)
	require.Equal(t, int64(2), v2.Version)

	pinned := f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{
		OfBetaManagedAgentsAgent: &anthropic.BetaManagedAgentsAgentParams{ID: f.agent.ID, Version: param.NewOpt(int64(1))}}})
	require.Equal(t, int64(1), pinned.Agent.Version)
	require.Equal(t, "Answer briefly.", pinned.Agent.System)

	latest := f.newSession(t, anthropic.BetaSessionNewParams{})
	require.Equal(t, int64(2), latest.Agent.Version)
	require.Equal(t, "Answer at length.", latest.Agent.System)

	pinnedLatest := f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{
		OfBetaManagedAgentsAgent: &anthropic.BetaManagedAgentsAgentParams{ID: f.agent.ID}}})
	require.Equal(t, int64(2), pinnedLatest.Agent.Version)

	_, err = f.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{EnvironmentID: f.envID, Agent: anthropic.BetaSessionNewParamsAgentUnion{
		OfBetaManagedAgentsAgent: &anthropic.BetaManagedAgentsAgentParams{ID: f.agent.ID, Version: param.NewOpt(int64(3))}}})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "agent.version: 3 not found")
	require.Equal(t, 3, f.sessionCount())
}

func TestSessionCreateWithOverrides(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{
		OfBetaManagedAgentsAgentWithOverrides: &anthropic.BetaManagedAgentsAgentWithOverridesParams{
			ID:     f.agent.ID,
			Model:  anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-5", Effort: anthropic.BetaManagedAgentsModelConfigParamsEffortUnion{OfBetaManagedAgentsModelConfigEffortBetaManagedAgentsEffortLevel: param.NewOpt("max")}, InferenceGeo: param.NewOpt("us")},
			System: param.NewOpt("Be a pirate."),
			Tools: []anthropic.BetaManagedAgentsAgentWithOverridesParamsToolUnion{
				{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "weather", Description: "Gets the weather.",
					InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}},
				{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "wiki"}},
			},
			MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "wiki", URL: "https://wiki.example.com/mcp"}},
			Skills:     []anthropic.BetaManagedAgentsSkillParamsUnion{{OfCustom: &anthropic.BetaManagedAgentsCustomSkillParams{SkillID: "skill_abc", Version: param.NewOpt("3")}}},
		}}})

	snap := objectOf(t, sess.RawJSON())["agent"].(map[string]any)
	requireKeys(t, snap, snapshotKeys...)
	// The base agent's identity stays; overridden fields replace, never merge.
	require.Equal(t, f.agent.ID, snap["id"])
	require.Equal(t, float64(1), snap["version"])
	require.Equal(t, "session-agent", snap["name"])
	require.Equal(t, "agent for session tests", snap["description"])
	// An override's effort is dropped and the agent's is not carried over; inference_geo applies.
	require.JSONEq(t, `{"id":"claude-sonnet-5","speed":"standard","inference_geo":"us"}`, jsonOf(t, snap["model"]))
	require.Equal(t, "Be a pirate.", snap["system"])
	require.JSONEq(t, `[{"type":"custom","name":"weather","description":"Gets the weather.",
		"input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
		{"type":"mcp_toolset","mcp_server_name":"wiki","default_config":{"enabled":true,"permission_policy":{"type":"always_ask"}},"configs":[]}]`,
		jsonOf(t, snap["tools"]))
	require.JSONEq(t, `[{"type":"url","name":"wiki","url":"https://wiki.example.com/mcp"}]`, jsonOf(t, snap["mcp_servers"]))
	require.JSONEq(t, `[{"type":"custom","skill_id":"skill_abc","version":"3"}]`, jsonOf(t, snap["skills"]))

	// The agent resource itself is unchanged.
	agent, err := f.client.Beta.Agents.Get(ctx, f.agent.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.JSONEq(t, f.agent.RawJSON(), agent.RawJSON())

	// Omitted override fields inherit.
	onlySystem := f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{
		OfBetaManagedAgentsAgentWithOverrides: &anthropic.BetaManagedAgentsAgentWithOverridesParams{ID: f.agent.ID, System: param.NewOpt("Short.")}}})
	inherit := objectOf(t, onlySystem.RawJSON())["agent"].(map[string]any)
	agentObj := objectOf(t, f.agent.RawJSON())
	for _, k := range []string{"model", "tools", "mcp_servers", "skills", "description"} {
		require.Equal(t, jsonOf(t, agentObj[k]), jsonOf(t, inherit[k]), k)
	}
	require.Equal(t, "Short.", inherit["system"])

	// null clears the system prompt.
	resp, body := f.raw(http.MethodPost, "/v1/sessions", fmt.Sprintf(
		`{"environment_id":%q,"agent":{"type":"agent_with_overrides","id":%q,"system":null}}`, f.envID, f.agent.ID))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Nil(t, objectOf(t, body)["agent"].(map[string]any)["system"])
}

func TestSessionCreateRejected(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()

	// Sessions made before their agent and environment are archived keep working.
	archivedAgent := f.newAgent(t, "old-agent")
	archivedEnv, err := f.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "old-env"})
	require.NoError(t, err)
	earlier := f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(archivedAgent.ID)}, EnvironmentID: archivedEnv.ID})
	_, err = f.client.Beta.Agents.Archive(ctx, archivedAgent.ID, anthropic.BetaAgentArchiveParams{})
	require.NoError(t, err)
	_, err = f.client.Beta.Environments.Archive(ctx, archivedEnv.ID, anthropic.BetaEnvironmentArchiveParams{})
	require.NoError(t, err)
	_, err = f.client.Beta.Sessions.Events.Send(ctx, earlier.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("still here")}})
	require.NoError(t, err)
	_, err = f.client.Beta.Sessions.Update(ctx, earlier.ID, anthropic.BetaSessionUpdateParams{Title: param.NewOpt("still here")})
	require.NoError(t, err)
	otherClient := f.clientFor(f.newKey())
	foreignAgent, err := otherClient.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "theirs", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(t, err)
	foreignEnv, err := otherClient.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "theirs"})
	require.NoError(t, err)

	agent := func(s string) string { return fmt.Sprintf(`{"environment_id":%q,"agent":%s}`, f.envID, s) }
	msg := `{"type":"user.message","content":[{"type":"text","text":"hi"}]}`
	manyMessages := strings.TrimSuffix(strings.Repeat(msg+",", 51), ",")
	pairs := make([]string, 17)
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	seventeenPairs := strings.Join(pairs, ",")
	cases := []struct {
		name, body string
		status     int
		errType    string
		msgPart    string
		code       string
	}{
		{"unknown agent", fmt.Sprintf(`{"environment_id":%q,"agent":"agent_missing"}`, f.envID), 404, "not_found_error", "agent_missing", ""},
		{"agent of another workspace", fmt.Sprintf(`{"environment_id":%q,"agent":%q}`, f.envID, foreignAgent.ID), 404, "not_found_error", foreignAgent.ID, ""},
		{"archived agent", fmt.Sprintf(`{"environment_id":%q,"agent":%q}`, f.envID, archivedAgent.ID), 400, "invalid_request_error", "archived", ""},
		{"unknown environment", fmt.Sprintf(`{"environment_id":"env_missing","agent":%q}`, f.agent.ID), 404, "not_found_error", "env_missing", ""},
		{"environment of another workspace", fmt.Sprintf(`{"environment_id":%q,"agent":%q}`, foreignEnv.ID, f.agent.ID), 404, "not_found_error", foreignEnv.ID, ""},
		{"archived environment", fmt.Sprintf(`{"environment_id":%q,"agent":%q}`, archivedEnv.ID, f.agent.ID), 400, "invalid_request_error", "archived", "environment_archived"},
		{"missing environment_id", fmt.Sprintf(`{"agent":%q}`, f.agent.ID), 400, "invalid_request_error", "environment_id", ""},
		{"missing agent", fmt.Sprintf(`{"environment_id":%q}`, f.envID), 400, "invalid_request_error", "agent", ""},
		{"missing pinned version", agent(fmt.Sprintf(`{"type":"agent","id":%q,"version":7}`, f.agent.ID)), 404, "not_found_error", "agent.version: 7 not found", ""},
		{"version zero", agent(fmt.Sprintf(`{"type":"agent","id":%q,"version":0}`, f.agent.ID)), 400, "invalid_request_error", "agent.version", ""},
		{"model override null", agent(fmt.Sprintf(`{"type":"agent_with_overrides","id":%q,"model":null}`, f.agent.ID)), 400, "invalid_request_error", "agent.model", "agent_model_required"},
		{"overrides on a pinned agent", agent(fmt.Sprintf(`{"type":"agent","id":%q,"system":"x"}`, f.agent.ID)), 400, "invalid_request_error", "agent_with_overrides", ""},
		{"unknown agent type", agent(fmt.Sprintf(`{"type":"robot","id":%q}`, f.agent.ID)), 400, "invalid_request_error", "agent.type", ""},
		{"unknown agent field", agent(fmt.Sprintf(`{"type":"agent","id":%q,"colour":"red"}`, f.agent.ID)), 400, "invalid_request_error", "colour", ""},
		{"tools cleared while skills remain", agent(fmt.Sprintf(`{"type":"agent_with_overrides","id":%q,"tools":[],"mcp_servers":[]}`, f.agent.ID)), 400, "invalid_request_error", "skills", ""},
		{"servers cleared under an mcp_toolset", agent(fmt.Sprintf(`{"type":"agent_with_overrides","id":%q,"mcp_servers":[]}`, f.agent.ID)), 400, "invalid_request_error", "docs", ""},
		{"unknown top-level field", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"priority":1}`, f.envID, f.agent.ID), 400, "invalid_request_error", "priority", ""},
		{"17 metadata pairs", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"metadata":{%s}}`, f.envID, f.agent.ID, seventeenPairs), 400, "invalid_request_error", "metadata", "invalid_metadata"},
		{"unknown vault", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"vault_ids":["vlt_1"]}`, f.envID, f.agent.ID), 404, "not_found_error", "vault_ids[0]: vault vlt_1 not found", ""},
		{"initial_events of another type", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"initial_events":[{"type":"user.interrupt"}]}`, f.envID, f.agent.ID), 400, "invalid_request_error", "initial_events[0]", ""},
		{"more than 50 initial_events", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"initial_events":[%s]}`, f.envID, f.agent.ID, manyMessages), 400, "invalid_request_error", "50", ""},
		{"one bad initial event", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"initial_events":[%s,{"type":"user.message","content":[]}]}`, f.envID, f.agent.ID, msg), 400, "invalid_request_error", "initial_events[1].content", ""},
		{"initial event with an unknown field", fmt.Sprintf(`{"environment_id":%q,"agent":%q,"initial_events":[{"type":"user.message","content":[{"type":"text","text":"a"}],"to":"b"}]}`, f.envID, f.agent.ID), 400, "invalid_request_error", "initial_events[0]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.raw(http.MethodPost, "/v1/sessions", tc.body)
			eb := requireRawErr(t, resp, body, tc.status, tc.errType, tc.msgPart)
			if tc.code != "" {
				require.NotNil(t, eb.Error.Details, body)
				require.Equal(t, tc.code, eb.Error.Details.ErrorCode)
			}
		})
	}
	// A rejected create writes nothing.
	require.Equal(t, 1, f.sessionCount())
}

func TestSessionCreateInitialEvents(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{
		{OfUserMessage: userMessage("first").OfUserMessage},
		{OfUserMessage: userMessage("second").OfUserMessage},
	}})
	// Not echoed in the response.
	requireKeys(t, objectOf(t, sess.RawJSON()), sessionKeys...)

	evs := f.eventsOf(sess.ID)
	require.Len(t, evs, 2)
	for i, text := range []string{"first", "second"} {
		requireKeys(t, evs[i], "type", "id", "content", "processed_at")
		require.Equal(t, "user.message", evs[i]["type"])
		require.True(t, strings.HasPrefix(evs[i]["id"].(string), "sevt_"))
		require.Nil(t, evs[i]["processed_at"], "queued: no runtime processes it yet")
		require.JSONEq(t, fmt.Sprintf(`[{"type":"text","text":%q}]`, text), jsonOf(t, evs[i]["content"]))
	}
	require.NotEqual(t, evs[0]["id"], evs[1]["id"])

	// The limit is inclusive: exactly 50 are accepted.
	fifty := make([]anthropic.BetaSessionNewParamsInitialEventUnion, 50)
	for i := range fifty {
		fifty[i] = anthropic.BetaSessionNewParamsInitialEventUnion{OfUserMessage: userMessage(fmt.Sprintf("m%d", i)).OfUserMessage}
	}
	full := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: fifty})
	evs = f.eventsOf(full.ID)
	require.Len(t, evs, 50)
	require.JSONEq(t, `[{"type":"text","text":"m49"}]`, jsonOf(t, evs[49]["content"]))
}

// listIDs returns the ids of a page.
func listIDs(page []anthropic.BetaManagedAgentsSession) []string {
	ids := make([]string, len(page))
	for i, s := range page {
		ids[i] = s.ID
	}
	return ids
}

// createdOrder sorts sessions the way the list orders them: by created_at, then id.
func createdOrder(ss []*anthropic.BetaManagedAgentsSession, desc bool) []string {
	sorted := slices.Clone(ss)
	slices.SortFunc(sorted, func(a, b *anthropic.BetaManagedAgentsSession) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if desc {
		slices.Reverse(sorted)
	}
	ids := make([]string, len(sorted))
	for i, s := range sorted {
		ids[i] = s.ID
	}
	return ids
}

func TestSessionListOrderAndPages(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	var all []*anthropic.BetaManagedAgentsSession
	for range 5 {
		all = append(all, f.newSession(t, anthropic.BetaSessionNewParams{}))
	}

	for _, order := range []anthropic.BetaSessionListParamsOrder{"", "desc", "asc"} {
		t.Run("order="+string(order), func(t *testing.T) {
			want := createdOrder(all, order != "asc")
			page, err := f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Order: order})
			require.NoError(t, err)
			require.Equal(t, want, listIDs(page.Data))
			require.False(t, page.JSON.NextPage.Valid(), "a single page has no next_page")
			require.False(t, page.JSON.PrevPage.Valid(), "a single page has no prev_page")

			// Forward in pages of 2: [0 1] [2 3] [4].
			var pages []*pagination.BidirectionalPageCursor[anthropic.BetaManagedAgentsSession]
			p := anthropic.BetaSessionListParams{Order: order, Limit: param.NewOpt(int64(2))}
			for {
				page, err := f.client.Beta.Sessions.List(ctx, p)
				require.NoError(t, err)
				pages = append(pages, page)
				if page.NextPage == "" {
					break
				}
				p.Page = param.NewOpt(page.NextPage)
			}
			require.Len(t, pages, 3)
			require.Equal(t, want[0:2], listIDs(pages[0].Data))
			require.Equal(t, want[2:4], listIDs(pages[1].Data))
			require.Equal(t, want[4:], listIDs(pages[2].Data))
			// The ends omit their cursor rather than sending null or "" (API.md §17).
			require.NotContains(t, objectOf(t, pages[0].RawJSON()), "prev_page")
			require.NotEmpty(t, pages[0].NextPage)
			require.NotEmpty(t, pages[1].PrevPage)
			require.NotEmpty(t, pages[1].NextPage)
			require.NotContains(t, objectOf(t, pages[2].RawJSON()), "next_page")
			require.NotEmpty(t, pages[2].PrevPage)

			// And back again from the last page with prev_page.
			back, err := f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Order: order, Limit: param.NewOpt(int64(2)), Page: param.NewOpt(pages[2].PrevPage)})
			require.NoError(t, err)
			require.Equal(t, want[2:4], listIDs(back.Data))
			require.NotEmpty(t, back.NextPage)
			first, err := f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Order: order, Limit: param.NewOpt(int64(2)), Page: param.NewOpt(back.PrevPage)})
			require.NoError(t, err)
			require.Equal(t, want[0:2], listIDs(first.Data))
			require.NotContains(t, objectOf(t, first.RawJSON()), "prev_page")
			// next_page of a page reached backward leads forward again.
			again, err := f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Order: order, Limit: param.NewOpt(int64(2)), Page: param.NewOpt(first.NextPage)})
			require.NoError(t, err)
			require.Equal(t, want[2:4], listIDs(again.Data))

			// The SDK's auto-pager walks everything once.
			var walked []string
			iter := f.client.Beta.Sessions.ListAutoPaging(ctx, anthropic.BetaSessionListParams{Order: order, Limit: param.NewOpt(int64(2))})
			for iter.Next() {
				walked = append(walked, iter.Current().ID)
			}
			require.NoError(t, iter.Err())
			require.Equal(t, want, walked)
		})
	}

	t.Run("cursor errors", func(t *testing.T) {
		page, err := f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Limit: param.NewOpt(int64(2))})
		require.NoError(t, err)
		_, err = f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Order: "asc", Limit: param.NewOpt(int64(2)), Page: param.NewOpt(page.NextPage)})
		requireAPIErr(t, err, 400, "invalid_request_error", "page token order does not match request")
		resp, body := f.raw(http.MethodGet, "/v1/sessions?page=page_garbage", "")
		requireRawErr(t, resp, body, 400, "invalid_request_error", "invalid page cursor")
		for _, q := range []string{"limit=0", "limit=101", "order=sideways", "include_archived=maybe", "created_at[gte]=yesterday"} {
			resp, body := f.raw(http.MethodGet, "/v1/sessions?"+q, "")
			requireRawErr(t, resp, body, 400, "invalid_request_error", strings.SplitN(q, "=", 2)[0])
		}
	})
}

func TestSessionListFilters(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	other := f.newAgent(t, "other-agent")

	a1 := f.newSession(t, anthropic.BetaSessionNewParams{})
	_, err := f.client.Beta.Agents.Update(ctx, f.agent.ID, anthropic.BetaAgentUpdateParams{System: param.NewOpt("v2")})
	require.NoError(t, err)
	a2 := f.newSession(t, anthropic.BetaSessionNewParams{})
	o1 := f.newSession(t, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(other.ID)}})
	running := f.newSession(t, anthropic.BetaSessionNewParams{})
	f.setSessionStatus(running.ID, "running")
	archived := f.newSession(t, anthropic.BetaSessionNewParams{})
	_, err = f.client.Beta.Sessions.Archive(ctx, archived.ID, anthropic.BetaSessionArchiveParams{})
	require.NoError(t, err)
	everything := []*anthropic.BetaManagedAgentsSession{a1, a2, o1, running, archived}

	list := func(p anthropic.BetaSessionListParams) []string {
		t.Helper()
		p.Order = "asc"
		page, err := f.client.Beta.Sessions.List(ctx, p)
		require.NoError(t, err)
		return listIDs(page.Data)
	}
	require.Equal(t, []string{a1.ID, a2.ID, o1.ID, running.ID}, list(anthropic.BetaSessionListParams{}), "archived sessions are hidden by default")
	require.Equal(t, createdOrder(everything, false), list(anthropic.BetaSessionListParams{IncludeArchived: param.NewOpt(true)}))
	require.Equal(t, []string{a1.ID, a2.ID, running.ID}, list(anthropic.BetaSessionListParams{AgentID: param.NewOpt(f.agent.ID)}))
	require.Equal(t, []string{a1.ID}, list(anthropic.BetaSessionListParams{AgentID: param.NewOpt(f.agent.ID), AgentVersion: param.NewOpt(int64(1))}))
	require.Equal(t, []string{a2.ID, running.ID}, list(anthropic.BetaSessionListParams{AgentID: param.NewOpt(f.agent.ID), AgentVersion: param.NewOpt(int64(2))}))
	require.Equal(t, []string{o1.ID}, list(anthropic.BetaSessionListParams{AgentID: param.NewOpt(other.ID)}))
	require.Empty(t, list(anthropic.BetaSessionListParams{AgentID: param.NewOpt("agent_missing")}))
	require.Equal(t, []string{running.ID}, list(anthropic.BetaSessionListParams{Statuses: []string{"running"}}))
	require.Equal(t, []string{a1.ID, a2.ID, o1.ID}, list(anthropic.BetaSessionListParams{Statuses: []string{"idle"}}))
	require.Equal(t, []string{a1.ID, a2.ID, o1.ID, archived.ID}, list(anthropic.BetaSessionListParams{Statuses: []string{"idle", "terminated"}, IncludeArchived: param.NewOpt(true)}))
	require.Empty(t, list(anthropic.BetaSessionListParams{Statuses: []string{"rescheduling"}}))

	// created_at windows, bounds taken from the responses themselves.
	require.Equal(t, []string{a2.ID, o1.ID, running.ID}, list(anthropic.BetaSessionListParams{CreatedAtGte: param.NewOpt(a2.CreatedAt), CreatedAtLte: param.NewOpt(running.CreatedAt)}))
	require.Equal(t, []string{o1.ID}, list(anthropic.BetaSessionListParams{CreatedAtGt: param.NewOpt(a2.CreatedAt), CreatedAtLt: param.NewOpt(running.CreatedAt)}))
	require.Equal(t, []string{a1.ID}, list(anthropic.BetaSessionListParams{CreatedAtLt: param.NewOpt(a2.CreatedAt)}))
	require.Equal(t, []string{running.ID}, list(anthropic.BetaSessionListParams{CreatedAtGt: param.NewOpt(o1.CreatedAt)}))
	// Filters hold across pages: the pager re-sends them with each cursor.
	var walked []string
	iter := f.client.Beta.Sessions.ListAutoPaging(ctx, anthropic.BetaSessionListParams{Limit: param.NewOpt(int64(1)),
		CreatedAtGte: param.NewOpt(a2.CreatedAt), AgentID: param.NewOpt(f.agent.ID), IncludeArchived: param.NewOpt(true)})
	for iter.Next() {
		walked = append(walked, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, []string{archived.ID, running.ID, a2.ID}, walked)
	// Deployments and memory stores do not exist here, so those filters match nothing.
	require.Empty(t, list(anthropic.BetaSessionListParams{DeploymentID: param.NewOpt("depl_1")}))

	_, err = f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{AgentVersion: param.NewOpt(int64(1))})
	requireAPIErr(t, err, 400, "invalid_request_error", "agent_version")
	_, err = f.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Statuses: []string{"sleeping"}})
	requireAPIErr(t, err, 400, "invalid_request_error", "sleeping")

	// Another workspace sees none of these.
	otherClient := f.clientFor(f.newKey())
	otherPage, err := otherClient.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Empty(t, otherPage.Data)
}

// requireOneUpdate asserts the log grew by exactly one session.updated event carrying only
// the given fields, and returns its body.
func (f *sessionFixture) requireOneUpdate(t *testing.T, sessionID string, before int, fields ...string) map[string]any {
	t.Helper()
	evs := f.eventsOf(sessionID)
	require.Len(t, evs, before+1)
	ev := evs[before]
	require.Equal(t, "session.updated", ev["type"])
	require.True(t, strings.HasPrefix(ev["id"].(string), "sevt_"))
	require.NotNil(t, ev["processed_at"])
	requireKeys(t, ev, append([]string{"type", "id", "processed_at"}, fields...)...)
	return ev
}

func TestSessionUpdate(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{Title: param.NewOpt("draft"), Metadata: map[string]string{"a": "1", "b": "2"}})

	// Title.
	upd, err := f.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: param.NewOpt("final")})
	require.NoError(t, err)
	require.Equal(t, "final", upd.Title)
	require.True(t, upd.UpdatedAt.After(sess.UpdatedAt))
	require.Equal(t, sess.CreatedAt, upd.CreatedAt)
	ev := f.requireOneUpdate(t, sess.ID, 0, "title")
	require.Equal(t, "final", ev["title"])

	// Metadata is a patch: null deletes, a value upserts, other keys stay. The event carries
	// the whole resulting bag.
	resp, body := f.raw(http.MethodPost, "/v1/sessions/"+sess.ID, `{"metadata":{"b":null,"c":"3"}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, map[string]any{"a": "1", "c": "3"}, objectOf(t, body)["metadata"])
	ev = f.requireOneUpdate(t, sess.ID, 1, "metadata")
	require.Equal(t, map[string]any{"a": "1", "c": "3"}, ev["metadata"])

	// Tools are replaced whole; the event carries the full new snapshot.
	upd, err = f.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Agent: anthropic.BetaManagedAgentsSessionAgentUpdateParam{
		Tools: []anthropic.BetaManagedAgentsSessionAgentUpdateToolUnionParam{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}},
			{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "docs"}},
		}}})
	require.NoError(t, err)
	snap := objectOf(t, upd.RawJSON())["agent"].(map[string]any)
	require.Len(t, snap["tools"], 2)
	require.Equal(t, []any{"agent_toolset_20260401", "mcp_toolset"}, []any{snap["tools"].([]any)[0].(map[string]any)["type"], snap["tools"].([]any)[1].(map[string]any)["type"]})
	require.Equal(t, f.agent.ID, snap["id"])
	require.Equal(t, float64(1), snap["version"])
	ev = f.requireOneUpdate(t, sess.ID, 2, "agent")
	require.Equal(t, jsonOf(t, snap), jsonOf(t, ev["agent"]))

	// MCP servers too.
	upd, err = f.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Agent: anthropic.BetaManagedAgentsSessionAgentUpdateParam{
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: "https://mirror.example.com/mcp"}}}})
	require.NoError(t, err)
	require.Equal(t, "https://mirror.example.com/mcp", upd.Agent.MCPServers[0].URL)
	ev = f.requireOneUpdate(t, sess.ID, 3, "agent")
	require.Equal(t, jsonOf(t, objectOf(t, upd.RawJSON())["agent"]), jsonOf(t, ev["agent"]))

	// Two fields at once make one event with both.
	resp, body = f.raw(http.MethodPost, "/v1/sessions/"+sess.ID, `{"title":null,"metadata":{"a":"9"}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	ev = f.requireOneUpdate(t, sess.ID, 4, "title", "metadata")
	require.Nil(t, ev["title"])
	require.Equal(t, map[string]any{"a": "9", "c": "3"}, ev["metadata"])

	// No-op updates change nothing and emit nothing.
	before, err := f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	for _, noop := range []string{`{}`, `{"title":null}`, `{"metadata":{"a":"9","gone":null}}`, `{"agent":{}}`,
		`{"agent":{"mcp_servers":[{"type":"url","name":"docs","url":"https://mirror.example.com/mcp"}]}}`} {
		resp, body := f.raw(http.MethodPost, "/v1/sessions/"+sess.ID, noop)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Equal(t, before.UpdatedAt.Format(time.RFC3339Nano), objectOf(t, body)["updated_at"], noop)
	}
	require.Len(t, f.eventsOf(sess.ID), 5)

	// Rejected updates write nothing.
	for _, bad := range []struct{ body, msgPart string }{
		{`{"vault_ids":["vlt_1"]}`, "vault_ids"},
		{`{"vault_ids":[]}`, "vault_ids"},
		{`{"title":"x","color":"red"}`, "color"},
		{`{"agent":{"model":"claude-opus-5"}}`, "model"},
		{`{"agent":{"mcp_servers":[]}}`, "docs"},
		{`{"title":"x","metadata":{"":"empty key"}}`, "metadata"},
		{`{"title":"x","agent":{"tools":[{"type":"agent_toolset_20260401","configs":[{"name":"teleport"}]}]}}`, "teleport"},
	} {
		resp, body := f.raw(http.MethodPost, "/v1/sessions/"+sess.ID, bad.body)
		requireRawErr(t, resp, body, 400, "invalid_request_error", bad.msgPart)
	}
	after, err := f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, before.Title, after.Title)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt)
	require.JSONEq(t, jsonOf(t, objectOf(t, before.RawJSON())["agent"]), jsonOf(t, objectOf(t, after.RawJSON())["agent"]))
	require.Len(t, f.eventsOf(sess.ID), 5)

	_, err = f.client.Beta.Sessions.Update(ctx, "sesn_missing", anthropic.BetaSessionUpdateParams{Title: param.NewOpt("x")})
	requireAPIErr(t, err, 404, "not_found_error", "sesn_missing")
}

func TestSessionUpdateWhileRunning(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	f.setSessionStatus(sess.ID, "running")

	// The agent config can only change while idle; the whole request is refused.
	resp, body := f.raw(http.MethodPost, "/v1/sessions/"+sess.ID, `{"title":"t","agent":{"tools":[{"type":"agent_toolset_20260401"}],"mcp_servers":[]}}`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "idle")
	got, err := f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Empty(t, got.Title)
	require.JSONEq(t, jsonOf(t, objectOf(t, sess.RawJSON())["agent"]), jsonOf(t, objectOf(t, got.RawJSON())["agent"]))
	require.Empty(t, f.eventsOf(sess.ID))

	// Title and metadata may change in any non-terminated status.
	upd, err := f.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: param.NewOpt("busy")})
	require.NoError(t, err)
	require.Equal(t, "busy", upd.Title)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatusRunning, upd.Status)
	f.requireOneUpdate(t, sess.ID, 0, "title")
}

func TestSessionArchive(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("hi").OfUserMessage}}})

	arch, err := f.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	require.NoError(t, err)
	obj := objectOf(t, arch.RawJSON())
	requireKeys(t, obj, sessionKeys...)
	require.Equal(t, "terminated", obj["status"])
	require.NotNil(t, obj["archived_at"])
	require.False(t, arch.ArchivedAt.Before(sess.CreatedAt))
	require.Equal(t, arch.ArchivedAt, arch.UpdatedAt)
	// Archiving appends no event (API.md §17).
	require.Len(t, f.eventsOf(sess.ID), 1)

	// Archive is idempotent and keeps the first archived_at; GET still works.
	again, err := f.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	require.NoError(t, err)
	require.Equal(t, arch.ArchivedAt, again.ArchivedAt)
	got, err := f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatusTerminated, got.Status)
	require.Equal(t, arch.ArchivedAt, got.ArchivedAt)
	// The duration is frozen at termination.
	require.Equal(t, arch.Stats.DurationSeconds, got.Stats.DurationSeconds)
	require.InDelta(t, arch.ArchivedAt.Sub(arch.CreatedAt).Seconds(), got.Stats.DurationSeconds, 1e-6)

	// Read-only afterwards: new events and updates conflict, and nothing is written.
	_, err = f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("more")}})
	apiErr := requireAPIErr(t, err, http.StatusConflict, "conflict_error", "archived")
	require.Equal(t, "false", apiErr.Response.Header.Get("x-should-retry"))
	_, err = f.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: param.NewOpt("late")})
	requireAPIErr(t, err, http.StatusConflict, "conflict_error", "archived")
	require.Len(t, f.eventsOf(sess.ID), 1)

	_, err = f.client.Beta.Sessions.Archive(ctx, "sesn_missing", anthropic.BetaSessionArchiveParams{})
	requireAPIErr(t, err, 404, "not_found_error", "sesn_missing")
	resp, body := f.raw(http.MethodPost, "/v1/sessions/"+sess.ID+"/archive", `{"force":true}`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "force")
}

func TestSessionDelete(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("hi").OfUserMessage}}})
	keep := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("stay").OfUserMessage}}})

	del, err := f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"type":"session_deleted"}`, sess.ID), del.RawJSON())

	_, err = f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	requireAPIErr(t, err, 404, "not_found_error", sess.ID)
	_, err = f.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	requireAPIErr(t, err, 404, "not_found_error", sess.ID)
	// The log is gone, not just hidden.
	evs, _, err := f.api.Store.ListEvents(ctx, sess.ID, store.EventListParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, evs)
	_, err = f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	requireAPIErr(t, err, 404, "not_found_error", sess.ID)

	// Other sessions are untouched.
	require.Len(t, f.eventsOf(keep.ID), 1)
	require.Equal(t, 1, f.sessionCount())

	// Archived sessions can be deleted too.
	_, err = f.client.Beta.Sessions.Archive(ctx, keep.ID, anthropic.BetaSessionArchiveParams{})
	require.NoError(t, err)
	_, err = f.client.Beta.Sessions.Delete(ctx, keep.ID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Zero(t, f.sessionCount())

	// Another workspace cannot delete ours.
	mine := f.newSession(t, anthropic.BetaSessionNewParams{})
	otherClient := f.clientFor(f.newKey())
	_, err = otherClient.Beta.Sessions.Delete(ctx, mine.ID, anthropic.BetaSessionDeleteParams{})
	requireAPIErr(t, err, 404, "not_found_error", mine.ID)
	require.Equal(t, 1, f.sessionCount())
}

func TestSessionArchiveAndDeleteWhileRunning(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	f.setSessionStatus(sess.ID, "running")

	_, err := f.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	apiErr := requireAPIErr(t, err, 400, "invalid_request_error", "")
	require.Equal(t, fmt.Sprintf(`Session %s cannot be archived while its status is "running". Only pending or idle sessions may be archived.`, sess.ID), apiErr.Message)

	_, err = f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	apiErr = requireAPIErr(t, err, 400, "invalid_request_error", "")
	require.Equal(t, "Cannot delete session while it is running. Send an interrupt event or wait for the session to complete.", apiErr.Message)

	// The session is untouched.
	got, err := f.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatusRunning, got.Status)
	require.Nil(t, objectOf(t, got.RawJSON())["archived_at"])
	require.Equal(t, sess.UpdatedAt, got.UpdatedAt)
	require.Empty(t, f.eventsOf(sess.ID))

	// A session rescheduled between model retries is mid-turn too.
	f.setSessionStatus(sess.ID, "rescheduling")
	_, err = f.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	requireAPIErr(t, err, 400, "invalid_request_error", "cannot be archived")
	_, err = f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	requireAPIErr(t, err, 400, "invalid_request_error", "Cannot delete session")

	// Once idle again both work.
	f.setSessionStatus(sess.ID, "idle")
	_, err = f.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	require.NoError(t, err)
	_, err = f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
}

// seedEvents appends events straight into a session's log, as the (future) agent runtime
// will, and returns them with their ids.
func (e *env) seedEvents(sessionID string, at time.Time, evs ...store.NewEvent) []wire.Event {
	e.t.Helper()
	out, err := e.api.Store.AppendEvents(context.Background(), sessionID, evs, at)
	require.NoError(e.t, err)
	return out
}
