//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/sandbox/local"
	"github.com/managed-agents/managed-agents/internal/turns"
)

func withKey(key string) option.RequestOption { return option.WithHeader("Idempotency-Key", key) }

func TestIdempotentSessionCreate(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	params := func(title string) anthropic.BetaSessionNewParams {
		return anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(f.agent.ID)},
			EnvironmentID: f.envID, Title: param.NewOpt(title)}
	}

	t.Run("same key twice makes one session", func(t *testing.T) {
		key := "uid-" + ids.New("")
		first, err := f.client.Beta.Sessions.New(ctx, params("once"), withKey(key))
		require.NoError(t, err)
		before := f.sessionCount()
		again, err := f.client.Beta.Sessions.New(ctx, params("once"), withKey(key))
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, before, f.sessionCount(), "the retry created nothing")
		requireKeys(t, objectOf(t, again.RawJSON()), sessionKeys...)
		require.JSONEq(t, first.RawJSON(), stripStats(t, again.RawJSON(), first.RawJSON()), "the retry answers with the first create's session")

		// Without a key, the same body is a new session.
		other, err := f.client.Beta.Sessions.New(ctx, params("once"))
		require.NoError(t, err)
		require.NotEqual(t, first.ID, other.ID)
	})

	t.Run("same key with another body is refused", func(t *testing.T) {
		key := "uid-" + ids.New("")
		first, err := f.client.Beta.Sessions.New(ctx, params("first"), withKey(key))
		require.NoError(t, err)
		before := f.sessionCount()
		_, err = f.client.Beta.Sessions.New(ctx, params("second"), withKey(key))
		requireAPIErr(t, err, http.StatusUnprocessableEntity, "invalid_request_error", "already used for a different session create request")
		require.Equal(t, before, f.sessionCount())
		got, err := f.client.Beta.Sessions.Get(ctx, first.ID, anthropic.BetaSessionGetParams{})
		require.NoError(t, err)
		require.Equal(t, "first", got.Title)
	})

	t.Run("concurrent creates with one key make one session", func(t *testing.T) {
		key := "uid-" + ids.New("")
		before := f.sessionCount()
		const n = 8
		got := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				s, err := f.client.Beta.Sessions.New(ctx, params("race"), withKey(key))
				if err == nil {
					got[i] = s.ID
				}
			})
		}
		wg.Wait()
		require.NotEmpty(t, got[0])
		for _, id := range got {
			require.Equal(t, got[0], id, "every attempt returns the one session: %v", got)
		}
		require.Equal(t, before+1, f.sessionCount())
	})

	t.Run("keys are per workspace", func(t *testing.T) {
		key := "uid-" + ids.New("")
		mine, err := f.client.Beta.Sessions.New(ctx, params("mine"), withKey(key))
		require.NoError(t, err)
		other := f.clientFor(f.newKey())
		agent, err := other.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "other",
			Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
		require.NoError(t, err)
		envr, err := other.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "other"})
		require.NoError(t, err)
		theirs, err := other.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(agent.ID)}, EnvironmentID: envr.ID}, withKey(key))
		require.NoError(t, err)
		require.NotEqual(t, mine.ID, theirs.ID)
	})

	for _, tc := range []struct {
		name, key, msg string
	}{
		{"empty", "", "must not be empty"},
		{"too long", strings.Repeat("k", 256), "must be 1 to 255 characters long"},
		{"not ASCII", "schlüssel", "must be printable ASCII"},
	} {
		t.Run("invalid header: "+tc.name, func(t *testing.T) {
			before := f.sessionCount()
			req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/sessions",
				strings.NewReader(`{"agent":"`+f.agent.ID+`","environment_id":"`+f.envID+`"}`))
			require.NoError(t, err)
			req.Header.Set("x-api-key", f.key)
			req.Header.Set("anthropic-beta", "managed-agents-2026-04-01")
			req.Header.Set("content-type", "application/json")
			req.Header["Idempotency-Key"] = []string{tc.key}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			env := objectOf(t, readAll(t, res))
			require.Equal(t, http.StatusBadRequest, res.StatusCode, env)
			errObj := env["error"].(map[string]any)
			require.Equal(t, "invalid_request_error", errObj["type"])
			require.Contains(t, errObj["message"], "Idempotency-Key")
			require.Contains(t, errObj["message"], tc.msg)
			require.Equal(t, before, f.sessionCount(), "a refused key creates nothing")
		})
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// stripStats returns got with the first answer's stats and updated_at, which move with time.
func stripStats(t *testing.T, got, first string) string {
	t.Helper()
	g, f := objectOf(t, got), objectOf(t, first)
	g["stats"], g["updated_at"] = f["stats"], f["updated_at"]
	b, err := json.Marshal(g)
	require.NoError(t, err)
	return string(b)
}

func TestIdempotentEventSend(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	send := func(text string, opts ...option.RequestOption) (*anthropic.BetaManagedAgentsSendSessionEvents, error) {
		return f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(text), userMessage(text + " again")}}, opts...)
	}
	key := "send-" + ids.New("")
	first, err := send("hello", withKey(key))
	require.NoError(t, err)
	require.Len(t, first.Data, 2)
	logLen := len(f.history(t, sess.ID))

	retry, err := send("hello", withKey(key))
	require.NoError(t, err)
	require.Equal(t, []string{first.Data[0].ID, first.Data[1].ID}, []string{retry.Data[0].ID, retry.Data[1].ID}, "the retry returns the first send's events")
	require.JSONEq(t, first.RawJSON(), retry.RawJSON())
	require.Len(t, f.history(t, sess.ID), logLen, "the retry appended nothing")

	_, err = send("something else", withKey(key))
	requireAPIErr(t, err, http.StatusUnprocessableEntity, "invalid_request_error", "already used for a different events request")
	require.Len(t, f.history(t, sess.ID), logLen)

	// The key is scoped to the session: another session's send with it is its own.
	sess2 := f.newSession(t, anthropic.BetaSessionNewParams{})
	other, err := f.client.Beta.Sessions.Events.Send(ctx, sess2.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hello"), userMessage("hello again")}}, withKey(key))
	require.NoError(t, err)
	require.NotEqual(t, first.Data[0].ID, other.Data[0].ID)

	// A send without a key is appended every time.
	_, err = send("plain")
	require.NoError(t, err)
	_, err = send("plain")
	require.NoError(t, err)
	require.Len(t, f.history(t, sess.ID), logLen+4)
}

