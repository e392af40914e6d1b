package durable

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/turns"
)

// localProvider is the registry name of the sandbox provider that runs commands on the
// worker's own host (internal/sandbox/local, which durable does not import).
const localProvider = "local"

// harness gathers what the model is told about where it runs (agent.HarnessInfo): the day,
// and, for an agent with a built-in that runs in the sandbox, the sandbox's provider, its
// operating system and its network as the sandbox manager resolves it. Every value stays the
// same for the whole session (the day aside), which keeps the system prompt's bytes stable
// for prompt caching. The facts come from the session's environment as it is now, like a
// sandbox made now.
func (a *Activities) harness(ctx context.Context, sessionID string, turn turns.Turn) (agent.HarnessInfo, error) {
	h := agent.HarnessInfo{Date: time.Now().UTC()}
	if a.Sandboxes == nil || !agent.NeedsSandbox(turn.Agent.Tools) {
		return h, nil
	}
	spec, err := a.Sandboxes.Spec(ctx, sessionID)
	if err != nil {
		return agent.HarnessInfo{}, fmt.Errorf("the sandbox facts of the preamble: %w", err)
	}
	h.Sandbox = a.Sandboxes.DefaultProvider()
	// Every remote provider runs a Linux image; the local one runs on this host.
	h.OS = "Linux"
	if h.Sandbox == localProvider {
		h.OS = osName(runtime.GOOS)
	}
	n := spec.Network
	h.Network = agent.NetworkInfo{Mode: n.Mode, AllowedHosts: n.AllowedHosts, PackageManagers: n.AllowPackageManagers, MCPServers: n.AllowMCPServers, Egress: spec.Egress}
	return h, nil
}

// osName is how the model should read GOOS: "Linux", "macOS".
func osName(goos string) string {
	switch goos {
	case "darwin":
		return "macOS"
	case "":
		return ""
	}
	return strings.ToUpper(goos[:1]) + goos[1:]
}
