//go:build integration

package turns_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/pgtest"
	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/turns"
)

const limitedEnv = `{"type":"cloud","networking":{"type":"limited","allowed_hosts":["b.example","a.example"],"allow_mcp_servers":false,"allow_package_managers":true},
	"packages":{"type":"packages","apt":[],"cargo":[],"gem":[],"go":[],"npm":[],"pip":["requests"]}}`

// plainEnv is an environment without packages: the docker tests' sandboxes must start
// without an installer (the sandbox image has no pip).
const plainEnv = `{"type":"cloud","networking":{"type":"unrestricted"},
	"packages":{"type":"packages","apt":[],"cargo":[],"gem":[],"go":[],"npm":[],"pip":[]}}`

type sandboxFixture struct {
	st      *store.Store
	engine  *turns.Service
	root    string
	manager *sandbox.Manager
	newSess func(t *testing.T) string
	ws      string
	agentID string
}

func newSandboxFixture(t *testing.T) sandboxFixture {
	t.Helper()
	return newSandboxFixtureWith(t, limitedEnv)
}

// newSandboxFixtureWith is newSandboxFixture with the environment config envConfig.
func newSandboxFixtureWith(t *testing.T, envConfig string) sandboxFixture {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx, logger))
	ws, err := st.CreateWorkspace(ctx, "test")
	require.NoError(t, err)
	agentID, envID := ids.New(ids.Agent), ids.New(ids.Environment)
	now := time.Now()
	require.NoError(t, st.InsertAgent(ctx, agentID, ws, json.RawMessage(`{"name":"a","model":"m"}`), now))
	require.NoError(t, st.InsertEnvironment(ctx, store.EnvironmentRecord{
		ID: envID, WorkspaceID: ws, Name: "env", Config: json.RawMessage(envConfig), Scope: "workspace", CreatedAt: now,
	}))
	engine := turns.New(st, logger)
	root := t.TempDir()
	reg, err := sandbox.NewRegistry(local.New(root))
	require.NoError(t, err)
	return sandboxFixture{
		st: st, engine: engine, root: root, ws: ws, agentID: agentID,
		manager: sandbox.NewManager(reg, engine.Sandboxes(), engine.Sandboxes(), sandbox.WithLogger(logger)),
		newSess: func(t *testing.T) string {
			id := ids.New(ids.Session)
			require.NoError(t, st.InsertSession(ctx, store.SessionRecord{
				ID: id, WorkspaceID: ws, AgentID: agentID, AgentVersion: 1, EnvironmentID: envID,
				Agent: json.RawMessage(`{}`), Status: "idle", Usage: json.RawMessage(`{}`), CreatedAt: now,
			}))
			return id
		},
	}
}

func (f sandboxFixture) sandboxDirs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir(f.root)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "sess-") {
			n++
		}
	}
	return n
}

func TestManagerOverPostgreSQL(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	ctx := t.Context()
	id := f.newSess(t)

	env, err := f.engine.Sandboxes().Environment(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "limited", env.Networking.Type)
	spec, err := f.engine.Sandboxes().SandboxSpec(ctx, id)
	require.NoError(t, err)
	require.Equal(t, sandbox.SpecFor(id, env), spec)
	require.Equal(t, []string{"a.example", "b.example"}, spec.Network.AllowedHosts)
	require.Equal(t, map[string][]string{"pip": {"requests"}}, spec.Packages)

	_, err = f.engine.SandboxRef(ctx, id)
	require.ErrorIs(t, err, turns.ErrNoBinding)
	sb, err := f.manager.Acquire(ctx, id)
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(ctx, "kept.txt", []byte("kept")))

	row, err := f.st.GetBinding(ctx, id)
	require.NoError(t, err)
	require.Equal(t, store.Binding{SessionID: id, Provider: "local", Name: sandbox.NameFor(id),
		ExternalID: row.ExternalID, SpecHash: spec.Hash(), State: store.BindingReady}, row)
	require.NotEmpty(t, row.ExternalID)
	ref, err := f.engine.SandboxRef(ctx, id)
	require.NoError(t, err)
	require.Equal(t, sandbox.Ref{Provider: "local", ExternalID: row.ExternalID}, ref)

	require.NoError(t, f.manager.Teardown(ctx, id))
	_, err = f.st.GetBinding(ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Zero(t, f.sandboxDirs(t))
	require.NoError(t, f.st.DeleteSession(ctx, id), "no binding holds the session row any more")
}