// unreachableTemporal is a Temporal client for an address nothing listens on.
func unreachableTemporal(t *testing.T) client.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c, err := client.NewLazyClient(client.Options{HostPort: addr, Namespace: "default"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestSendAnsweredWhileTemporalIsDown: the wake-up after a commit happens in the background,
// so a send is acknowledged at once even when Temporal is unreachable (it used to wait up to
// 15 s), and the event runs once a worker reaches Temporal (its sweep finds the queued work).
func TestSendAnsweredWhileTemporalIsDown(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{TaskQueue: "nowhere-" + ids.New(""), ModelRetry: fastRetry}, unreachableTemporal(t))
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "down",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "down"})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)

	const sends = 5
	var took []time.Duration
	for i := range sends {
		start := time.Now()
		_, err := e.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("while down " + string(rune('a'+i)))}})
		took = append(took, time.Since(start))
		require.NoError(t, err)
	}
	slices.Sort(took)
	t.Logf("POST events with Temporal unreachable: p50 %v, max %v", took[len(took)/2], took[len(took)-1])
	require.Less(t, took[len(took)-1], time.Second, "every send is answered without waiting for Temporal: %v", took)

	// Temporal is back (a worker and the runner reach the shared dev server): the turn runs.
	e.attachWorker(t)
	require.Eventually(t, func() bool {
		for _, ev := range e.history(t, sess.ID) {
			if ev.Type == "agent.message" && strings.Contains(string(ev.Body), "while down e") {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "the queued messages run once Temporal is reachable")

	// With Temporal up, a send is acknowledged just as fast.
	took = took[:0]
	for range sends {
		start := time.Now()
		_, err := e.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("while up")}})
		took = append(took, time.Since(start))
		require.NoError(t, err)
	}
	slices.Sort(took)
	t.Logf("POST events with Temporal up: p50 %v, max %v", took[len(took)/2], took[len(took)-1])
}

// TestTwoPartDelete: BeginDelete fences the session and starts the teardown without waiting
// for it; the teardown destroys the sandbox and then finishes the delete, which removes the
// row and ends live streams with session.deleted.
func TestTwoPartDelete(t *testing.T) {
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

	// No worker runs the teardown: Begin must still return at once.
	e.worker.Stop()
	start := time.Now()
	finished, err := e.api.Service.BeginDelete(ctx, e.workspaceID(), f.sessionID)
	require.NoError(t, err)
	t.Logf("BeginDelete with no worker: %v", time.Since(start))
	require.False(t, finished, "a session with a sandbox is finished by its teardown")
	require.Less(t, time.Since(start), 2*time.Second)
	gone, err := e.api.Service.SessionDeleted(ctx, e.workspaceID(), f.sessionID)
	require.NoError(t, err)
	require.False(t, gone)
	sess, err := e.client.Beta.Sessions.Get(ctx, f.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("terminated"), sess.Status, "fenced")
	require.False(t, sess.ArchivedAt.IsZero(), "fenced by archiving")
	_, err = e.client.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("too late")}})
	requireAPIErr(t, err, 409, "conflict_error", "archived")
	// Beginning again joins the teardown.
	finished, err = e.api.Service.BeginDelete(ctx, e.workspaceID(), f.sessionID)
	require.NoError(t, err)
	require.False(t, finished)

	// A worker comes back: the teardown destroys the sandbox and finishes the delete.
	e.worker = e.startWorker()
	require.Eventually(t, func() bool {
		gone, err := e.api.Service.SessionDeleted(ctx, e.workspaceID(), f.sessionID)
		require.NoError(t, err)
		return gone
	}, time.Minute, 20*time.Millisecond)
	_, err = os.Stat(workspace)
	require.ErrorIs(t, err, os.ErrNotExist, "the sandbox went before the row")
	_, err = turns.New(e.api.Store, discardLogger()).SandboxRef(ctx, f.sessionID)
	require.ErrorIs(t, err, turns.ErrNoBinding)
	_, err = e.client.Beta.Sessions.Get(ctx, f.sessionID, anthropic.BetaSessionGetParams{})
	requireAPIErr(t, err, 404, "not_found_error", "not found")
	require.Equal(t, "session.deleted", last(f.until("session.deleted")).Type, "live streams end with session.deleted")
	// The session's run noticed and ended.
	require.NoError(t, sharedTemporal(t).GetWorkflow(ctx, "session/"+f.sessionID, "").Get(ctx, nil))

	// Deleting a session without a sandbox finishes at once.
	plain, err := newSession(t, e.client, sess.Agent.ID, sess.EnvironmentID)
	require.NoError(t, err)
	finished, err = e.api.Service.BeginDelete(ctx, e.workspaceID(), plain.ID)
	require.NoError(t, err)
	require.True(t, finished)
	gone, err = e.api.Service.SessionDeleted(ctx, e.workspaceID(), plain.ID)
	require.NoError(t, err)
	require.True(t, gone)
}
