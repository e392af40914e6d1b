package wire_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestDecodeToolParamsRejectsMalformedInput(t *testing.T) {
	tests := []struct {
		name  string
		tools string
		want  string
	}{
		{"not an array", `{"type":"custom"}`, "tools: must be an array"},
		{"element not an object", `[1]`, "tools[0]: must be an object"},
		{"null element", `[null]`, "tools[0]: must be an object"},
		{"missing type", `[{}]`, "tools[0].type: is required"},
		{"type not a string", `[{"type":1}]`, "tools[0].type: must be a string"},
		{"unknown type", `[{"type":"foo"}]`, `tools[0].type: unknown tool type "foo" (expected agent_toolset_20260401, mcp_toolset or custom)`},
		{"unknown toolset field", `[{"type":"agent_toolset_20260401","foo":1}]`, "tools[0].foo: unknown field"},
		{"unknown fields reported in sorted order", `[{"type":"custom","zz":1,"aa":2}]`, "tools[0].aa: unknown field"},
		{"unknown default_config field", `[{"type":"agent_toolset_20260401","default_config":{"enable":true}}]`, "tools[0].default_config.enable: unknown field"},
		{"default_config not an object", `[{"type":"agent_toolset_20260401","default_config":true}]`, "tools[0].default_config: must be an object"},
		{"configs not an array", `[{"type":"agent_toolset_20260401","configs":{}}]`, "tools[0].configs: must be an array"},
		{"unknown config field", `[{"type":"agent_toolset_20260401","configs":[{"name":"read"},{"name":"bash","colour":"red"}]}]`, "tools[0].configs[1].colour: unknown field"},
		{"config name not a string", `[{"type":"agent_toolset_20260401","configs":[{"name":7}]}]`, "tools[0].configs[0].name: must be a string"},
		{"enabled not a boolean", `[{"type":"agent_toolset_20260401","configs":[{"name":"bash","enabled":"yes"}]}]`, "tools[0].configs[0].enabled: must be a boolean"},
		{"policy as a bare string", `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":"always_ask"}}]`, "tools[0].default_config.permission_policy: must be an object"},
		{"policy without type", `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{}}}]`, "tools[0].default_config.permission_policy.type: is required"},
		{"unknown policy field", `[{"type":"agent_toolset_20260401","configs":[{"name":"bash","permission_policy":{"type":"auto","reason":"x"}}]}]`, "tools[0].configs[0].permission_policy.reason: unknown field"},
		{"max_content_tokens not an integer", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","max_content_tokens":1.5}]}]`, "tools[0].configs[0].max_content_tokens: must be an integer"},
		{"domains not strings", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","allowed_domains":[1]}]}]`, "tools[0].configs[0].allowed_domains: must be an array of strings"},
		{"unknown user_location field", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_search","user_location":{"type":"approximate","zip":"1"}}]}]`, "tools[0].configs[0].user_location.zip: unknown field"},
		{"bad url_sources shorthand", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"user_input":"some"}}]}]`, `tools[0].configs[0].url_sources.user_input: unknown shorthand "some" (expected "all", "none" or an object)`},
		{"url_sources filter of wrong JSON type", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"user_input":3}}]}]`, `tools[0].configs[0].url_sources.user_input: must be "all", "none" or an object`},
		{"unknown url_sources key", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"mcp_results":"none"}}]}]`, "tools[0].configs[0].url_sources.mcp_results: unknown field"},
		{"unknown url_sources filter field", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"client_tool_results":{"type":"all","x":1}}}]}]`, "tools[0].configs[0].url_sources.client_tool_results.x: unknown field"},
		{"unknown tool_reference field", `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"client_tool_results":{"type":"only","tools":[{"type":"tool_reference","name":"a","id":1}]}}}]}]`, "tools[0].configs[0].url_sources.client_tool_results.tools[0].id: unknown field"},
		{"mcp config has no type", `[{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"get_issue","type":"get_issue"}]}]`, "tools[0].configs[0].type: unknown field"},
		{"mcp_server_name not a string", `[{"type":"mcp_toolset","mcp_server_name":["gh"]}]`, "tools[0].mcp_server_name: must be a string"},
		{"unknown custom field", `[{"type":"custom","name":"a","description":"d","input_schemas":{}}]`, "tools[0].input_schemas: unknown field"},
		{"custom description not a string", `[{"type":"custom","name":"a","description":{}}]`, "tools[0].description: must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeToolParams(json.RawMessage(tt.tools))
			require.EqualError(t, err, tt.want)
			var te *wire.ToolConfigError
			require.True(t, errors.As(err, &te), "errors are *wire.ToolConfigError")
		})
	}
}

