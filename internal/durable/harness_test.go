package durable

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/sandboxtest"
	toolconfig "github.com/managed-agents/managed-agents/internal/tools/config"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// limitedSpecs is a limited environment's spec, counting how often it is read.
type limitedSpecs struct{ reads atomic.Int32 }

func (s *limitedSpecs) SandboxSpec(_ context.Context, sessionID string) (sandbox.Spec, error) {
	s.reads.Add(1)
	return sandbox.Spec{Name: sandbox.NameFor(sessionID), SessionID: sessionID, Network: sandbox.Network{
		Mode: sandbox.NetworkLimited, AllowedHosts: []string{"api.example.com"}, AllowPackageManagers: true,
	}}, nil
}

func turnWithTools(t *testing.T, toolsJSON string) turns.Turn {
	t.Helper()
	resolved, _, err := toolconfig.ParseAndResolve(json.RawMessage(toolsJSON), nil)
	require.NoError(t, err)
	return turns.Turn{Agent: wire.SessionAgent{Tools: resolved}}
}

func TestHarnessFactsComeFromTheSandboxSpec(t *testing.T) {
	t.Parallel()
	specs := &limitedSpecs{}
	ceiling := sandbox.Ceiling{Mode: sandbox.CeilingFull}
	acts := &Activities{Sandboxes: sandbox.NewManager(mustRegistry(t), sandboxtest.NewBindings(), specs, sandbox.WithCeiling(ceiling)),
		Logger: slog.New(slog.DiscardHandler)}
	turn := turnWithTools(t, `[{"type":"agent_toolset_20260401"}]`)

	before := time.Now().UTC()
	h, err := acts.harness(t.Context(), testSession, turn)
	require.NoError(t, err)
	require.False(t, h.Date.Before(before.Add(-time.Second)))
	require.Equal(t, "local", h.Sandbox)
	require.Equal(t, osName(runtime.GOOS), h.OS, "the local provider runs on this host")
	require.Equal(t, sandbox.NetworkLimited, h.Network.Mode)
	require.Equal(t, []string{"api.example.com"}, h.Network.AllowedHosts)
	require.True(t, h.Network.PackageManagers)
	require.False(t, h.Network.MCPServers)
	// The egress the manager resolves against the deployment's ceiling.
	want := ceiling.Resolve(sandbox.Network{Mode: sandbox.NetworkLimited, AllowedHosts: []string{"api.example.com"}, AllowPackageManagers: true})
	require.Equal(t, want, h.Network.Egress)
	require.Contains(t, h.Network.Egress.Hosts, "api.example.com")

	again, err := acts.harness(t.Context(), testSession, turn)
	require.NoError(t, err)
	again.Date = h.Date
	require.Equal(t, h, again)
	require.Equal(t, int32(1), specs.reads.Load(), "a session's facts are read once per worker")
}

func TestHarnessOfAnAgentWithoutSandboxToolsIsTheDate(t *testing.T) {
	t.Parallel()
	specs := &limitedSpecs{}
	acts := &Activities{Sandboxes: sandbox.NewManager(mustRegistry(t), sandboxtest.NewBindings(), specs), Logger: slog.New(slog.DiscardHandler)}
	h, err := acts.harness(t.Context(), testSession, turnWithTools(t,
		`[{"type":"agent_toolset_20260401","default_config":{"enabled":false},"configs":[{"name":"web_fetch","enabled":true}]}]`))
	require.NoError(t, err)
	require.False(t, h.Date.IsZero())
	require.Empty(t, h.Sandbox)
	require.Zero(t, specs.reads.Load(), "nothing is read for an agent that runs nothing in a sandbox")
}

func TestOSName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Linux", osName("linux"))
	require.Equal(t, "macOS", osName("darwin"))
	require.Equal(t, "Freebsd", osName("freebsd"))
}
