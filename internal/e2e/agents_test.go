//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
)

const testModel = "claude-opus-5"

func agentParams(name string) anthropic.BetaAgentNewParams {
	return anthropic.BetaAgentNewParams{Name: name, Model: anthropic.BetaManagedAgentsModelConfigParams{ID: testModel}}
}

func createAgent(t *testing.T, c anthropic.Client, p anthropic.BetaAgentNewParams) *anthropic.BetaManagedAgentsAgent {
	t.Helper()
	a, err := c.Beta.Agents.New(context.Background(), p)
	require.NoError(t, err)
	return a
}

// agentIDs lists the ids of agents in order.
func agentIDs(agents []anthropic.BetaManagedAgentsAgent) []string {
	out := make([]string, len(agents))
	for i, a := range agents {
		out[i] = a.ID
	}
	return out
}

func agentVersions(agents []anthropic.BetaManagedAgentsAgent) []int64 {
	out := make([]int64, len(agents))
	for i, a := range agents {
		out[i] = a.Version
	}
	return out
}

func TestAgentCreateEchoesEveryKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := createAgent(t, e.client, agentParams("minimal"))

	obj := objectOf(t, a.RawJSON())
	requireKeys(t, obj, "id", "type", "name", "description", "system", "model", "tools", "mcp_servers", "skills",
		"multiagent", "execution_identity", "metadata", "version", "created_at", "updated_at", "archived_at")
	require.Regexp(t, `^agent_\w+$`, obj["id"])
	require.Equal(t, "agent", obj["type"])
	require.Equal(t, "minimal", obj["name"])
	require.Nil(t, obj["description"])
	require.Nil(t, obj["system"])
	require.Nil(t, obj["multiagent"])
	require.Nil(t, obj["archived_at"])
	require.Equal(t, map[string]any{"id": testModel, "speed": "standard"}, obj["model"])
	require.Equal(t, []any{}, obj["tools"])
	require.Equal(t, []any{}, obj["mcp_servers"])
	require.Equal(t, []any{}, obj["skills"])
	require.Equal(t, map[string]any{"type": "service_account"}, obj["execution_identity"])
	require.Equal(t, map[string]any{}, obj["metadata"])
	require.EqualValues(t, 1, obj["version"])
	require.Equal(t, obj["created_at"], obj["updated_at"])
	_, err := time.Parse(time.RFC3339Nano, obj["created_at"].(string))
	require.NoError(t, err)

	got, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.JSONEq(t, a.RawJSON(), got.RawJSON())
}

func TestAgentCreateStringModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, body := e.raw(http.MethodPost, "/v1/agents", `{"name":"str","model":"claude-sonnet-4-6"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	obj := objectOf(t, body)
	require.Equal(t, map[string]any{"id": "claude-sonnet-4-6", "speed": "standard"}, obj["model"])

	got, err := e.client.Beta.Agents.Get(context.Background(), obj["id"].(string), anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.Equal(t, "claude-sonnet-4-6", got.Model.ID)
	require.Equal(t, anthropic.BetaManagedAgentsModelConfigSpeed("standard"), got.Model.Speed)
}

func TestAgentCreateObjectModelWithEffort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := agentParams("effort")
	p.Model.Effort = anthropic.BetaManagedAgentsModelConfigParamsEffortUnion{OfBetaManagedAgentsEffortHigh: &anthropic.BetaManagedAgentsEffortHighParam{}}
	p.Model.Speed = anthropic.BetaManagedAgentsModelConfigParamsSpeed("fast")
	a := createAgent(t, e.client, p)
	require.Equal(t, map[string]any{"id": testModel, "effort": map[string]any{"type": "high"}, "speed": "fast"}, objectOf(t, a.RawJSON())["model"])
}

func TestAgentCreateResolvesToolsServersSkills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := agentParams("tools")
	p.System = param.NewOpt("be brief")
	p.Description = param.NewOpt("desc")
	p.Metadata = map[string]string{"team": "infra"}
	p.Tools = []anthropic.BetaAgentNewParamsToolUnion{
		{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{
				{OfBash: &anthropic.BetaManagedAgentsBashToolConfigParams{Enabled: param.NewOpt(false)}},
				{OfRead: &anthropic.BetaManagedAgentsReadToolConfigParams{PermissionPolicy: anthropic.BetaManagedAgentsReadToolConfigParamsPermissionPolicyUnion{
					OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}}}},
			},
		}},
		{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "github",
			Configs: []anthropic.BetaManagedAgentsMCPToolConfigParams{{Name: "get_issue"}}}},
		{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "get_weather", Description: "Weather for a city",
			InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{
				Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}},
	}
	p.MCPServers = []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "github", URL: "https://mcp.example.com/github"}}
	p.Skills = []anthropic.BetaManagedAgentsSkillParamsUnion{
		{OfAnthropic: &anthropic.BetaManagedAgentsAnthropicSkillParams{SkillID: "xlsx", Version: param.NewOpt("3")}},
		{OfCustom: &anthropic.BetaManagedAgentsCustomSkillParams{SkillID: "skill_abc"}},
	}
	a := createAgent(t, e.client, p)
	require.Equal(t, "be brief", a.System)
	require.Equal(t, "desc", a.Description)
	require.Equal(t, map[string]string{"team": "infra"}, a.Metadata)

	obj := objectOf(t, a.RawJSON())
	allow := map[string]any{"type": "always_allow"}
	ask := map[string]any{"type": "always_ask"}
	require.Equal(t, []any{
		map[string]any{"type": "agent_toolset_20260401",
			"default_config": map[string]any{"enabled": true, "permission_policy": allow},
			"configs": []any{
				map[string]any{"name": "bash", "type": "bash", "enabled": false, "permission_policy": allow},
				map[string]any{"name": "read", "type": "read", "enabled": true, "permission_policy": ask},
			}},
		map[string]any{"type": "mcp_toolset", "mcp_server_name": "github",
			"default_config": map[string]any{"enabled": true, "permission_policy": ask},
			"configs":        []any{map[string]any{"name": "get_issue", "enabled": true, "permission_policy": ask}}},
		map[string]any{"type": "custom", "name": "get_weather", "description": "Weather for a city",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}},
	}, obj["tools"])
	require.Equal(t, []any{map[string]any{"type": "url", "name": "github", "url": "https://mcp.example.com/github"}}, obj["mcp_servers"])

	// The SDK's typed accessors read the same shapes.
	require.Len(t, a.Tools, 3)
	ts := a.Tools[0].AsAgentToolset20260401()
	require.True(t, ts.DefaultConfig.Enabled)
	require.Equal(t, "always_allow", ts.DefaultConfig.PermissionPolicy.Type)
	require.Len(t, ts.Configs, 2)
	require.Equal(t, "always_ask", ts.Configs[1].PermissionPolicy.Type)
	mcp := a.Tools[1].AsMCPToolset()
	require.Equal(t, "github", mcp.MCPServerName)
	require.Equal(t, "always_ask", mcp.DefaultConfig.PermissionPolicy.Type)
	require.Equal(t, "get_weather", a.Tools[2].AsCustom().Name)

	require.Len(t, a.Skills, 2)
	require.Equal(t, "anthropic", a.Skills[0].Type)
	require.Equal(t, "xlsx", a.Skills[0].SkillID)
	require.Equal(t, "3", a.Skills[0].Version)
	require.Equal(t, "custom", a.Skills[1].Type)
	require.Equal(t, "skill_abc", a.Skills[1].SkillID)
	require.NotEmpty(t, a.Skills[1].Version, "an omitted skill version is resolved in the echo")
}

func TestAgentToolsetWithoutDefaultConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := agentParams("bare toolset")
	p.Tools = []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}}
	a := createAgent(t, e.client, p)
	require.Equal(t, []any{map[string]any{"type": "agent_toolset_20260401",
		"default_config": map[string]any{"enabled": true, "permission_policy": map[string]any{"type": "always_allow"}},
		"configs":        []any{}}}, objectOf(t, a.RawJSON())["tools"])
}

func TestAgentGetVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := createAgent(t, e.client, agentParams("v1 name"))
	a2, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt("v2 name")})
	require.NoError(t, err)
	require.EqualValues(t, 2, a2.Version)
	require.Equal(t, a.CreatedAt, a2.CreatedAt)

	latest, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.EqualValues(t, 2, latest.Version)
	require.Equal(t, "v2 name", latest.Name)

	v1, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: param.NewOpt(int64(1))})
	require.NoError(t, err)
	require.EqualValues(t, 1, v1.Version)
	require.Equal(t, "v1 name", v1.Name)
	require.JSONEq(t, a.RawJSON(), v1.RawJSON())

	_, err = e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: param.NewOpt(int64(3))})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "Agent version not found.")

	_, err = e.client.Beta.Agents.Get(ctx, "agent_doesnotexist", anthropic.BetaAgentGetParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "agent_doesnotexist")
	_, err = e.client.Beta.Agents.Get(ctx, "agent_doesnotexist", anthropic.BetaAgentGetParams{Version: param.NewOpt(int64(1))})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "agent_doesnotexist")

	for _, v := range []string{"0", "-1", "two"} {
		resp, body := e.raw(http.MethodGet, "/v1/agents/"+a.ID+"?version="+v, "")
		requireRawErr(t, resp, body, http.StatusBadRequest, "invalid_request_error", "version")
	}
}

func TestAgentUpdateNoOpKeepsVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := agentParams("same")
	p.System = param.NewOpt("sys")
	p.Metadata = map[string]string{"k": "v"}
	a := createAgent(t, e.client, p)

	noops := map[string]anthropic.BetaAgentUpdateParams{
		"empty body":          {},
		"same name":           {Name: param.NewOpt("same")},
		"same system":         {System: param.NewOpt("sys")},
		"same model":          {Model: anthropic.BetaManagedAgentsModelConfigParams{ID: testModel}},
		"same metadata value": {Metadata: map[string]string{"k": "v"}},
		"matching version":    {Version: param.NewOpt(int64(1)), Name: param.NewOpt("same")},
	}
	for name, up := range noops {
		got, err := e.client.Beta.Agents.Update(ctx, a.ID, up)
		require.NoError(t, err, name)
		require.EqualValues(t, 1, got.Version, name)
		require.JSONEq(t, a.RawJSON(), got.RawJSON(), name)
	}
	// Deleting a metadata key that does not exist changes nothing either.
	got, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{}, option.WithJSONSet("metadata.absent", nil))
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Version)

	// No version number was consumed by the no-ops.
	changed, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt("different")})
	require.NoError(t, err)
	require.EqualValues(t, 2, changed.Version)
	require.True(t, changed.UpdatedAt.After(a.UpdatedAt))
	page, err := e.client.Beta.Agents.Versions.List(ctx, a.ID, anthropic.BetaAgentVersionListParams{})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1}, agentVersions(page.Data))
}

func TestAgentUpdateStaleVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := createAgent(t, e.client, agentParams("occ"))
	a2, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: param.NewOpt(int64(1)), Name: param.NewOpt("occ 2")})
	require.NoError(t, err)
	require.EqualValues(t, 2, a2.Version)

	for name, up := range map[string]anthropic.BetaAgentUpdateParams{
		"stale with change": {Version: param.NewOpt(int64(1)), Name: param.NewOpt("lost update")},
		"stale no-op":       {Version: param.NewOpt(int64(1))},
		"future version":    {Version: param.NewOpt(int64(3)), Name: param.NewOpt("lost update")},
	} {
		_, err := e.client.Beta.Agents.Update(ctx, a.ID, up)
		apiErr := requireAPIErr(t, err, http.StatusConflict, "invalid_request_error",
			"Concurrent modification detected. Please fetch the latest version and retry.")
		require.Equal(t, "false", apiErr.Response.Header.Get("x-should-retry"), name)
	}

	for _, v := range []int64{0, -2} {
		_, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: param.NewOpt(v), Name: param.NewOpt("lost update")})
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "version: must be an integer of at least 1")
	}

	// The failed updates wrote nothing and consumed no version number.
	cur, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.Equal(t, "occ 2", cur.Name)
	a3, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: param.NewOpt(int64(2)), Name: param.NewOpt("occ 3")})
	require.NoError(t, err)
	require.EqualValues(t, 3, a3.Version)
}

func TestAgentUpdateSemantics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := agentParams("sem")
	p.System = param.NewOpt("system prompt")
	p.Description = param.NewOpt("a description")
	p.Metadata = map[string]string{"a": "1", "b": "2"}
	p.Tools = []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}}
	a := createAgent(t, e.client, p)
	update := func(up anthropic.BetaAgentUpdateParams, opts ...option.RequestOption) *anthropic.BetaManagedAgentsAgent {
		t.Helper()
		got, err := e.client.Beta.Agents.Update(ctx, a.ID, up, opts...)
		require.NoError(t, err)
		return got
	}

	// Metadata is a patch: a value upserts, null deletes, omitted keys stay; the rest is kept.
	got := update(anthropic.BetaAgentUpdateParams{Metadata: map[string]string{"c": "3", "a": "1"}}, option.WithJSONSet("metadata.b", nil))
	require.EqualValues(t, 2, got.Version)
	require.Equal(t, map[string]string{"a": "1", "c": "3"}, got.Metadata)
	require.Equal(t, "system prompt", got.System)
	require.Equal(t, "a description", got.Description)
	require.Equal(t, "sem", got.Name)
	require.Len(t, got.Tools, 1)

	// null clears system; "" clears description; both echo as null.
	got = update(anthropic.BetaAgentUpdateParams{System: param.Null[string](), Description: param.NewOpt("")})
	require.EqualValues(t, 3, got.Version)
	obj := objectOf(t, got.RawJSON())
	require.Nil(t, obj["system"])
	require.Nil(t, obj["description"])
	require.Equal(t, map[string]any{"a": "1", "c": "3"}, obj["metadata"])

	// tools is a full replacement.
	got = update(anthropic.BetaAgentUpdateParams{Tools: []anthropic.BetaAgentUpdateParamsToolUnion{
		{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "lookup", Description: "look up",
			InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}}}},
	}})
	require.EqualValues(t, 4, got.Version)
	require.Len(t, got.Tools, 1)
	require.Equal(t, "custom", got.Tools[0].Type)
	require.Equal(t, "lookup", got.Tools[0].Name)

	// null tools clears them.
	got = update(anthropic.BetaAgentUpdateParams{Tools: param.NullSlice[[]anthropic.BetaAgentUpdateParamsToolUnion]()})
	require.EqualValues(t, 5, got.Version)
	require.Equal(t, []any{}, objectOf(t, got.RawJSON())["tools"])

	// A new model id replaces the model.
	got = update(anthropic.BetaAgentUpdateParams{Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-haiku-4-5"}})
	require.EqualValues(t, 6, got.Version)
	require.Equal(t, "claude-haiku-4-5", got.Model.ID)

	// name and model cannot be cleared; the rejected updates write nothing.
	for field, opt := range map[string]option.RequestOption{
		"name":  option.WithJSONSet("name", nil),
		"model": option.WithJSONSet("model", nil),
	} {
		_, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{}, opt)
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", field+": cannot be cleared")
	}
	_, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt("")})
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "name")
	cur, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.EqualValues(t, 6, cur.Version)
	require.Equal(t, "sem", cur.Name)
}

func TestAgentArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := createAgent(t, e.client, agentParams("to archive"))
	other := createAgent(t, e.client, agentParams("stays"))

	arch, err := e.client.Beta.Agents.Archive(ctx, a.ID, anthropic.BetaAgentArchiveParams{})
	require.NoError(t, err)
	require.False(t, arch.ArchivedAt.IsZero())
	require.EqualValues(t, 1, arch.Version)

	again, err := e.client.Beta.Agents.Archive(ctx, a.ID, anthropic.BetaAgentArchiveParams{})
	require.NoError(t, err)
	require.Equal(t, objectOf(t, arch.RawJSON())["archived_at"], objectOf(t, again.RawJSON())["archived_at"])

	_, err = e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt("revived")})
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "Cannot modify archived agent")

	got, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.Equal(t, "to archive", got.Name)
	require.Equal(t, arch.ArchivedAt, got.ArchivedAt)
	v1, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: param.NewOpt(int64(1))})
	require.NoError(t, err)
	require.Equal(t, arch.ArchivedAt, v1.ArchivedAt)

	page, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{other.ID}, agentIDs(page.Data))
	page, err = e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Equal(t, []string{other.ID, a.ID}, agentIDs(page.Data))

	_, err = e.client.Beta.Agents.Archive(ctx, "agent_missing", anthropic.BetaAgentArchiveParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "agent_missing")
}

func TestAgentVersionsListPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := createAgent(t, e.client, agentParams("n1"))
	for i := 2; i <= 5; i++ {
		_, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt(fmt.Sprintf("n%d", i))})
		require.NoError(t, err)
	}

	var all []int64
	iter := e.client.Beta.Agents.Versions.ListAutoPaging(ctx, a.ID, anthropic.BetaAgentVersionListParams{Limit: param.NewOpt(int64(2))})
	for iter.Next() {
		v := iter.Current()
		require.Equal(t, fmt.Sprintf("n%d", v.Version), v.Name, "each element is that version's snapshot")
		all = append(all, v.Version)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, []int64{5, 4, 3, 2, 1}, all)

	// Manual paging: 2 + 2 + 1, the last page omits next_page.
	var pages [][]int64
	params := anthropic.BetaAgentVersionListParams{Limit: param.NewOpt(int64(2))}
	for {
		page, err := e.client.Beta.Agents.Versions.List(ctx, a.ID, params)
		require.NoError(t, err)
		pages = append(pages, agentVersions(page.Data))
		if page.NextPage == "" {
			require.NotContains(t, objectOf(t, page.RawJSON()), "next_page")
			break
		}
		params.Page = param.NewOpt(page.NextPage)
	}
	require.Equal(t, [][]int64{{5, 4}, {3, 2}, {1}}, pages)

	_, err := e.client.Beta.Agents.Versions.List(ctx, "agent_missing", anthropic.BetaAgentVersionListParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "agent_missing")
	_, err = e.client.Beta.Agents.Versions.List(ctx, a.ID, anthropic.BetaAgentVersionListParams{Page: param.NewOpt("garbage")})
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "invalid page cursor")
}

func TestAgentListPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var created []*anthropic.BetaManagedAgentsAgent
	for i := range 7 {
		created = append(created, createAgent(t, e.client, agentParams(fmt.Sprintf("list %d", i))))
	}
	var newestFirst []string
	for i := len(created) - 1; i >= 0; i-- {
		newestFirst = append(newestFirst, created[i].ID)
	}

	t.Run("auto pager", func(t *testing.T) {
		t.Parallel()
		var ids []string
		iter := e.client.Beta.Agents.ListAutoPaging(ctx, anthropic.BetaAgentListParams{Limit: param.NewOpt(int64(3))})
		for iter.Next() {
			ids = append(ids, iter.Current().ID)
		}
		require.NoError(t, iter.Err())
		require.Equal(t, newestFirst, ids)
	})

	t.Run("manual pages", func(t *testing.T) {
		t.Parallel()
		var pages [][]string
		params := anthropic.BetaAgentListParams{Limit: param.NewOpt(int64(3))}
		for {
			page, err := e.client.Beta.Agents.List(ctx, params)
			require.NoError(t, err)
			pages = append(pages, agentIDs(page.Data))
			if page.NextPage == "" {
				require.NotContains(t, objectOf(t, page.RawJSON()), "next_page")
				break
			}
			require.Regexp(t, `^page_`, page.NextPage)
			params.Page = param.NewOpt(page.NextPage)
		}
		require.Equal(t, [][]string{newestFirst[:3], newestFirst[3:6], newestFirst[6:]}, pages)
	})

	t.Run("default limit holds all", func(t *testing.T) {
		t.Parallel()
		page, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
		require.NoError(t, err)
		require.Equal(t, newestFirst, agentIDs(page.Data))
		require.NotContains(t, objectOf(t, page.RawJSON()), "next_page")
	})

	t.Run("created_at range", func(t *testing.T) {
		t.Parallel()
		from, to := created[2].CreatedAt, created[4].CreatedAt
		var want []string
		for i := len(created) - 1; i >= 0; i-- {
			if c := created[i].CreatedAt; !c.Before(from) && !c.After(to) {
				want = append(want, created[i].ID)
			}
		}
		require.Contains(t, want, created[2].ID)
		require.Contains(t, want, created[4].ID)
		page, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{
			CreatedAtGte: param.NewOpt(from), CreatedAtLte: param.NewOpt(to)})
		require.NoError(t, err)
		require.Equal(t, want, agentIDs(page.Data))
	})

	t.Run("bad parameters", func(t *testing.T) {
		t.Parallel()
		for _, limit := range []int64{0, 101, -1} {
			// param.NewOpt(0) is a set value, so the SDK sends limit=0.
			_, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: param.NewOpt(limit)})
			requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "limit")
		}
		page, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: param.NewOpt(int64(100))})
		require.NoError(t, err)
		require.Len(t, page.Data, len(created))
		for _, cursor := range []string{"garbage", "page_!!!", "page_e30"} {
			_, err = e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Page: param.NewOpt(cursor)})
			requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "invalid page cursor")
		}
		resp, body := e.raw(http.MethodGet, "/v1/agents?include_archived=maybe", "")
		requireRawErr(t, resp, body, http.StatusBadRequest, "invalid_request_error", "include_archived")
		resp, body = e.raw(http.MethodGet, "/v1/agents?created_at%5Bgte%5D=yesterday", "")
		requireRawErr(t, resp, body, http.StatusBadRequest, "invalid_request_error", "created_at[gte]")
	})
}

func TestAgentToolValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	toolset := func(configs ...anthropic.BetaManagedAgentsAgentToolConfigParamsUnion) anthropic.BetaAgentNewParamsToolUnion {
		return anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{Configs: configs}}
	}
	bash := anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{OfBash: &anthropic.BetaManagedAgentsBashToolConfigParams{}}
	mcpToolset := func(server string) anthropic.BetaAgentNewParamsToolUnion {
		return anthropic.BetaAgentNewParamsToolUnion{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: server}}
	}
	server := func(name string) anthropic.BetaManagedAgentsURLMCPServerParams {
		return anthropic.BetaManagedAgentsURLMCPServerParams{Name: name, URL: "https://mcp.example.com/" + name}
	}
	custom := func(name string) anthropic.BetaAgentNewParamsToolUnion {
		return anthropic.BetaAgentNewParamsToolUnion{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: name, Description: "d"}}
	}

	cases := []struct {
		name    string
		tools   []anthropic.BetaAgentNewParamsToolUnion
		servers []anthropic.BetaManagedAgentsURLMCPServerParams
		opts    []option.RequestOption
		msg     []string
	}{
		{name: "unknown built-in", tools: []anthropic.BetaAgentNewParamsToolUnion{toolset(bash)},
			opts: []option.RequestOption{option.WithJSONSet("tools.0.configs.0.name", "teleport")},
			msg:  []string{"tools[0].configs[0].name", `unknown built-in tool "teleport"`}},
		{name: "duplicate configs", tools: []anthropic.BetaAgentNewParamsToolUnion{toolset(bash, bash)},
			msg: []string{"tools[0].configs[1].name", `duplicate config for built-in tool "bash"`}},
		{name: "two agent toolsets", tools: []anthropic.BetaAgentNewParamsToolUnion{toolset(), toolset()},
			msg: []string{"tools[1]", "only one agent_toolset_20260401"}},
		{name: "unknown permission policy", tools: []anthropic.BetaAgentNewParamsToolUnion{toolset(bash)},
			opts: []option.RequestOption{option.WithJSONSet("tools.0.configs.0.permission_policy", map[string]string{"type": "sometimes"})},
			msg:  []string{"tools[0].configs[0].permission_policy.type", `"sometimes"`}},
		{name: "toolset names undeclared server", tools: []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("jira")},
			msg: []string{"tools[0].mcp_server_name", `MCP server "jira" is not declared`}},
		{name: "server without toolset", tools: []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("github")},
			servers: []anthropic.BetaManagedAgentsURLMCPServerParams{server("github"), server("linear")},
			msg:     []string{"mcp_servers[1]", `MCP server "linear" is not referenced`}},
		{name: "two toolsets for one server", tools: []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("github"), mcpToolset("github")},
			servers: []anthropic.BetaManagedAgentsURLMCPServerParams{server("github")},
			msg:     []string{"tools[1].mcp_server_name", `MCP server "github" already has a toolset`}},
		{name: "duplicate server names", tools: []anthropic.BetaAgentNewParamsToolUnion{mcpToolset("github")},
			servers: []anthropic.BetaManagedAgentsURLMCPServerParams{server("github"), server("github")},
			msg:     []string{"mcp_servers[1].name", `duplicate MCP server name "github"`}},
		{name: "custom tool name with a space", tools: []anthropic.BetaAgentNewParamsToolUnion{custom("get weather")},
			msg: []string{"tools[0].name", `"get weather"`}},
		{name: "custom tool name too long", tools: []anthropic.BetaAgentNewParamsToolUnion{custom(string(make([]byte, 129)))},
			msg: []string{"tools[0].name"}},
		{name: "unknown tool type", tools: []anthropic.BetaAgentNewParamsToolUnion{custom("x")},
			opts: []option.RequestOption{option.WithJSONSet("tools.0.type", "plugin")},
			msg:  []string{"tools[0].type"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := agentParams("invalid " + tc.name)
			p.Tools, p.MCPServers = tc.tools, tc.servers
			_, err := e.client.Beta.Agents.New(ctx, p, tc.opts...)
			apiErr := requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", tc.msg[0])
			for _, part := range tc.msg[1:] {
				require.Contains(t, apiErr.Message, part)
			}
		})
	}

	// The same rules apply on update, and a rejected update keeps the stored version.
	t.Run("update", func(t *testing.T) {
		t.Parallel()
		a := createAgent(t, e.client, agentParams("valid"))
		_, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{
			Tools: []anthropic.BetaAgentUpdateParamsToolUnion{{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "ghost"}}}})
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", `MCP server "ghost" is not declared`)
		// Declaring a server on an agent whose tools do not use it is refused too.
		_, err = e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{
			MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{server("unused")}})
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", `MCP server "unused" is not referenced`)
		got, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
		require.NoError(t, err)
		require.EqualValues(t, 1, got.Version)
	})
}

// TestAgentRejectedCreatesWriteNothing runs in its own workspace so the list shows exactly
// what the rejected requests left behind: nothing.
func TestAgentRejectedCreatesWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bad := []anthropic.BetaAgentNewParams{
		{Name: "", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: testModel}},
		{Name: "no model"},
		{Name: "bad tools", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: testModel},
			Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{MCPServerName: "nope"}}}},
		{Name: "bad metadata", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: testModel}, Metadata: map[string]string{"": "v"}},
	}
	for _, p := range bad {
		_, err := e.client.Beta.Agents.New(ctx, p)
		requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "")
	}
	// A null metadata value is not a string; it must not be stored as "".
	_, err := e.client.Beta.Agents.New(ctx, agentParams("null metadata"), option.WithJSONSet("metadata.k", nil))
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "metadata.k: must be a string")
	longKey := agentParams("long metadata key")
	longKey.Metadata = map[string]string{strings.Repeat("k", 65): "v"}
	_, err = e.client.Beta.Agents.New(ctx, longKey)
	apiErr := requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "metadata")
	require.Equal(t, anthropic.ErrorCode("invalid_metadata"), apiErr.ErrorCode())
	page, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Empty(t, page.Data)
}

// TestAgentConcurrentUpdates checks that parallel updates get distinct, gap-free versions and
// that optimistic concurrency lets exactly one writer of a version win.
func TestAgentConcurrentUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := createAgent(t, e.client, agentParams("c"))
	const writers = 6

	versions := make([]int64, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			got, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt(fmt.Sprintf("c%d", i))})
			errs[i] = err
			if err == nil {
				versions[i] = got.Version
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	want := make([]int64, writers)
	for i := range want {
		want[i] = int64(i + 2)
	}
	require.Equal(t, want, versions)

	latest := int64(writers + 1)
	wins := make([]bool, writers)
	for i := range writers {
		wg.Go(func() {
			_, err := e.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{
				Version: param.NewOpt(latest), Name: param.NewOpt(fmt.Sprintf("race %d", i))})
			errs[i] = err
			wins[i] = err == nil
		})
	}
	wg.Wait()
	winners := 0
	for i := range writers {
		if wins[i] {
			winners++
			continue
		}
		requireAPIErr(t, errs[i], http.StatusConflict, "invalid_request_error", "Concurrent modification detected")
	}
	require.Equal(t, 1, winners)
	cur, err := e.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.Equal(t, latest+1, cur.Version)
}
