package agent

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/tools"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// HarnessInfo is what the caller of a model step knows about where the agent runs, for the
// harness preamble (preamble.md.tmpl) that opens every model request's system prompt. Every
// field must keep its value for the whole session (Date changes once a day at most), so the
// system prompt's bytes stay the same and prompt caching keeps working. The zero value is a
// preamble without these facts.
type HarnessInfo struct {
	// Date is the day of the request; only the date is shown, in UTC.
	Date time.Time
	// Sandbox is the provider the session's sandbox is made by ("local", "docker", ...); ""
	// leaves the sandbox and network out of the preamble. It is shown only when the agent has
	// a built-in tool that runs in the sandbox.
	Sandbox string
	// OS is the sandbox's operating system as the model should know it ("Linux").
	OS string
	// Network is the environment's networking and what the sandbox gets of it.
	Network NetworkInfo
	// OutputsDir is the absolute directory whose files become the session's outputs
	// (/mnt/session/outputs), when the session has one.
	OutputsDir string
}

// NetworkInfo is a sandbox's network: the environment's policy and what the deployment's
// ceiling made of it.
type NetworkInfo struct {
	// Mode is the environment's networking, sandbox.NetworkUnrestricted or
	// sandbox.NetworkLimited; AllowedHosts, PackageManagers and MCPServers are what a limited
	// one asks for.
	Mode            string
	AllowedHosts    []string
	PackageManagers bool
	MCPServers      bool
	// Egress is what the sandbox gets (sandbox.Ceiling.Resolve of the environment's
	// networking): none, the listed hosts, or full.
	Egress sandbox.Egress
}

//go:embed preamble.md.tmpl
var preambleTemplate string

var preamble = template.Must(template.New("preamble").Option("missingkey=error").Parse(preambleTemplate))

// preambleData is the template's data: the facts of HarnessInfo and the tools' limits,
// already written as text.
type preambleData struct {
	Date       string
	Sandbox    *sandboxFacts
	OutputsDir string
	Limits     *limitFacts
}

type sandboxFacts struct {
	Kind, OS string
	// Egress is sandbox.EgressFull, EgressHosts or EgressNone; Hosts lists the hosts.
	Egress, Hosts string
	// Mode is the environment's networking; Narrowed says the sandbox gets less of it.
	Mode                                  string
	Narrowed, PackageManagers, MCPServers bool
}

type limitFacts struct {
	Bash, Read, Search bool

	BashTimeout, BashMaxTimeout, BashOutput string
	ResultChars, SpillDir                   string
	ImageBytes, PDFBytes                    string
	ImageSide, PDFPages                     int
	SearchResults, GrepFileSize             string
}

// maxListedHosts bounds the hosts the preamble names; the rest are counted.
const maxListedHosts = 20

// systemPrompt is the system prompt of a model request: the harness preamble, then the
// agent's own system prompt.
func systemPrompt(in Input) string {
	text := renderPreamble(in.Harness, toolconfig.NewEffective(in.Agent.Tools).EnabledBuiltIns())
	if s := deref(in.Agent.System); s != "" {
		text += "\n\n" + s
	}
	return text
}

// renderPreamble renders the preamble for the enabled built-ins.
func renderPreamble(h HarnessInfo, enabled []string) string {
	data := preambleData{}
	if !h.Date.IsZero() {
		data.Date = h.Date.UTC().Format(time.DateOnly)
	}
	usesSandbox := slices.ContainsFunc(enabled, tools.NeedsSandbox)
	if usesSandbox && h.Sandbox != "" {
		data.Sandbox = sandboxFactsOf(h)
		data.OutputsDir = h.OutputsDir
	}
	if usesSandbox {
		data.Limits = &limitFacts{
			Bash:           slices.Contains(enabled, wire.ToolNameBash),
			Read:           slices.Contains(enabled, wire.ToolNameRead),
			Search:         slices.Contains(enabled, wire.ToolNameGlob) || slices.Contains(enabled, wire.ToolNameGrep),
			BashTimeout:    duration(tools.DefaultBashTimeout),
			BashMaxTimeout: duration(tools.MaxBashTimeout),
			BashOutput:     size(tools.BashMaxOutput),
			ResultChars:    thousands(tools.MaxResultChars),
			SpillDir:       tools.SpillDir,
			ImageBytes:     size(tools.MaxImageBytes),
			ImageSide:      tools.MaxImageSide,
			PDFBytes:       size(tools.MaxPDFBytes),
			PDFPages:       tools.MaxPDFPages,
			SearchResults:  thousands(max(tools.GlobMaxResults, tools.GrepMaxMatches)),
			GrepFileSize:   size(tools.GrepMaxFileSize),
		}
	}
	var b strings.Builder
	if err := preamble.Execute(&b, data); err != nil {
		// The template and its data are both ours: a failure is a programming error that the
		// tests catch, never a request's fault.
		panic(fmt.Sprintf("render the harness preamble: %v", err))
	}
	return strings.TrimSpace(b.String())
}

func sandboxFactsOf(h HarnessInfo) *sandboxFacts {
	n := h.Network
	f := &sandboxFacts{Kind: h.Sandbox, OS: h.OS, Mode: n.Mode, Egress: n.Egress.Mode}
	if f.Egress == "" {
		f.Egress = sandbox.EgressNone // what the sandbox package means by it
	}
	limited := n.Mode == sandbox.NetworkLimited
	f.PackageManagers, f.MCPServers = limited && n.PackageManagers, limited && n.MCPServers
	f.Hosts = listHosts(n.Egress.Hosts)
	// Narrowed: the deployment's ceiling gives less than the environment asks for. Under
	// limited, only the lack of any network is told; a list cut by the ceiling shows itself.
	switch f.Egress {
	case sandbox.EgressFull:
	case sandbox.EgressHosts:
		f.Narrowed = n.Mode == sandbox.NetworkUnrestricted
	default:
		asked := len(n.AllowedHosts) > 0 || f.PackageManagers || f.MCPServers
		f.Narrowed = n.Mode == sandbox.NetworkUnrestricted || (limited && asked)
	}
	return f
}

// listHosts names up to maxListedHosts hosts and counts the rest.
func listHosts(hosts []string) string {
	if len(hosts) <= maxListedHosts {
		return strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(hosts[:maxListedHosts], ", "), len(hosts)-maxListedHosts)
}
