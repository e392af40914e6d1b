package agent

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// allBuiltIns are the eight built-ins, all enabled.
var allBuiltIns = []string{
	wire.ToolNameBash, wire.ToolNameRead, wire.ToolNameWrite, wire.ToolNameEdit,
	wire.ToolNameGlob, wire.ToolNameGrep, wire.ToolNameWebFetch, wire.ToolNameWebSearch,
}

// limitedHarness is a docker sandbox of a limited environment on a given day.
func limitedHarness(at time.Time) HarnessInfo {
	return HarnessInfo{
		Date: at, Sandbox: "docker", OS: "Linux", OutputsDir: "/mnt/session/outputs",
		Network: NetworkInfo{
			Mode: sandbox.NetworkLimited, PackageManagers: true,
			Egress: sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"*.pypi.org", "api.example.com"}},
		},
	}
}

func TestPreambleStatesTheFacts(t *testing.T) {
	t.Parallel()
	text := renderPreamble(limitedHarness(time.Date(2026, 12, 7, 15, 4, 5, 0, time.UTC)), allBuiltIns)
	for _, want := range []string{
		"Today's date is 2026-12-07 (UTC).",
		"a docker sandbox (Linux)",
		"Working directory: the workspace root",
		"Network: limited",
		"only these hosts: *.pypi.org, api.example.com",
		"allows package managers",
		"Outputs: save the files meant for the user",
		"/mnt/session/outputs",
		// The limits, as the tools enforce them (package tools).
		"killed after 2 minutes", "at most 10 minutes", "first 1 MiB of its output",
		"longer than 100,000 characters", ".managed-agents/outputs",
		"images of at most 3.75 MiB and 8000×8000 pixels", "PDFs of at most 20 MiB and 100 pages",
		"at most 1,000 results", "files over 2,047 KiB",
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "15:04", "no time of day: it would change every request")
	require.NotContains(t, text, "<no value>")
	require.NotContains(t, text, "{{")
	require.NotContains(t, text, "MCP servers", "the environment does not allow them")
}

func TestPreambleIsStableWithinADay(t *testing.T) {
	t.Parallel()
	morning := renderPreamble(limitedHarness(time.Date(2026, 12, 7, 0, 0, 1, 0, time.UTC)), allBuiltIns)
	night := renderPreamble(limitedHarness(time.Date(2026, 12, 7, 23, 59, 59, 0, time.UTC)), allBuiltIns)
	require.Equal(t, morning, night, "the same facts give the same bytes, whatever the time of day")
	// A clock in another zone shows the same UTC day.
	berlin := time.FixedZone("CET", 3600)
	require.Equal(t, morning, renderPreamble(limitedHarness(time.Date(2026, 12, 8, 0, 30, 0, 0, berlin)), allBuiltIns))
	next := renderPreamble(limitedHarness(time.Date(2026, 12, 8, 0, 0, 1, 0, time.UTC)), allBuiltIns)
	require.NotEqual(t, morning, next)
	require.Contains(t, next, "2026-12-08")
}

func TestPreambleFollowsTheNetworkPolicy(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	with := func(n NetworkInfo) string {
		h := limitedHarness(day)
		h.Network = n
		return renderPreamble(h, allBuiltIns)
	}
	unrestricted := with(NetworkInfo{Mode: sandbox.NetworkUnrestricted, Egress: sandbox.Egress{Mode: sandbox.EgressFull}})
	limited := renderPreamble(limitedHarness(day), allBuiltIns)
	mcp := with(NetworkInfo{Mode: sandbox.NetworkLimited, MCPServers: true, Egress: sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"mcp.example.com"}}})
	none := with(NetworkInfo{Mode: sandbox.NetworkLimited, Egress: sandbox.Egress{Mode: sandbox.EgressNone}})
	narrowed := with(NetworkInfo{Mode: sandbox.NetworkUnrestricted, Egress: sandbox.Egress{Mode: sandbox.EgressNone}})
	allowlisted := with(NetworkInfo{Mode: sandbox.NetworkUnrestricted, Egress: sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"github.com"}}})

	require.Contains(t, unrestricted, "Network: unrestricted. Commands in the sandbox can reach the internet.")
	require.NotContains(t, unrestricted, "asks for")
	require.Contains(t, mcp, "only these hosts: mcp.example.com")
	require.Contains(t, mcp, "allows the agent's MCP servers")
	require.Contains(t, none, "Network: none.")
	require.NotContains(t, none, "asks for", "a limited environment whose list came out empty is not narrowed by the deployment")
	require.Contains(t, narrowed, "Network: none.")
	require.Contains(t, narrowed, "(The environment asks for unrestricted networking; this deployment allows the sandbox less.)")
	cut := with(NetworkInfo{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"example.com"}, Egress: sandbox.Egress{Mode: sandbox.EgressNone}})
	require.Contains(t, cut, "Network: none.")
	require.Contains(t, cut, "(The environment asks for limited networking; this deployment allows the sandbox less.)")
	require.Contains(t, allowlisted, "only these hosts: github.com")
	require.Contains(t, allowlisted, "asks for unrestricted networking")

	texts := []string{unrestricted, limited, mcp, none, narrowed, allowlisted, cut}
	for i := range texts {
		for j := i + 1; j < len(texts); j++ {
			require.NotEqual(t, texts[i], texts[j], "policies %d and %d read alike", i, j)
		}
	}
}

