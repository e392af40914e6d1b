//go:build integration

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/turns"
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
	ref, err := turns.New(e.api.Store, discardLogger()).SandboxRef(ctx, f.sessionID)
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
	_, err = turns.New(e.api.Store, discardLogger()).SandboxRef(ctx, f.sessionID)
	require.ErrorIs(t, err, turns.ErrNoBinding, "the binding is removed")
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
	ref, err := turns.New(e.api.Store, discardLogger()).SandboxRef(ctx, f.sessionID)
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

// TestEventsCommittedWithoutARunnerRunLater: events accepted while no worker or Temporal was
// reachable stay queued; the worker's sweep at start wakes the session and the turn runs.
func TestEventsCommittedWithoutARunnerRunLater(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the API alone: nothing runs sessions yet
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "later",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "later"})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)
	_, err = e.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("are you there?")}})
	require.NoError(t, err)

	// Workers come up: the sweep finds the queued message.
	e.attachWorker(t)
	require.Eventually(t, func() bool {
		for _, ev := range e.history(t, sess.ID) {
			if ev.Type == "session.status_idle" {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond)
	var text string
	for _, ev := range e.history(t, sess.ID) {
		if ev.Type == "agent.message" {
			text = string(ev.Body)
		}
	}
	require.Contains(t, text, "echo: are you there?")
}
