package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/wire"
)

const gh = `[{"type":"url","name":"gh","url":"https://mcp.example.com/sse"}]`

// toolset wraps configs entries into an agent toolset array.
func toolset(configs ...string) string {
	return `[{"type":"agent_toolset_20260401","configs":[` + strings.Join(configs, ",") + `]}]`
}

// custom returns a valid custom tool named name.
func custom(name string) string {
	return fmt.Sprintf(`{"type":"custom","name":%q,"description":"d","input_schema":{"type":"object"}}`, name)
}

func TestParseAndResolveRejects(t *testing.T) {
	tooManyServers := make([]string, 21)
	for i := range tooManyServers {
		tooManyServers[i] = fmt.Sprintf(`{"type":"url","name":"s%d","url":"https://x"}`, i)
	}
	domains65 := `["` + strings.TrimSuffix(strings.Repeat(`a.com","`, 65), `","`) + `"]`
	refs := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf(`{"type":"tool_reference","name":%q}`, n))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}

	tests := []struct {
		name    string
		tools   string
		servers string
		want    string
	}{
		// Decoding problems surface through ParseAndResolve with full paths.
		{name: "decode error in tools", tools: `[{"type":"custom","colour":1}]`, want: "tools[0].colour: unknown field"},
		{name: "decode error in servers", servers: `[{"name":1}]`, want: "mcp_servers[0].name: must be a string"},

		// Built-in toolset.
		{name: "unknown built-in", tools: toolset(`{"name":"bash"}`, `{"name":"foo"}`),
			want: `tools[0].configs[1].name: unknown built-in tool "foo" (expected one of bash, read, write, edit, glob, grep, web_fetch, web_search)`},
		{name: "config without name", tools: toolset(`{"enabled":false}`), want: "tools[0].configs[0].name: is required"},
		{name: "config type differs from name", tools: toolset(`{"name":"bash","type":"read"}`),
			want: `tools[0].configs[0].type: must equal name "bash" when set (got "read")`},
		{name: "duplicate config", tools: toolset(`{"name":"bash"}`, `{"name":"read"}`, `{"name":"bash","enabled":false}`),
			want: `tools[0].configs[2].name: duplicate config for built-in tool "bash" (first at configs[0])`},
		{name: "two agent toolsets", tools: `[{"type":"agent_toolset_20260401"},` + custom("x") + `,{"type":"agent_toolset_20260401"}]`,
			want: "tools[2].type: only one agent_toolset_20260401 is allowed (first at tools[0])"},
		{name: "unknown default policy", tools: `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"never"}}}]`,
			want: `tools[0].default_config.permission_policy.type: unknown permission policy "never" (expected always_allow, always_ask or auto)`},
		{name: "unknown entry policy", tools: toolset(`{"name":"grep","permission_policy":{"type":"ALWAYS_ASK"}}`),
			want: `tools[0].configs[0].permission_policy.type: unknown permission policy "ALWAYS_ASK" (expected always_allow, always_ask or auto)`},

		// Web extras.
		{name: "domains on bash", tools: toolset(`{"name":"bash","allowed_domains":["a.com"]}`),
			want: `tools[0].configs[0].allowed_domains: is only supported by web_fetch and web_search, not "bash"`},
		{name: "blocked domains on read", tools: toolset(`{"name":"read","blocked_domains":["a.com"]}`),
			want: `tools[0].configs[0].blocked_domains: is only supported by web_fetch and web_search, not "read"`},
		{name: "max_content_tokens on web_search", tools: toolset(`{"name":"web_search","max_content_tokens":10}`),
			want: `tools[0].configs[0].max_content_tokens: is only supported by web_fetch, not "web_search"`},
		{name: "url_sources on web_search", tools: toolset(`{"name":"web_search","url_sources":{}}`),
			want: `tools[0].configs[0].url_sources: is only supported by web_fetch, not "web_search"`},
		{name: "user_location on web_fetch", tools: toolset(`{"name":"web_fetch","user_location":{"type":"approximate"}}`),
			want: `tools[0].configs[0].user_location: is only supported by web_search, not "web_fetch"`},
		{name: "both domain lists", tools: toolset(`{"name":"web_fetch","allowed_domains":["a.com"],"blocked_domains":["b.com"]}`),
			want: "tools[0].configs[0]: Only one of allowed_domains or blocked_domains may be set."},
		{name: "empty allowed list", tools: toolset(`{"name":"web_search","allowed_domains":[]}`),
			want: "tools[0].configs[0].allowed_domains: must not be empty; omit it or send null instead"},
		{name: "empty blocked list", tools: toolset(`{"name":"web_fetch","blocked_domains":[]}`),
			want: "tools[0].configs[0].blocked_domains: must not be empty; omit it or send null instead"},
		{name: "65 domains", tools: toolset(`{"name":"web_fetch","allowed_domains":` + domains65 + `}`),
			want: "tools[0].configs[0].allowed_domains: must have at most 64 entries (got 65)"},
		{name: "web_fetch domain with path", tools: toolset(`{"name":"web_fetch","allowed_domains":["a.com","docs.example.com/api"]}`),
			want: `tools[0].configs[0].allowed_domains[1]: "docs.example.com/api" is not a plain hostname like "docs.example.com" (no scheme, port or path)`},
		{name: "web_fetch domain with scheme", tools: toolset(`{"name":"web_fetch","blocked_domains":["https://a.com"]}`),
			want: `tools[0].configs[0].blocked_domains[0]: "https://a.com" is not a plain hostname like "docs.example.com" (no scheme, port or path)`},
		{name: "web_fetch domain with port", tools: toolset(`{"name":"web_fetch","blocked_domains":["a.com:8080"]}`),
			want: `tools[0].configs[0].blocked_domains[0]: "a.com:8080" is not a plain hostname like "docs.example.com" (no scheme, port or path)`},
		{name: "wildcard domain", tools: toolset(`{"name":"web_fetch","allowed_domains":["*.a.com"]}`),
			want: `tools[0].configs[0].allowed_domains[0]: "*.a.com" is not a plain hostname like "docs.example.com" (no scheme, port or path)`},
		{name: "empty domain", tools: toolset(`{"name":"web_fetch","allowed_domains":[""]}`),
			want: `tools[0].configs[0].allowed_domains[0]: "" is not a plain hostname like "docs.example.com" (no scheme, port or path)`},
		{name: "web_search domain with scheme", tools: toolset(`{"name":"web_search","allowed_domains":["http://a.com/x"]}`),
			want: `tools[0].configs[0].allowed_domains[0]: "http://a.com/x" is not a plain hostname like "docs.example.com", optionally followed by a path (no scheme or port)`},
		{name: "web_search path with query", tools: toolset(`{"name":"web_search","allowed_domains":["a.com/x?y=1"]}`),
			want: `tools[0].configs[0].allowed_domains[0]: "a.com/x?y=1" is not a plain hostname like "docs.example.com", optionally followed by a path (no scheme or port)`},
		{name: "zero max_content_tokens", tools: toolset(`{"name":"web_fetch","max_content_tokens":0}`),
			want: "tools[0].configs[0].max_content_tokens: must be a positive integer (got 0)"},
		{name: "negative max_content_tokens", tools: toolset(`{"name":"web_fetch","max_content_tokens":-5}`),
			want: "tools[0].configs[0].max_content_tokens: must be a positive integer (got -5)"},
		{name: "user_location wrong type", tools: toolset(`{"name":"web_search","user_location":{"type":"exact"}}`),
			want: `tools[0].configs[0].user_location.type: must be "approximate" (got "exact")`},
		{name: "user_location without type", tools: toolset(`{"name":"web_search","user_location":{"country":"US"}}`),
			want: `tools[0].configs[0].user_location.type: must be "approximate" (got "")`},
		{name: "three-letter country", tools: toolset(`{"name":"web_search","user_location":{"type":"approximate","country":"USA"}}`),
			want: `tools[0].configs[0].user_location.country: must be a two-letter ISO 3166-1 country code like "US" (got "USA")`},
		{name: "all url sources none", tools: toolset(`{"name":"web_fetch","url_sources":{"user_input":"none","client_tool_results":"none","server_tool_results":{"type":"none"}}}`),
			want: `tools[0].configs[0].url_sources: user_input, client_tool_results and server_tool_results cannot all be "none": web_fetch could fetch nothing (disable the tool instead)`},
		{name: "user_input only-list", tools: toolset(`{"name":"web_fetch","url_sources":{"user_input":{"type":"only","tools":` + refs("x") + `}}}`),
			want: `tools[0].configs[0].url_sources.user_input.type: must be "all" or "none" (got "only")`},
		{name: "unknown filter type", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{"type":"some"}}}`),
			want: `tools[0].configs[0].url_sources.server_tool_results.type: must be "all", "none", "only" or "except" (got "some")`},
		{name: "filter without type", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{}}}`),
			want: "tools[0].configs[0].url_sources.server_tool_results.type: is required"},
		{name: "only without tools", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{"type":"only","tools":[]}}}`),
			want: "tools[0].configs[0].url_sources.server_tool_results.tools: must list at least one tool"},
		{name: "all with tools", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{"type":"all","tools":` + refs("web_search") + `}}}`),
			want: `tools[0].configs[0].url_sources.server_tool_results.tools: is only allowed with type "only" or "except"`},
		{name: "server results naming another tool", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{"type":"except","tools":` + refs("web_search", "bash") + `}}}`),
			want: `tools[0].configs[0].url_sources.server_tool_results.tools[1].name: must be "web_search" or "web_fetch" (got "bash")`},
		{name: "duplicate reference", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{"type":"only","tools":` + refs("web_fetch", "web_fetch") + `}}}`),
			want: `tools[0].configs[0].url_sources.server_tool_results.tools[1].name: duplicate tool "web_fetch" (first at tools[0])`},
		{name: "reference of wrong type", tools: toolset(`{"name":"web_fetch","url_sources":{"server_tool_results":{"type":"only","tools":[{"type":"tool","name":"web_fetch"}]}}}`),
			want: `tools[0].configs[0].url_sources.server_tool_results.tools[0].type: must be "tool_reference" (got "tool")`},
		{name: "client results naming an unknown custom tool",
			tools: `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"client_tool_results":{"type":"only","tools":` + refs("lookup", "missing") + `}}}]},` + custom("lookup") + `]`,
			want:  `tools[0].configs[0].url_sources.client_tool_results.tools[1].name: no custom tool named "missing" in tools`},

		// MCP toolsets and servers.
		{name: "toolset without server name", tools: `[{"type":"mcp_toolset"}]`, servers: gh, want: "tools[0].mcp_server_name: is required"},
		{name: "server name too long", tools: `[{"type":"mcp_toolset","mcp_server_name":"` + strings.Repeat("s", 256) + `"}]`, servers: gh,
			want: "tools[0].mcp_server_name: must be at most 255 characters (got 256)"},
		{name: "undeclared server", tools: `[{"type":"mcp_toolset","mcp_server_name":"gitlab"}]`, servers: gh,
			want: `tools[0].mcp_server_name: MCP server "gitlab" is not declared in mcp_servers`},
		{name: "undeclared server without mcp_servers", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh"}]`,
			want: `tools[0].mcp_server_name: MCP server "gh" is not declared in mcp_servers`},
		{name: "declared server without toolset", tools: `[]`, servers: gh,
			want: `mcp_servers[0]: MCP server "gh" is not referenced by any mcp_toolset in tools`},
		{name: "declared server without tools at all", servers: gh,
			want: `mcp_servers[0]: MCP server "gh" is not referenced by any mcp_toolset in tools`},
		{name: "two toolsets for one server", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh"},{"type":"mcp_toolset","mcp_server_name":"gh"}]`, servers: gh,
			want: `tools[1].mcp_server_name: MCP server "gh" already has a toolset at tools[0]; use one mcp_toolset per server`},
		{name: "mcp config without name", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"enabled":true}]}]`, servers: gh,
			want: "tools[0].configs[0].name: is required"},
		{name: "mcp config name too long", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"` + strings.Repeat("t", 129) + `"}]}]`, servers: gh,
			want: "tools[0].configs[0].name: must be at most 128 characters (got 129)"},
		{name: "duplicate mcp config", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"a"},{"name":"a"}]}]`, servers: gh,
			want: `tools[0].configs[1].name: duplicate config for MCP tool "a" of server "gh" (first at configs[0])`},
		{name: "unknown mcp policy", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"a","permission_policy":{"type":"ask"}}]}]`, servers: gh,
			want: `tools[0].configs[0].permission_policy.type: unknown permission policy "ask" (expected always_allow, always_ask or auto)`},
		{name: "unknown mcp default policy", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"permission_policy":{"type":"ask"}}}]`, servers: gh,
			want: `tools[0].default_config.permission_policy.type: unknown permission policy "ask" (expected always_allow, always_ask or auto)`},
		{name: "21 servers", servers: "[" + strings.Join(tooManyServers, ",") + "]", want: "mcp_servers: at most 20 MCP servers are allowed (got 21)"},
		{name: "server type missing", servers: `[{"name":"gh","url":"https://x"}]`, want: `mcp_servers[0].type: must be "url" (got "")`},
		{name: "server type wrong", servers: `[{"type":"stdio","name":"gh","url":"https://x"}]`, want: `mcp_servers[0].type: must be "url" (got "stdio")`},
		{name: "server name missing", servers: `[{"type":"url","url":"https://x"}]`, want: "mcp_servers[0].name: is required"},
		{name: "server name over 255", servers: `[{"type":"url","name":"` + strings.Repeat("é", 256) + `","url":"https://x"}]`,
			want: "mcp_servers[0].name: must be at most 255 characters (got 256)"},
		{name: "duplicate server", servers: `[{"type":"url","name":"gh","url":"https://a"},{"type":"url","name":"gh","url":"https://b"}]`,
			want: `mcp_servers[1].name: duplicate MCP server name "gh" (first at mcp_servers[0])`},
		{name: "server url missing", servers: `[{"type":"url","name":"gh"}]`, want: "mcp_servers[0].url: is required"},
		{name: "server url relative", servers: `[{"type":"url","name":"gh","url":"/mcp"}]`, want: `mcp_servers[0].url: must be an absolute http or https URL (got "/mcp")`},
		{name: "server url ftp", servers: `[{"type":"url","name":"gh","url":"ftp://x/y"}]`, want: `mcp_servers[0].url: must be an absolute http or https URL (got "ftp://x/y")`},
		{name: "server url too long", servers: `[{"type":"url","name":"gh","url":"https://x/` + strings.Repeat("a", 2040) + `"}]`,
			want: "mcp_servers[0].url: must be at most 2048 characters (got 2050)"},

		// Custom tools.
		{name: "custom without name", tools: `[{"type":"custom","description":"d","input_schema":{"type":"object"}}]`, want: "tools[0].name: is required"},
		{name: "custom name with space", tools: `[` + custom("get weather") + `]`,
			want: `tools[0].name: must be 1-128 characters of letters, digits, underscores and hyphens (got "get weather")`},
		{name: "custom name too long", tools: `[` + custom(strings.Repeat("n", 129)) + `]`,
			want: `tools[0].name: must be 1-128 characters of letters, digits, underscores and hyphens (got "` + strings.Repeat("n", 129) + `")`},
		{name: "duplicate custom", tools: `[` + custom("a") + `,` + custom("b") + `,` + custom("a") + `]`,
			want: `tools[2].name: duplicate custom tool name "a" (first at tools[0])`},
		{name: "custom shadows enabled built-in", tools: `[` + custom("bash") + `,{"type":"agent_toolset_20260401"}]`,
			want: `tools[0].name: custom tool "bash" has the name of an enabled built-in tool; rename it or disable the built-in`},
		{name: "custom shadows built-in enabled by entry", tools: `[{"type":"agent_toolset_20260401","default_config":{"enabled":false},"configs":[{"name":"grep","enabled":true}]},` + custom("grep") + `]`,
			want: `tools[1].name: custom tool "grep" has the name of an enabled built-in tool; rename it or disable the built-in`},
		{name: "custom without description", tools: `[{"type":"custom","name":"a","input_schema":{"type":"object"}}]`, want: "tools[0].description: is required"},
		{name: "custom without schema", tools: `[{"type":"custom","name":"a","description":"d"}]`, want: "tools[0].input_schema: is required"},
		{name: "schema not an object", tools: `[{"type":"custom","name":"a","description":"d","input_schema":"object"}]`,
			want: "tools[0].input_schema: must be a JSON Schema object"},
		{name: "schema without type", tools: `[{"type":"custom","name":"a","description":"d","input_schema":{"properties":{}}}]`,
			want: `tools[0].input_schema.type: must be "object"`},
		{name: "schema of another type", tools: `[{"type":"custom","name":"a","description":"d","input_schema":{"type":"string"}}]`,
			want: `tools[0].input_schema.type: must be "object"`},
		{name: "schema properties not an object", tools: `[{"type":"custom","name":"a","description":"d","input_schema":{"type":"object","properties":[]}}]`,
			want: "tools[0].input_schema.properties: must be an object"},
		{name: "schema required not strings", tools: `[{"type":"custom","name":"a","description":"d","input_schema":{"type":"object","required":[1]}}]`,
			want: "tools[0].input_schema.required: must be an array of strings"},
		{name: "schema required not an array", tools: `[{"type":"custom","name":"a","description":"d","input_schema":{"type":"object","required":"a"}}]`,
			want: "tools[0].input_schema.required: must be an array of strings"},

		// Total.
		{name: "257 tools", tools: manyTools(8, 249, 0),
			want: "tools: at most 256 tools are allowed across all toolsets (got 257: each enabled built-in tool, custom tool and MCP tool config counts one)"},
		{name: "257 MCP tool configs", tools: manyTools(0, 0, 257), servers: gh,
			want: "tools: at most 256 tools are allowed across all toolsets (got 257: each enabled built-in tool, custom tool and MCP tool config counts one)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resolved, servers, err := toolconfig.ParseAndResolve(raw(tt.tools), raw(tt.servers))
			require.EqualError(t, err, tt.want)
			var te *wire.ToolConfigError
			require.True(t, errors.As(err, &te), "errors are *wire.ToolConfigError so the API can answer 400")
			require.Nil(t, resolved)
			require.Nil(t, servers)
		})
	}
}

// manyTools builds a tools array with the given number of enabled built-ins (from the start
// of the documented list), custom tools, and configs in one MCP toolset for server "gh".
func manyTools(builtIns, customs, mcpConfigs int) string {
	var parts []string
	if builtIns > 0 {
		var cfgs []string
		for _, name := range toolconfig.BuiltInNames()[builtIns:] {
			cfgs = append(cfgs, fmt.Sprintf(`{"name":%q,"enabled":false}`, name))
		}
		parts = append(parts, `{"type":"agent_toolset_20260401","configs":[`+strings.Join(cfgs, ",")+`]}`)
	}
	for i := range customs {
		parts = append(parts, custom(fmt.Sprintf("c%d", i)))
	}
	if mcpConfigs > 0 {
		var cfgs []string
		for i := range mcpConfigs {
			cfgs = append(cfgs, fmt.Sprintf(`{"name":"t%d"}`, i))
		}
		parts = append(parts, `{"type":"mcp_toolset","mcp_server_name":"gh","configs":[`+strings.Join(cfgs, ",")+`]}`)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func TestParseAndResolveAccepts(t *testing.T) {
	tests := []struct {
		name    string
		tools   string
		servers string
	}{
		{name: "exactly 256 tools", tools: manyTools(8, 248, 0)},
		{name: "disabled built-ins do not count", tools: manyTools(2, 254, 0)},
		{name: "256 MCP configs", tools: manyTools(0, 0, 256), servers: gh},
		{name: "custom named like a disabled built-in", tools: `[{"type":"agent_toolset_20260401","configs":[{"name":"bash","enabled":false}]},` + custom("bash") + `]`},
		{name: "custom named like a built-in without toolset", tools: `[` + custom("read") + `]`},
		{name: "64 domains", tools: toolset(`{"name":"web_fetch","allowed_domains":["` + strings.TrimSuffix(strings.Repeat(`a.com","`, 64), `","`) + `"]}`)},
		{name: "web_search domain with path", tools: toolset(`{"name":"web_search","blocked_domains":["example.com/blog","sub-1.example.co.uk"]}`)},
		{name: "null domain lists", tools: toolset(`{"name":"web_fetch","allowed_domains":null,"blocked_domains":["a.com"]}`)},
		{name: "two url sources none", tools: toolset(`{"name":"web_fetch","url_sources":{"user_input":"none","client_tool_results":"none"}}`)},
		{name: "all three none with one unset is fine", tools: toolset(`{"name":"web_fetch","url_sources":{"user_input":"none","client_tool_results":"none","server_tool_results":null}}`)},
		{name: "server url with port and path", tools: `[{"type":"mcp_toolset","mcp_server_name":"gh"}]`, servers: `[{"type":"url","name":"gh","url":"http://localhost:8080/mcp"}]`},
		{name: "schema with null properties and required", tools: `[{"type":"custom","name":"a","description":"d","input_schema":{"type":"object","properties":null,"required":null}}]`},
		{name: "auto policy", tools: `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"auto"}}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := toolconfig.ParseAndResolve(raw(tt.tools), raw(tt.servers))
			require.NoError(t, err)
		})
	}
}