func TestDecodeMCPServersRejectsMalformedInput(t *testing.T) {
	tests := []struct {
		name    string
		servers string
		want    string
	}{
		{"not an array", `{"name":"gh"}`, "mcp_servers: must be an array"},
		{"unknown field", `[{"type":"url","name":"gh","url":"https://x","headers":{}}]`, "mcp_servers[0].headers: unknown field"},
		{"url not a string", `[{"type":"url","name":"gh","url":1}]`, "mcp_servers[0].url: must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeMCPServers(json.RawMessage(tt.servers))
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestDecodeToolParamsAbsentOrNull(t *testing.T) {
	for _, raw := range []string{"", "null", " null "} {
		params, err := wire.DecodeToolParams(json.RawMessage(raw))
		require.NoError(t, err)
		require.Nil(t, params)
	}
}

func TestDecodeToolParamsKeepsWhatWasSent(t *testing.T) {
	params, err := wire.DecodeToolParams(json.RawMessage(`[
		{"type":"agent_toolset_20260401",
		 "default_config":{"enabled":null,"permission_policy":{"type":"always_ask"}},
		 "configs":[
		   {"name":"bash","type":"bash","enabled":false,"permission_policy":null},
		   {"name":"web_fetch","allowed_domains":[],"max_content_tokens":5,
		    "url_sources":{"user_input":"none","client_tool_results":{"type":"only","tools":[{"type":"tool_reference","name":"t"}]},"server_tool_results":null}},
		   {"name":"web_search","blocked_domains":null,"user_location":{"type":"approximate","country":"US","city":null}}]},
		{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"get_issue","enabled":true}]},
		{"type":"custom","name":"w","description":"d","input_schema":{"type":"object","$defs":{}}}
	]`))
	require.NoError(t, err)
	require.Len(t, params, 3)

	ts := params[0].Toolset
	require.NotNil(t, ts)
	require.Equal(t, wire.ToolTypeAgentToolset, params[0].Type())
	require.Nil(t, ts.DefaultConfig.Enabled, "null counts as omitted")
	require.Equal(t, wire.PermissionAlwaysAsk, *ts.DefaultConfig.PermissionPolicy)
	require.Equal(t, "bash", ts.Configs[0].Type)
	require.False(t, *ts.Configs[0].Enabled)
	require.Nil(t, ts.Configs[0].PermissionPolicy)

	fetch := ts.Configs[1]
	require.NotNil(t, fetch.AllowedDomains, "[] is kept apart from omitted so validation can reject it")
	require.Empty(t, fetch.AllowedDomains)
	require.Nil(t, fetch.BlockedDomains)
	require.Equal(t, int64(5), *fetch.MaxContentTokens)
	require.Equal(t, &wire.ToolURLSourceFilter{Type: "none"}, fetch.URLSources.UserInput, "shorthand becomes the object form")
	require.Equal(t, []wire.ToolReference{{Type: "tool_reference", Name: "t"}}, fetch.URLSources.ClientToolResults.Tools)
	require.Nil(t, fetch.URLSources.ServerToolResults)

	search := ts.Configs[2]
	require.Nil(t, search.BlockedDomains)
	require.Equal(t, "US", *search.UserLocation.Country)
	require.Nil(t, search.UserLocation.City)

	require.Equal(t, "gh", params[1].MCPToolset.MCPServerName)
	require.True(t, *params[1].MCPToolset.Configs[0].Enabled)
	require.JSONEq(t, `{"type":"object","$defs":{}}`, string(params[2].Custom.InputSchema))
}

func TestToolParamMarshalRoundTrips(t *testing.T) {
	in := `[
		{"type":"agent_toolset_20260401","default_config":{"enabled":false},
		 "configs":[{"name":"web_fetch","blocked_domains":["ads.example.com"],"url_sources":{"user_input":{"type":"all"},"client_tool_results":null,"server_tool_results":null}}]},
		{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"permission_policy":{"type":"auto"}}},
		{"type":"custom","name":"w","description":"d","input_schema":{"type":"object"}}
	]`
	params, err := wire.DecodeToolParams(json.RawMessage(in))
	require.NoError(t, err)
	out, err := json.Marshal(params)
	require.NoError(t, err)
	require.JSONEq(t, in, string(out))

	_, err = json.Marshal(wire.ToolParam{})
	require.Error(t, err)
}

func TestPermissionPolicyWireForm(t *testing.T) {
	b, err := json.Marshal(wire.PermissionAuto)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"auto"}`, string(b))

	var p wire.PermissionPolicy
	require.NoError(t, json.Unmarshal([]byte(`{"type":"always_ask"}`), &p))
	require.Equal(t, wire.PermissionAlwaysAsk, p)
	require.True(t, p.Known())
	require.False(t, wire.PermissionPolicy("sometimes").Known())
}

func TestResolvedToolMarshalShapes(t *testing.T) {
	tokens := int64(100)
	country := "DE"
	tools := []wire.Tool{
		{Toolset: &wire.Toolset{DefaultConfig: wire.ToolDefaultConfig{Enabled: true, PermissionPolicy: wire.PermissionAlwaysAllow}}},
		{Toolset: &wire.Toolset{
			DefaultConfig: wire.ToolDefaultConfig{Enabled: false, PermissionPolicy: wire.PermissionAlwaysAsk},
			Configs: []wire.ToolConfig{
				{Name: "bash", Enabled: true, PermissionPolicy: wire.PermissionAuto},
				{Name: "web_fetch", Enabled: true, PermissionPolicy: wire.PermissionAlwaysAsk},
				{Name: "web_fetch", Enabled: true, PermissionPolicy: wire.PermissionAlwaysAsk, AllowedDomains: []string{"a.com"}, MaxContentTokens: &tokens,
					URLSources: &wire.ToolURLSources{ServerToolResults: &wire.ToolURLSourceFilter{Type: "except", Tools: []wire.ToolReference{{Type: "tool_reference", Name: "web_search"}}}}},
				{Name: "web_search", Enabled: false, PermissionPolicy: wire.PermissionAlwaysAllow},
				{Name: "web_search", Enabled: true, PermissionPolicy: wire.PermissionAlwaysAllow, BlockedDomains: []string{"b.com/x"},
					UserLocation: &wire.ToolUserLocation{Type: "approximate", Country: &country}},
			},
		}},
		{MCPToolset: &wire.MCPToolset{MCPServerName: "gh", DefaultConfig: wire.ToolDefaultConfig{Enabled: true, PermissionPolicy: wire.PermissionAlwaysAsk}}},
		{Custom: &wire.CustomTool{Name: "w", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}
	b, err := json.Marshal(tools)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"type":"agent_toolset_20260401","default_config":{"enabled":true,"permission_policy":{"type":"always_allow"}},"configs":[]},
		{"type":"agent_toolset_20260401","default_config":{"enabled":false,"permission_policy":{"type":"always_ask"}},"configs":[
			{"name":"bash","type":"bash","enabled":true,"permission_policy":{"type":"auto"}},
			{"name":"web_fetch","type":"web_fetch","enabled":true,"permission_policy":{"type":"always_ask"},"max_content_tokens":null,"url_sources":null},
			{"name":"web_fetch","type":"web_fetch","enabled":true,"permission_policy":{"type":"always_ask"},"allowed_domains":["a.com"],"max_content_tokens":100,
			 "url_sources":{"user_input":null,"client_tool_results":null,"server_tool_results":{"type":"except","tools":[{"type":"tool_reference","name":"web_search"}]}}},
			{"name":"web_search","type":"web_search","enabled":false,"permission_policy":{"type":"always_allow"},"user_location":null},
			{"name":"web_search","type":"web_search","enabled":true,"permission_policy":{"type":"always_allow"},"blocked_domains":["b.com/x"],
			 "user_location":{"type":"approximate","city":null,"region":null,"country":"DE","timezone":null}}]},
		{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"enabled":true,"permission_policy":{"type":"always_ask"}},"configs":[]},
		{"type":"custom","name":"w","description":"d","input_schema":{"type":"object"}}
	]`, string(b))

	// What is stored reads back into the same values and the same JSON.
	var back []wire.Tool
	require.NoError(t, json.Unmarshal(b, &back))
	again, err := json.Marshal(back)
	require.NoError(t, err)
	require.JSONEq(t, string(b), string(again))
	require.Equal(t, wire.ToolTypeCustom, back[3].Type())
	require.Equal(t, wire.ToolTypeMCPToolset, back[2].Type())

	_, err = json.Marshal(wire.Tool{})
	require.Error(t, err)
	require.Error(t, json.Unmarshal([]byte(`{"type":"bogus"}`), &wire.Tool{}))
}
