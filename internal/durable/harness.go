package durable

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
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
// for prompt caching. The facts come from the session's environment as the first model
// request on this worker finds it, like a sandbox made then.
func (a *Activities) harness(ctx context.Context, sessionID string, turn turns.Turn) (agent.HarnessInfo, error) {
	h := agent.HarnessInfo{Date: time.Now().UTC()}
	if a.Sandboxes == nil || !agent.NeedsSandbox(turn.Agent.Tools) {
		return h, nil
	}
	if facts, ok := a.facts.get(sessionID); ok {
		facts.Date = h.Date
		return facts, nil
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
	a.facts.put(sessionID, h)
	return h, nil
}

// maxCachedFacts bounds the sessions whose sandbox facts a worker keeps; past it the cache
// starts over.
const maxCachedFacts = 4096

// factsCache keeps each session's sandbox facts for the preamble, read once per session and
// worker: it saves the two reads of the spec (session and environment) on every model
// request, and keeps a session's preamble as it was even if its environment is edited, as the
// session's sandbox keeps the network it was made with.
type factsCache struct {
	mu        sync.Mutex
	bySession map[string]agent.HarnessInfo
}

func (c *factsCache) get(sessionID string) (agent.HarnessInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.bySession[sessionID]
	return h, ok
}

func (c *factsCache) put(sessionID string, h agent.HarnessInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bySession == nil || len(c.bySession) >= maxCachedFacts {
		c.bySession = map[string]agent.HarnessInfo{}
	}
	c.bySession[sessionID] = h
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