// TestResolvedEcho pins the JSON the API echoes (API.md §3.2, §17) for representative inputs.
func TestResolvedEcho(t *testing.T) {
	tests := []struct {
		name        string
		tools       string
		servers     string
		wantTools   string
		wantServers string
	}{
		{
			name:      "nothing",
			wantTools: `[]`, wantServers: `[]`,
		},
		{
			name:  "null tools and servers",
			tools: `null`, servers: `null`,
			wantTools: `[]`, wantServers: `[]`,
		},
		{
			name:        "toolset without default_config (§17)",
			tools:       `[{"type":"agent_toolset_20260401"}]`,
			wantTools:   `[{"type":"agent_toolset_20260401","default_config":{"enabled":true,"permission_policy":{"type":"always_allow"}},"configs":[]}]`,
			wantServers: `[]`,
		},
		{
			name: "API.md §3.2 (a) request",
			tools: `[{
				"type": "agent_toolset_20260401",
				"default_config": {"enabled": true, "permission_policy": {"type": "always_allow"}},
				"configs": [
					{"name": "bash", "enabled": false},
					{"name": "read", "permission_policy": {"type": "always_ask"}},
					{"type": "web_fetch", "name": "web_fetch", "blocked_domains": ["ads.example.com"], "max_content_tokens": 50000},
					{"type": "web_search", "name": "web_search", "allowed_domains": ["docs.example.com"],
					 "user_location": {"type": "approximate", "country": "US", "timezone": "America/Los_Angeles"}}
				]}]`,
			wantTools: `[{
				"type": "agent_toolset_20260401",
				"default_config": {"enabled": true, "permission_policy": {"type": "always_allow"}},
				"configs": [
					{"name": "bash", "type": "bash", "enabled": false, "permission_policy": {"type": "always_allow"}},
					{"name": "read", "type": "read", "enabled": true, "permission_policy": {"type": "always_ask"}},
					{"name": "web_fetch", "type": "web_fetch", "enabled": true, "permission_policy": {"type": "always_allow"},
					 "blocked_domains": ["ads.example.com"], "max_content_tokens": 50000, "url_sources": null},
					{"name": "web_search", "type": "web_search", "enabled": true, "permission_policy": {"type": "always_allow"},
					 "allowed_domains": ["docs.example.com"],
					 "user_location": {"type": "approximate", "city": null, "region": null, "country": "US", "timezone": "America/Los_Angeles"}}
				]}]`,
			wantServers: `[]`,
		},
		{
			name:  "entries inherit default_config; null policy inherits",
			tools: `[{"type":"agent_toolset_20260401","default_config":{"enabled":false,"permission_policy":{"type":"always_ask"}},"configs":[{"name":"glob","permission_policy":null},{"name":"edit","enabled":true,"permission_policy":{"type":"auto"}}]}]`,
			wantTools: `[{"type":"agent_toolset_20260401","default_config":{"enabled":false,"permission_policy":{"type":"always_ask"}},"configs":[
				{"name":"glob","type":"glob","enabled":false,"permission_policy":{"type":"always_ask"}},
				{"name":"edit","type":"edit","enabled":true,"permission_policy":{"type":"auto"}}]}]`,
			wantServers: `[]`,
		},
		{
			name:  "web_fetch url_sources in object form with null keys",
			tools: `[{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","url_sources":{"user_input":"none","server_tool_results":{"type":"only","tools":[{"type":"tool_reference","name":"web_search"}]},"client_tool_results":{"type":"except","tools":[{"type":"tool_reference","name":"lookup"}]}}}]},` + custom("lookup") + `]`,
			wantTools: `[{"type":"agent_toolset_20260401","default_config":{"enabled":true,"permission_policy":{"type":"always_allow"}},"configs":[
				{"name":"web_fetch","type":"web_fetch","enabled":true,"permission_policy":{"type":"always_allow"},"max_content_tokens":null,
				 "url_sources":{"user_input":{"type":"none"},
				                "client_tool_results":{"type":"except","tools":[{"type":"tool_reference","name":"lookup"}]},
				                "server_tool_results":{"type":"only","tools":[{"type":"tool_reference","name":"web_search"}]}}}]},
				{"type":"custom","name":"lookup","description":"d","input_schema":{"type":"object"}}]`,
			wantServers: `[]`,
		},
		{
			name:    "API.md §3.2 (b) MCP toolset",
			tools:   `[{"type": "mcp_toolset", "mcp_server_name": "github", "default_config": {"enabled": false, "permission_policy": {"type": "always_allow"}}, "configs": [{"name": "get_issue", "enabled": true}]}]`,
			servers: `[{"type":"url","name":"github","url":"https://api.githubcopilot.com/mcp/"}]`,
			wantTools: `[{"type":"mcp_toolset","mcp_server_name":"github",
				"default_config":{"enabled":false,"permission_policy":{"type":"always_allow"}},
				"configs":[{"name":"get_issue","enabled":true,"permission_policy":{"type":"always_allow"}}]}]`,
			wantServers: `[{"type":"url","name":"github","url":"https://api.githubcopilot.com/mcp/"}]`,
		},
		{
			name:    "MCP toolset defaults to always_ask (§15 row 9)",
			tools:   `[{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"a"},{"name":"b","enabled":false,"permission_policy":{"type":"always_allow"}}]}]`,
			servers: gh,
			wantTools: `[{"type":"mcp_toolset","mcp_server_name":"gh",
				"default_config":{"enabled":true,"permission_policy":{"type":"always_ask"}},
				"configs":[{"name":"a","enabled":true,"permission_policy":{"type":"always_ask"}},
				           {"name":"b","enabled":false,"permission_policy":{"type":"always_allow"}}]}]`,
			wantServers: gh,
		},
		{
			name: "API.md §3.2 (c) custom tool keeps extra schema keywords",
			tools: `[{"type": "custom", "name": "get_weather", "description": "Weather.",
				"input_schema": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"],
				                 "additionalProperties": false, "$defs": {"unit": {"enum": ["c", "f"]}}}}]`,
			wantTools: `[{"type":"custom","name":"get_weather","description":"Weather.",
				"input_schema":{"type":"object","properties":{"city":{"type":"string","minLength":1}},"required":["city"],
				                "additionalProperties":false,"$defs":{"unit":{"enum":["c","f"]}}}}]`,
			wantServers: `[]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resolved, servers, err := toolconfig.ParseAndResolve(raw(tt.tools), raw(tt.servers))
			require.NoError(t, err)
			gotTools, err := json.Marshal(resolved)
			require.NoError(t, err)
			require.JSONEq(t, tt.wantTools, string(gotTools))
			gotServers, err := json.Marshal(servers)
			require.NoError(t, err)
			require.JSONEq(t, tt.wantServers, string(gotServers))
		})
	}
}

func TestResolveCompactsSchemaAndDoesNotAlias(t *testing.T) {
	params, err := wire.DecodeToolParams(json.RawMessage(`[
		{"type":"agent_toolset_20260401","configs":[{"name":"web_fetch","allowed_domains":["a.com"]}]},
		{"type":"custom","name":"a","description":"d","input_schema":{ "type" : "object" }}]`))
	require.NoError(t, err)
	resolved, err := toolconfig.Resolve(params, nil)
	require.NoError(t, err)
	require.Equal(t, `{"type":"object"}`, string(resolved[1].Custom.InputSchema))

	// The resolved form is stored; later edits of the request values must not reach it.
	params[0].Toolset.Configs[0].AllowedDomains[0] = "evil.com"
	require.Equal(t, []string{"a.com"}, resolved[0].Toolset.Configs[0].AllowedDomains)
}

func TestResolveGoValues(t *testing.T) {
	ask := wire.PermissionAlwaysAsk
	resolved, err := toolconfig.Resolve([]wire.ToolParam{
		{Toolset: &wire.ToolsetParam{Configs: []wire.ToolConfigParam{{Name: "bash", PermissionPolicy: &ask}}}},
		{MCPToolset: &wire.MCPToolsetParam{MCPServerName: "gh"}},
	}, []wire.MCPServer{{Type: wire.MCPServerTypeURL, Name: "gh", URL: "https://x"}})
	require.NoError(t, err)
	require.Len(t, resolved, 2)
	require.Equal(t, wire.ToolConfig{Name: "bash", Enabled: true, PermissionPolicy: ask}, resolved[0].Toolset.Configs[0])
	require.Equal(t, []wire.MCPToolConfig{}, resolved[1].MCPToolset.Configs)

	_, err = toolconfig.Resolve([]wire.ToolParam{{}}, nil)
	require.EqualError(t, err, "tools[0].type: is required")

	resolved, err = toolconfig.Resolve(nil, nil)
	require.NoError(t, err)
	require.NotNil(t, resolved)
	require.Empty(t, resolved)
}

func TestEffective(t *testing.T) {
	resolved, _, err := toolconfig.ParseAndResolve(json.RawMessage(`[
		{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"always_ask"}},
		 "configs":[{"name":"bash","enabled":false},{"name":"read","permission_policy":{"type":"auto"}},
		            {"name":"web_fetch","enabled":false},{"name":"web_search","enabled":false},
		            {"name":"glob","enabled":true,"permission_policy":{"type":"always_allow"}}]},
		{"type":"mcp_toolset","mcp_server_name":"gh","configs":[{"name":"get_issue","permission_policy":{"type":"always_allow"}},{"name":"delete_repo","enabled":false}]},
		{"type":"mcp_toolset","mcp_server_name":"docs","default_config":{"enabled":false}}
	]`), json.RawMessage(`[{"type":"url","name":"gh","url":"https://gh"},{"type":"url","name":"docs","url":"https://docs"}]`))
	require.NoError(t, err)
	eff := toolconfig.NewEffective(resolved)

	builtIns := []struct {
		name string
		want toolconfig.Setting
	}{
		{"bash", toolconfig.Setting{Enabled: false, Policy: wire.PermissionAlwaysAsk}},
		{"read", toolconfig.Setting{Enabled: true, Policy: wire.PermissionAuto}},
		{"glob", toolconfig.Setting{Enabled: true, Policy: wire.PermissionAlwaysAllow}},
		{"write", toolconfig.Setting{Enabled: true, Policy: wire.PermissionAlwaysAsk}}, // no entry: default_config
		{"web_search", toolconfig.Setting{Enabled: false, Policy: wire.PermissionAlwaysAsk}},
		{"nonexistent", toolconfig.Setting{}},
	}
	for _, tt := range builtIns {
		require.Equal(t, tt.want, eff.BuiltIn(tt.name), tt.name)
	}
	require.Equal(t, []string{"read", "write", "edit", "glob", "grep"}, eff.EnabledBuiltIns())

	cfg, ok := eff.BuiltInConfig("web_fetch")
	require.True(t, ok)
	require.False(t, cfg.Enabled)
	_, ok = eff.BuiltInConfig("grep")
	require.False(t, ok)

	mcp := []struct {
		server, tool string
		want         toolconfig.Setting
	}{
		{"gh", "get_issue", toolconfig.Setting{Enabled: true, Policy: wire.PermissionAlwaysAllow}},
		{"gh", "delete_repo", toolconfig.Setting{Enabled: false, Policy: wire.PermissionAlwaysAsk}},
		{"gh", "list_issues", toolconfig.Setting{Enabled: true, Policy: wire.PermissionAlwaysAsk}},
		{"docs", "search", toolconfig.Setting{Enabled: false, Policy: wire.PermissionAlwaysAsk}},
		{"gitlab", "get_issue", toolconfig.Setting{}},
	}
	for _, tt := range mcp {
		require.Equal(t, tt.want, eff.MCP(tt.server, tt.tool), tt.server+"/"+tt.tool)
	}
}

func TestEffectiveWithoutToolset(t *testing.T) {
	eff := toolconfig.NewEffective(nil)
	require.Equal(t, toolconfig.Setting{}, eff.BuiltIn("bash"))
	require.Empty(t, eff.EnabledBuiltIns())

	all := toolconfig.NewEffective([]wire.Tool{{Toolset: &wire.Toolset{DefaultConfig: wire.ToolDefaultConfig{Enabled: true, PermissionPolicy: wire.PermissionAlwaysAllow}}}})
	require.Equal(t, toolconfig.BuiltInNames(), all.EnabledBuiltIns())
}

func TestBuiltInNames(t *testing.T) {
	require.Equal(t, []string{"bash", "read", "write", "edit", "glob", "grep", "web_fetch", "web_search"}, toolconfig.BuiltInNames())
	require.True(t, toolconfig.IsBuiltIn("web_search"))
	require.False(t, toolconfig.IsBuiltIn("Bash"))
	names := toolconfig.BuiltInNames()
	names[0] = "changed"
	require.True(t, toolconfig.IsBuiltIn("bash"), "callers get a copy")
}

// sdkAgentParams exercises every tool shape the official Go SDK (v2.15.0) can send.
func sdkAgentParams() anthropic.BetaAgentNewParams {
	return anthropic.BetaAgentNewParams{
		Name:  "a",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
				DefaultConfig: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParams{
					PermissionPolicy: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParamsPermissionPolicyUnion{
						OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}}},
				Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{
					{OfBash: &anthropic.BetaManagedAgentsBashToolConfigParams{Enabled: param.NewOpt(false)}},
					{OfRead: &anthropic.BetaManagedAgentsReadToolConfigParams{
						Type: anthropic.BetaManagedAgentsReadToolConfigParamsTypeRead,
						PermissionPolicy: anthropic.BetaManagedAgentsReadToolConfigParamsPermissionPolicyUnion{
							OfAuto: &anthropic.BetaManagedAgentsAutoPolicyParam{}}}},
					{OfWebFetch: &anthropic.BetaManagedAgentsWebFetchToolConfigParams{
						BlockedDomains:   []string{"ads.example.com"},
						MaxContentTokens: param.NewOpt(int64(50000)),
						URLSources: anthropic.BetaManagedAgentsWebFetchURLSourcesParams{
							UserInput: anthropic.BetaManagedAgentsWebFetchURLSourceUserInputParamsUnion{
								OfBetaManagedAgentsWebFetchURLSourceShorthand: param.NewOpt(anthropic.BetaManagedAgentsWebFetchURLSourceShorthandNone)},
							ClientToolResults: anthropic.BetaManagedAgentsWebFetchURLSourceToolFilterParamsUnion{
								OfBetaManagedAgentsWebFetchURLSourceToolFilterUnion: &anthropic.BetaManagedAgentsWebFetchURLSourceToolFilterUnionParam{
									OfOnly: &anthropic.BetaManagedAgentsWebFetchURLSourceOnlyParam{
										Tools: []anthropic.BetaManagedAgentsWebFetchURLSourceToolReferenceParam{{Name: "get_weather"}}}}},
						}}},
					{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{
						AllowedDomains: []string{"docs.example.com/guides"},
						UserLocation: anthropic.BetaManagedAgentsUserLocationParam{
							Country: param.NewOpt("US"), Timezone: param.NewOpt("America/Los_Angeles")}}},
				}}},
			{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{
				MCPServerName: "gh",
				DefaultConfig: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParams{Enabled: param.NewOpt(false)},
				Configs: []anthropic.BetaManagedAgentsMCPToolConfigParams{{
					Name: "get_issue", Enabled: param.NewOpt(true),
					PermissionPolicy: anthropic.BetaManagedAgentsMCPToolConfigParamsPermissionPolicyUnion{
						OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{}}}}}},
			{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
				Name: "get_weather", Description: "Weather.",
				InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{
					Properties:  map[string]any{"city": map[string]any{"type": "string"}},
					Required:    []string{"city"},
					ExtraFields: map[string]any{"additionalProperties": false}}}},
		},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "gh", URL: "https://mcp.example.com/mcp"}},
	}
}

const sdkResolvedTools = `[
	{"type":"agent_toolset_20260401","default_config":{"enabled":true,"permission_policy":{"type":"always_ask"}},"configs":[
		{"name":"bash","type":"bash","enabled":false,"permission_policy":{"type":"always_ask"}},
		{"name":"read","type":"read","enabled":true,"permission_policy":{"type":"auto"}},
		{"name":"web_fetch","type":"web_fetch","enabled":true,"permission_policy":{"type":"always_ask"},
		 "blocked_domains":["ads.example.com"],"max_content_tokens":50000,
		 "url_sources":{"user_input":{"type":"none"},"client_tool_results":{"type":"only","tools":[{"type":"tool_reference","name":"get_weather"}]},"server_tool_results":null}},
		{"name":"web_search","type":"web_search","enabled":true,"permission_policy":{"type":"always_ask"},
		 "allowed_domains":["docs.example.com/guides"],
		 "user_location":{"type":"approximate","city":null,"region":null,"country":"US","timezone":"America/Los_Angeles"}}]},
	{"type":"mcp_toolset","mcp_server_name":"gh","default_config":{"enabled":false,"permission_policy":{"type":"always_ask"}},
	 "configs":[{"name":"get_issue","enabled":true,"permission_policy":{"type":"always_allow"}}]},
	{"type":"custom","name":"get_weather","description":"Weather.",
	 "input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}
]`

func TestSDKRequestParamsAreAccepted(t *testing.T) {
	body, err := json.Marshal(sdkAgentParams())
	require.NoError(t, err)
	var fields struct {
		Tools      json.RawMessage `json:"tools"`
		MCPServers json.RawMessage `json:"mcp_servers"`
	}
	require.NoError(t, json.Unmarshal(body, &fields))

	resolved, servers, err := toolconfig.ParseAndResolve(fields.Tools, fields.MCPServers)
	require.NoError(t, err, "SDK body: %s", body)
	got, err := json.Marshal(resolved)
	require.NoError(t, err)
	require.JSONEq(t, sdkResolvedTools, string(got))
	require.Equal(t, []wire.MCPServer{{Type: "url", Name: "gh", URL: "https://mcp.example.com/mcp"}}, servers)
}

func TestSDKDecodesResolvedTools(t *testing.T) {
	var union []anthropic.BetaManagedAgentsAgentToolUnion
	require.NoError(t, json.Unmarshal([]byte(sdkResolvedTools), &union))
	require.Len(t, union, 3)

	toolset, ok := union[0].AsAny().(anthropic.BetaManagedAgentsAgentToolset20260401)
	require.True(t, ok, "agent toolset variant")
	require.True(t, toolset.DefaultConfig.Enabled)
	require.Equal(t, "always_ask", toolset.DefaultConfig.PermissionPolicy.Type)
	require.Len(t, toolset.Configs, 4)

	bash, ok := toolset.Configs[0].AsAny().(anthropic.BetaManagedAgentsBashToolConfig)
	require.True(t, ok, "bash config variant")
	require.False(t, bash.Enabled)
	require.True(t, bash.JSON.Enabled.Valid(), "enabled is always echoed")

	fetch, ok := toolset.Configs[2].AsAny().(anthropic.BetaManagedAgentsWebFetchToolConfig)
	require.True(t, ok, "web_fetch config variant")
	require.Equal(t, []string{"ads.example.com"}, fetch.BlockedDomains)
	require.Equal(t, int64(50000), fetch.MaxContentTokens)
	require.Equal(t, "none", fetch.URLSources.UserInput.Type)
	require.Equal(t, "only", fetch.URLSources.ClientToolResults.Type)
	require.Equal(t, "get_weather", fetch.URLSources.ClientToolResults.Tools[0].Name)
	require.Equal(t, "null", fetch.URLSources.JSON.ServerToolResults.Raw(), "unset keys are echoed as null")

	search, ok := toolset.Configs[3].AsAny().(anthropic.BetaManagedAgentsWebSearchToolConfig)
	require.True(t, ok, "web_search config variant")
	require.Equal(t, "US", search.UserLocation.Country)
	require.Equal(t, "always_ask", search.PermissionPolicy.Type)

	mcp, ok := union[1].AsAny().(anthropic.BetaManagedAgentsMCPToolset)
	require.True(t, ok, "MCP toolset variant")
	require.Equal(t, "gh", mcp.MCPServerName)
	require.False(t, mcp.DefaultConfig.Enabled)
	require.Equal(t, "always_ask", mcp.DefaultConfig.PermissionPolicy.Type)
	require.Equal(t, "get_issue", mcp.Configs[0].Name)
	require.Equal(t, "always_allow", mcp.Configs[0].PermissionPolicy.Type)

	customTool, ok := union[2].AsAny().(anthropic.BetaManagedAgentsCustomTool)
	require.True(t, ok, "custom tool variant")
	require.Equal(t, "get_weather", customTool.Name)
	require.Equal(t, "Weather.", customTool.Description)
	require.Equal(t, []string{"city"}, customTool.InputSchema.Required)
	require.Contains(t, customTool.InputSchema.Properties, "city")
	require.Equal(t, "false", customTool.InputSchema.JSON.ExtraFields["additionalProperties"].Raw())
}

func TestSDKDecodesToolsetWithoutConfigs(t *testing.T) {
	resolved, _, err := toolconfig.ParseAndResolve(json.RawMessage(`[{"type":"agent_toolset_20260401"}]`), nil)
	require.NoError(t, err)
	b, err := json.Marshal(resolved)
	require.NoError(t, err)

	var union []anthropic.BetaManagedAgentsAgentToolUnion
	require.NoError(t, json.Unmarshal(b, &union))
	toolset := union[0].AsAgentToolset20260401()
	require.True(t, toolset.JSON.Configs.Valid(), "configs is [] rather than null or missing")
	require.Empty(t, toolset.Configs)
	require.Equal(t, "always_allow", toolset.DefaultConfig.PermissionPolicy.Type)
}
