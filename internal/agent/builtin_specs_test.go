package agent

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/tools"
	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"
	"github.com/managed-agents/managed-agents/internal/tools/web"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func TestEveryBuiltInHasASpec(t *testing.T) {
	t.Parallel()
	var names []string
	for name := range builtInSpecs {
		names = append(names, name)
	}
	require.ElementsMatch(t, toolconfig.BuiltInNames(), names)
}

// Every property of every schema says what it is for, and the schema is what the tools
// decode: an object of those properties and no others.
func TestBuiltInSchemasDescribeEveryProperty(t *testing.T) {
	t.Parallel()
	for name, spec := range builtInSpecs {
		var schema struct {
			Type                 string                    `json:"type"`
			Properties           map[string]map[string]any `json:"properties"`
			Required             []string                  `json:"required"`
			AdditionalProperties *bool                     `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(spec.schema, &schema), name)
		require.Equal(t, "object", schema.Type, name)
		require.NotNil(t, schema.AdditionalProperties, name)
		require.False(t, *schema.AdditionalProperties, "%s decodes its input strictly", name)
		require.NotEmpty(t, schema.Properties, name)
		for prop, def := range schema.Properties {
			desc, _ := def["description"].(string)
			require.GreaterOrEqual(t, len(desc), 20, "%s.%s needs a description", name, prop)
			require.NotEmpty(t, def["type"], "%s.%s needs a type", name, prop)
		}
		for _, r := range schema.Required {
			require.Contains(t, schema.Properties, r, "%s requires an undeclared %s", name, r)
		}
		require.GreaterOrEqual(t, len(spec.description), 200, "%s needs a real description", name)
	}
}

// Each description names the limits its tool enforces, with the numbers of the constants
// the code enforces, and says when to use the tool rather than bash.
func TestBuiltInDescriptionsNameTheirLimits(t *testing.T) {
	t.Parallel()
	results := "longer than 100,000 characters is cut"
	tests := map[string][]string{
		wire.ToolNameBash: {"2 minutes by default", "up to 10 minutes", "first 1 MiB of output", results, tools.SpillDir,
			"a `cd` carries over", "environment variables", "[exit code N]", "Prefer the dedicated tools", "restart: true"},
		wire.ToolNameRead: {"right-aligned in 6 columns, a tab", "view_range", "1-indexed and inclusive", results,
			"PNG, JPEG, GIF and WebP", "PDF", "content decides, not its name", "at most 3.75 MiB (5 MiB once base64-encoded)",
			"8000×8000 pixels", "PDFs at most 20 MiB and 100 pages", "at most 100 images", "2000×2000 pixels once there are more than 20", "Other binary files are refused", "Prefer read over cat"},
		wire.ToolNameWrite: {"overwrites without asking", "use edit", "read it", "parent directories are created"},
		wire.ToolNameEdit: {"match the file exactly", "exactly once", "replace_all", "Read the file first",
			"line-number prefix", "must not be empty", "file is unchanged"},
		wire.ToolNameGlob: {"doublestar", "`**`", "At most 1,000 paths", "60 seconds", ".git and .managed-agents are skipped",
			"sorted by path", "Prefer glob over find"},
		wire.ToolNameGrep: {"RE2", "`path:line:text`", "At most 1,000 matching lines", "cut at 500 characters",
			"at most 20,000 files", "larger than 2,047 KiB", "binary files", "60 seconds", "Prefer grep over grep"},
		wire.ToolNameWebFetch: {"at most 4,096 characters", "at most 5", "25,000 tokens", "10 MiB", "30 seconds",
			"allowed_domains", "not in the sandbox", "unsupported_content_type"},
		wire.ToolNameWebSearch: {"up to 10 results", "1,000 characters", "15 seconds", "allowed_domains", "web_fetch"},
	}
	for name, wants := range tests {
		for _, want := range wants {
			require.Contains(t, builtInSpecs[name].description, want, name)
		}
	}
	// The numbers above are the tools' constants as they are today: if one changes, the
	// description follows it and this table must be updated with it.
	require.Equal(t, 100_000, tools.MaxResultChars)
	require.Equal(t, 2*time.Minute, tools.DefaultBashTimeout)
	require.Equal(t, 10*time.Minute, tools.MaxBashTimeout)
	require.Equal(t, 1<<20, tools.BashMaxOutput)
	require.Equal(t, 1000, tools.GlobMaxResults)
	require.Equal(t, 1000, tools.GrepMaxMatches)
	require.Equal(t, 20_000, tools.GrepMaxFiles)
	require.Equal(t, 2047<<10, tools.GrepMaxFileSize)
	require.Equal(t, 500, tools.GrepMaxLineChars)
	require.Equal(t, time.Minute, tools.ListTimeout)
	require.Equal(t, 8000, tools.MaxImageSide)
	require.Equal(t, 100, tools.MaxPDFPages)
}

// The web tools run in tools/web, which agent may not import: the defaults their
// descriptions state are held to that package's constants here.
func TestWebToolDefaultsMatchTheWebPackage(t *testing.T) {
	t.Parallel()
	require.Equal(t, web.DefaultFetchTimeout, webFetchTimeout)
	require.Equal(t, web.DefaultMaxBodyBytes, webFetchMaxBodyBytes)
	require.Equal(t, web.DefaultMaxRedirects, webFetchMaxRedirects)
	require.Equal(t, web.DefaultMaxContentTokens, webFetchMaxContentTokens)
	require.Equal(t, web.DefaultSearchTimeout, webSearchTimeout)
	require.Equal(t, web.DefaultMaxResults, webSearchMaxResults)
	// maxURLLen and maxQueryChars are unexported there; their refusals name them.
	long := `{"url":"https://example.com/` + repeat("a", webFetchMaxURLChars) + `"}`
	res := web.NewFetcher(web.FetchConfig{}).Fetch(t.Context(), json.RawMessage(long), web.Options{})
	require.True(t, res.IsError)
	require.Contains(t, res.Text(), "at most "+strconv.Itoa(webFetchMaxURLChars)+" are fetched")
	query := `{"query":"` + repeat("q", webSearchMaxQueryChars+1) + `"}`
	sres := web.NewSearcher(nil, web.SearchConfig{}).Search(t.Context(), json.RawMessage(query), web.Options{})
	require.True(t, sres.IsError)
	require.Contains(t, sres.Text(), "at most "+strconv.Itoa(webSearchMaxQueryChars)+" are searched")
}

func repeat(s string, n int) string {
	out := make([]byte, 0, n*len(s))
	for range n {
		out = append(out, s...)
	}
	return string(out)
}

// Schemas and descriptions are built once and are the same bytes in every request (prompt
// caching).
func TestBuiltInSpecsAreStable(t *testing.T) {
	t.Parallel()
	resolved, _, err := toolconfig.ParseAndResolve(json.RawMessage(`[{"type":"agent_toolset_20260401"}]`), nil)
	require.NoError(t, err)
	ts1, ts2 := newToolset(resolved, nil), newToolset(resolved, nil)
	require.Len(t, ts1.offered, len(allBuiltIns))
	require.Equal(t, ts1.offered, ts2.offered)
	i := slices.IndexFunc(ts1.offered, func(tool model.Tool) bool { return tool.Name == wire.ToolNameRead })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, builtInSpecs[wire.ToolNameRead].description, ts1.offered[i].Description)
	require.JSONEq(t, string(builtInSpecs[wire.ToolNameRead].schema), string(ts1.offered[i].InputSchema))
	require.NotContains(t, string(builtInSpecs[wire.ToolNameBash].schema), `\u0026`, "no HTML escaping")
}

func TestLimitFormatting(t *testing.T) {
	t.Parallel()
	require.Equal(t, "999", thousands(999))
	require.Equal(t, "1,000", thousands(1000))
	require.Equal(t, "100,000", thousands(100_000))
	require.Equal(t, "-1,234,567", thousands(-1234567))
	require.Equal(t, "1 MiB", size(1<<20))
	require.Equal(t, "3.75 MiB", size(5<<20/4*3))
	require.Equal(t, "2,047 KiB", size(2047<<10))
	require.Equal(t, "1,000 bytes", size(1000))
	require.Equal(t, "2 minutes", duration(2*time.Minute))
	require.Equal(t, "60 seconds", duration(time.Minute))
	require.Equal(t, "15 seconds", duration(15*time.Second))
	require.Equal(t, "1.5s", duration(1500*time.Millisecond))
}

// The web tools' descriptions add what the agent's configs[] entry sets; without settings, and
// for the sandbox tools, the description is the spec's.
func TestWebToolDescriptionsStateTheAgentsSettings(t *testing.T) {
	t.Parallel()
	resolved, _, err := toolconfig.ParseAndResolve(json.RawMessage(`[{"type":"agent_toolset_20260401","configs":[
		{"name":"web_fetch","allowed_domains":["go.dev","pkg.go.dev"],"max_content_tokens":5000},
		{"name":"web_search","blocked_domains":["spam.example"]}]}]`), nil)
	require.NoError(t, err)
	described := map[string]string{}
	for _, tool := range newToolset(resolved, nil).offered {
		described[tool.Name] = tool.Description
	}
	fetch := described[wire.ToolNameWebFetch]
	require.True(t, strings.HasPrefix(fetch, builtInSpecs[wire.ToolNameWebFetch].description))
	require.Contains(t, fetch, "This agent's settings: only these domains (and their subdomains) are allowed: go.dev, pkg.go.dev; max_content_tokens is 5,000.")
	require.Equal(t, builtInSpecs[wire.ToolNameWebSearch].description+"\n- This agent's settings: these domains are blocked: spam.example.", described[wire.ToolNameWebSearch])
	require.Equal(t, builtInSpecs[wire.ToolNameBash].description, described[wire.ToolNameBash])

	none, _, err := toolconfig.ParseAndResolve(json.RawMessage(`[{"type":"agent_toolset_20260401"}]`), nil)
	require.NoError(t, err)
	for _, tool := range newToolset(none, nil).offered {
		require.Equal(t, builtInSpecs[tool.Name].description, tool.Description, tool.Name)
	}
	require.Contains(t, describeBuiltIn(wire.ToolNameWebFetch, wire.ToolConfig{AllowedDomains: []string{}}), "allowed_domains is empty, so every URL is refused")
	many := make([]string, maxDescribedDomains+2)
	for i := range many {
		many[i] = strconv.Itoa(i) + ".example"
	}
	require.Contains(t, describeBuiltIn(wire.ToolNameWebSearch, wire.ToolConfig{AllowedDomains: many}), "49.example and 2 more.")
}