func TestSandboxSpecAddsTheMCPServerHosts(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	ctx := t.Context()
	envID, id := ids.New(ids.Environment), ids.New(ids.Session)
	now := time.Now()
	require.NoError(t, f.st.InsertEnvironment(ctx, store.EnvironmentRecord{
		ID: envID, WorkspaceID: f.ws, Name: "mcp", Scope: "workspace", CreatedAt: now,
		Config: json.RawMessage(`{"type":"cloud","networking":{"type":"limited","allowed_hosts":["a.example"],"allow_mcp_servers":true,"allow_package_managers":false}}`),
	}))
	require.NoError(t, f.st.InsertSession(ctx, store.SessionRecord{
		ID: id, WorkspaceID: f.ws, AgentID: f.agentID, AgentVersion: 1, EnvironmentID: envID, Status: "idle",
		Agent:     json.RawMessage(`{"mcp_servers":[{"type":"url","name":"gh","url":"https://MCP.GitHub.example:8443/sse"}]}`),
		Usage:     json.RawMessage(`{}`),
		CreatedAt: now,
	}))
	spec, err := f.engine.Sandboxes().SandboxSpec(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []string{"mcp.github.example"}, spec.Network.MCPHosts)
	require.Equal(t, sandbox.Egress{Mode: sandbox.EgressHosts, Hosts: []string{"a.example", "mcp.github.example"}},
		sandbox.Ceiling{Mode: sandbox.CeilingFull}.Resolve(spec.Network))
}

func TestAPendingBindingIsAdoptedOverPostgreSQL(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	ctx := t.Context()
	id := f.newSess(t)
	spec, err := f.engine.Sandboxes().SandboxSpec(ctx, id)
	require.NoError(t, err)

	// A lost attempt: the pending binding was written and the sandbox made, then the worker died.
	_, err = f.engine.Sandboxes().InsertBinding(ctx, sandbox.Binding{SessionID: id, Ref: sandbox.Ref{Provider: "local"},
		Name: spec.Name, SpecHash: spec.Hash(), State: sandbox.BindingPending})
	require.NoError(t, err)
	made, err := local.New(f.root).Create(ctx, spec)
	require.NoError(t, err)
	_, err = f.engine.SandboxRef(ctx, id)
	require.ErrorIs(t, err, turns.ErrNoBinding, "a pending binding is not a sandbox yet")
	bound, err := f.manager.Bound(ctx, id)
	require.NoError(t, err)
	require.False(t, bound)

	_, err = f.manager.Acquire(ctx, id)
	require.NoError(t, err)
	ref, err := f.engine.SandboxRef(ctx, id)
	require.NoError(t, err)
	require.Equal(t, made, ref, "the retry adopted the sandbox the lost attempt made")
	require.Equal(t, 1, f.sandboxDirs(t))

	// A second insert returns what is stored.
	got, err := f.engine.Sandboxes().InsertBinding(ctx, sandbox.Binding{SessionID: id, Ref: sandbox.Ref{Provider: "local"},
		Name: "other", SpecHash: "x", State: sandbox.BindingPending})
	require.NoError(t, err)
	require.Equal(t, sandbox.BindingReady, got.State)
	require.Equal(t, made, got.Ref)
	require.NoError(t, f.manager.Teardown(ctx, id))
}

func TestBindingsOfMissingSessions(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	ctx := t.Context()
	_, err := f.engine.Sandboxes().InsertBinding(ctx, sandbox.Binding{SessionID: "sesn_missing", Ref: sandbox.Ref{Provider: "local"},
		Name: "n", State: sandbox.BindingPending})
	require.ErrorIs(t, err, turns.ErrSessionGone)
	require.ErrorIs(t, f.engine.Sandboxes().MarkReady(ctx, "sesn_missing", sandbox.Ref{Provider: "local", ExternalID: "x"}), turns.ErrSessionGone)
	_, err = f.engine.Sandboxes().SandboxSpec(ctx, "sesn_missing")
	require.ErrorIs(t, err, turns.ErrSessionGone)
	_, err = f.manager.Acquire(ctx, "sesn_missing")
	require.ErrorIs(t, err, turns.ErrSessionGone)
}

func TestAReadyBindingNeedsAnExternalID(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t)
	id := f.newSess(t)
	err := f.st.InsertBinding(t.Context(), store.Binding{SessionID: id, Provider: "local", Name: "n", State: store.BindingReady})
	require.Error(t, err, "the migration's check refuses a ready binding without its id")
	err = f.st.InsertBinding(t.Context(), store.Binding{SessionID: id, Provider: "local", Name: "n", State: "bogus"})
	require.Error(t, err)
}