func TestPreambleSummarisesLongHostLists(t *testing.T) {
	t.Parallel()
	hosts := make([]string, maxListedHosts+5)
	for i := range hosts {
		hosts[i] = string(rune('a'+i)) + ".example.com"
	}
	h := limitedHarness(time.Time{})
	h.Network.Egress.Hosts = hosts
	text := renderPreamble(h, allBuiltIns)
	require.Contains(t, text, "t.example.com and 5 more.")
	require.NotContains(t, text, "u.example.com")
	require.NotContains(t, text, "Today's date", "no date given, none shown")
}

func TestPreambleShowsOnlyWhatTheAgentUses(t *testing.T) {
	t.Parallel()
	h := limitedHarness(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))

	webOnly := renderPreamble(h, []string{wire.ToolNameWebFetch, wire.ToolNameWebSearch})
	require.Contains(t, webOnly, "2026-12-07")
	require.NotContains(t, webOnly, "# Where you run", "no tool runs in the sandbox")
	require.NotContains(t, webOnly, "# Limits")

	readOnly := renderPreamble(h, []string{wire.ToolNameRead})
	require.Contains(t, readOnly, "# Where you run")
	require.Contains(t, readOnly, "read: text files come back with line numbers")
	require.NotContains(t, readOnly, "bash: a command is killed")
	require.NotContains(t, readOnly, "glob and grep")

	noOutputs := h
	noOutputs.OutputsDir = ""
	require.NotContains(t, renderPreamble(noOutputs, allBuiltIns), "Outputs:")

	unknownSandbox := h
	unknownSandbox.Sandbox = ""
	text := renderPreamble(unknownSandbox, allBuiltIns)
	require.NotContains(t, text, "# Where you run", "nothing is said of a sandbox the caller did not describe")
	require.Contains(t, text, "# Limits the tools enforce")

	require.Equal(t, "You are an autonomous agent running in a session of a Claude Managed Agents server: you work on the user's tasks with the tools offered to you until each is done. The facts below hold for the whole session; your own instructions, if you have any, follow them.",
		renderPreamble(HarnessInfo{}, nil), "the zero value is the opening alone")
}

func TestSystemPromptIsThePreambleThenTheAgents(t *testing.T) {
	t.Parallel()
	own := "Answer like a pirate."
	in := Input{Agent: wire.SessionAgent{System: &own}, Harness: limitedHarness(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))}
	got := systemPrompt(in)
	preamble := renderPreamble(in.Harness, nil)
	require.Equal(t, preamble+"\n\n"+own, got)
	in.Agent.System = nil
	require.Equal(t, preamble, systemPrompt(in))
	empty := ""
	in.Agent.System = &empty
	require.Equal(t, preamble, systemPrompt(in))
}

// The documentation shows the template verbatim: the two cannot drift apart.
func TestDocsShowThePreambleTemplate(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/harness-prompt.md")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(doc), preambleTemplate),
		"docs/harness-prompt.md must contain internal/agent/preamble.md.tmpl byte for byte; copy the template into its code block")
	// And its example is what the template renders.
	h := limitedHarness(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	h.OutputsDir = ""
	example := "```text\n" + renderPreamble(h, allBuiltIns) + "\n```"
	require.True(t, strings.Contains(string(doc), example), "docs/harness-prompt.md's example must be:\n%s", example)
}
