//go:build integration

package e2e

import (
	"context"
	"os"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/sessions"
)

// TestDeleteSessionTearsDownItsSandbox: a session that ran a tool has a sandbox and a
// binding; deleting it destroys the sandbox, removes the binding, then the session.
func TestDeleteSessionTearsDownItsSandbox(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t)
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage(`/tool bash {"command":"echo kept > kept.txt"}`))
	require.Equal(t, "end_turn", last(f.untilIdle()).StopReason.Type)

	ctx := context.Background()
	ref, err := e.api.Service.SandboxRef(ctx, f.sessionID)
	require.NoError(t, err)
	workspace, err := local.New(e.sandboxDir).Workspace(ref)
	require.NoError(t, err)
	_, err = os.Stat(workspace)
	require.NoError(t, err, "the sandbox exists while the session does")

	deleted, err := e.client.Beta.Sessions.Delete(ctx, f.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Equal(t, f.sessionID, deleted.ID)

	_, err = os.Stat(workspace)
	require.ErrorIs(t, err, os.ErrNotExist, "the sandbox is destroyed")
	_, err = e.api.Service.SandboxRef(ctx, f.sessionID)
	require.ErrorIs(t, err, sessions.ErrNoBinding, "the binding is removed")
	_, err = e.client.Beta.Sessions.Get(ctx, f.sessionID, anthropic.BetaSessionGetParams{})
	requireAPIErr(t, err, 404, "not_found_error", "not found")
}

// TestSandboxGoneTerminatesSession: a sandbox that disappeared is never silently replaced
// (DESIGN §6); the run fails for good and the session ends terminated, saying why.
func TestSandboxGoneTerminatesSession(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t)
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage(`/tool bash {"command":"true"}`))
	require.Equal(t, "end_turn", last(f.untilIdle()).StopReason.Type)

	ctx := context.Background()
	ref, err := e.api.Service.SandboxRef(ctx, f.sessionID)
	require.NoError(t, err)
	require.NoError(t, local.New(e.sandboxDir).Destroy(ctx, ref))

	// After a worker restart the sandbox is attached again from its stored reference.
	e.restartWorker()
	f.send(userMessage(`/tool bash {"command":"true"}`))
	evs := f.until("session.status_terminated")
	errEv := fieldsOf(t, find(t, evs, "session.error"))["error"].(map[string]any)
	require.Equal(t, map[string]any{"type": "terminal"}, errEv["retry_status"])
	require.Contains(t, errEv["message"], "no longer exists")

	sess, err := e.client.Beta.Sessions.Get(ctx, f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("terminated"), sess.Status)
	_, err = e.client.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("more")}})
	requireAPIErr(t, err, 409, "conflict_error", "terminated")
}
