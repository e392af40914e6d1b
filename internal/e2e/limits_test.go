//go:build integration

package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/turns"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func withRateLimits(l app.RateLimitConfig) app.Config { return app.Config{RateLimits: l} }

// replica starts a second API process on e's database (its own pool, listener and handler,
// as another replica behind the Service) and returns its URL.
func (e *env) replica(t *testing.T, cfg app.Config) string {
	t.Helper()
	cfg.DatabaseURL = e.dbURL
	api, err := app.NewAPI(context.Background(), cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		api.Close()
	})
	return srv.URL
}

// getAgents is GET /v1/agents with e's key at base (a replica's URL).
func (e *env) getAgents(t *testing.T, base string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/agents", nil)
	require.NoError(t, err)
	req.Header.Set("x-api-key", e.key)
	req.Header.Set("anthropic-beta", "managed-agents-2026-04-01")
	return send(t, req)
}

// requireRetryAfter checks the headers of a 429 and returns retry-after-ms.
func requireRetryAfter(t *testing.T, h http.Header) time.Duration {
	t.Helper()
	secs, err := strconv.Atoi(h.Get("retry-after"))
	require.NoError(t, err, "retry-after %q is whole seconds", h.Get("retry-after"))
	require.GreaterOrEqual(t, secs, 1)
	ms, err := strconv.Atoi(h.Get("retry-after-ms"))
	require.NoError(t, err, "retry-after-ms %q", h.Get("retry-after-ms"))
	require.Positive(t, ms)
	require.LessOrEqual(t, ms, secs*1000, "retry-after rounds retry-after-ms up")
	require.Greater(t, ms, (secs-1)*1000, "retry-after rounds retry-after-ms up")
	return time.Duration(ms) * time.Millisecond
}

// TestRateLimitBurst: a key gets its burst, then 429 rate_limit_error with retry-after; the
// official SDK, retries on, waits as told and succeeds; another key is not affected.
func TestRateLimitBurst(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, withRateLimits(app.RateLimitConfig{RequestsPerSecond: 2, Burst: 3}), nil)
	for i := range 3 {
		resp, body := e.raw(http.MethodGet, "/v1/agents", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d of the burst: %s", i, body)
	}
	resp, body := e.raw(http.MethodGet, "/v1/agents", "")
	requireRawErr(t, resp, body, http.StatusTooManyRequests, "rate_limit_error", "rate limit exceeded")
	wait := requireRetryAfter(t, resp.Header)
	require.LessOrEqual(t, wait, 500*time.Millisecond, "one interval at 2 requests a second")

	ctx := context.Background()
	_, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusTooManyRequests, "rate_limit_error", "rate limit exceeded")

	other := e.clientFor(e.newKey())
	_, err = other.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err, "every key has its own limit")

	// The SDK honours retry-after-ms: a burst of its own requests all succeed, paced.
	retrying := e.clientFor(e.key, option.WithMaxRetries(5))
	start := time.Now()
	for range 4 {
		_, err := retrying.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
		require.NoError(t, err)
	}
	require.Greater(t, time.Since(start), time.Second, "four requests at 2 a second with the bucket empty")
}

// TestRateLimitSharedAcrossReplicas: two API processes on one database share a key's limit.
func TestRateLimitSharedAcrossReplicas(t *testing.T) {
	t.Parallel()
	cfg := withRateLimits(app.RateLimitConfig{RequestsPerSecond: 0.01, Burst: 4})
	e := newAPIEnv(t, cfg, nil)
	replicas := []string{e.srv.URL, e.replica(t, cfg)}
	var codes []int
	for i := range 8 {
		resp, _ := e.getAgents(t, replicas[i%2])
		codes = append(codes, resp.StatusCode)
	}
	require.Equal(t, []int{200, 200, 200, 200, 429, 429, 429, 429}, codes, "the burst of 4 is spent across both replicas")
}

// TestStreamCap: a key holds at most its cap of open streams, across replicas; one more is
// refused with 429 before it starts, and closing one frees its slot.
func TestStreamCap(t *testing.T) {
	t.Parallel()
	cfg := withRateLimits(app.RateLimitConfig{StreamsPerKey: 2})
	e := newAPIEnv(t, cfg, nil)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("streams"))
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "streams"})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)

	other := e.clientFor(e.key, option.WithBaseURL(e.replica(t, cfg)))
	first := openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})
	openStream(t, other, sess.ID, anthropic.BetaSessionEventStreamParams{})

	for _, c := range []anthropic.Client{e.client, other} {
		refused := openStreamErr(t, c, sess.ID, anthropic.BetaSessionEventStreamParams{})
		requireAPIErr(t, refused.Err(), http.StatusTooManyRequests, "rate_limit_error", "too many open streams")
	}
	resp, body := e.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/events/stream", "")
	requireRawErr(t, resp, body, http.StatusTooManyRequests, "rate_limit_error", "this API key may hold 2 event streams")
	require.Equal(t, "5", resp.Header.Get("retry-after"))

	require.NoError(t, first.Close())
	require.Eventually(t, func() bool {
		st := openStreamErr(t, other, sess.ID, anthropic.BetaSessionEventStreamParams{})
		return st.Err() == nil
	}, 10*time.Second, 50*time.Millisecond, "the closed stream's slot is free again")
}

// waitIdleAfter waits until the session has gone idle after event afterID was delivered.
func waitIdleAfter(t *testing.T, e *env, sessionID, afterID string) wire.Event {
	t.Helper()
	var idle wire.Event
	require.Eventually(t, func() bool {
		hist, err := e.api.Store.History(context.Background(), sessionID)
		require.NoError(t, err)
		seen := false
		for _, ev := range hist {
			seen = seen || ev.ID == afterID && ev.ProcessedAt != nil
			if seen && ev.Type == wire.EventSessionStatusIdle {
				idle = ev
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond)
	return idle
}

// TestRunningSessionsQuota: with the workspace at its quota of running sessions, a message
// that would start another turn is refused with 429 and nothing is written; a message to the
// running session itself is queued as always, and once the session is idle the refused
// message goes through. Other workspaces are not affected.
func TestRunningSessionsQuota(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t, func(c *app.Config) { c.RateLimits.WorkspaceRunningSessions = 1 })
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("quota"))
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "quota"})
	require.NoError(t, err)
	busy, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)
	waiting, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)

	sent, err := e.client.Beta.Sessions.Events.Send(ctx, busy.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("/sleep 3000")}})
	require.NoError(t, err)

	_, err = e.client.Beta.Sessions.Events.Send(ctx, waiting.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hello")}})
	apiErr := requireAPIErr(t, err, http.StatusTooManyRequests, "rate_limit_error", "this workspace already has 1 running sessions, its limit")
	require.Contains(t, apiErr.Message, "nothing was written")
	require.Equal(t, "5", apiErr.Response.Header.Get("retry-after"))
	hist, err := e.api.Store.History(ctx, waiting.ID)
	require.NoError(t, err)
	require.Empty(t, hist, "the refused message was not written")

	// A session created with initial events would start a turn too: refused, not created.
	resp, body := e.raw(http.MethodPost, "/v1/sessions", `{"agent":"`+agent.ID+`","environment_id":"`+envr.ID+
		`","initial_events":[{"type":"user.message","content":[{"type":"text","text":"hi"}]}]}`)
	requireRawErr(t, resp, body, http.StatusTooManyRequests, "rate_limit_error", "running sessions")
	page, err := e.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	require.NoError(t, err)
	require.Len(t, page.Data, 2, "no session was created")

	// The running session takes more messages; they queue behind its turn.
	_, err = e.client.Beta.Sessions.Events.Send(ctx, busy.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("next")}})
	require.NoError(t, err)
	// Another workspace has a quota of its own.
	otherKey := e.newKey()
	other := e.clientFor(otherKey)
	otherAgent := createAgent(t, other, agentParams("quota"))
	otherEnv, err := other.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "quota"})
	require.NoError(t, err)
	otherSess, err := newSession(t, other, otherAgent.ID, otherEnv.ID)
	require.NoError(t, err)
	_, err = other.Beta.Sessions.Events.Send(ctx, otherSess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hello")}})
	require.NoError(t, err)

	waitIdleAfter(t, e, busy.ID, sent.Data[0].ID)
	require.Eventually(t, func() bool {
		s, err := e.client.Beta.Sessions.Get(ctx, busy.ID, anthropic.BetaSessionGetParams{})
		require.NoError(t, err)
		hist, err := e.api.Store.History(ctx, busy.ID)
		require.NoError(t, err)
		return s.Status == "idle" && !hasQueuedMessage(hist)
	}, 2*time.Minute, 50*time.Millisecond, "both turns of the busy session end")
	// The SDK, retries on, waits out any remaining refusal.
	retrying := e.clientFor(e.key, option.WithMaxRetries(3))
	_, err = retrying.Beta.Sessions.Events.Send(ctx, waiting.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hello")}})
	require.NoError(t, err)
}

func hasQueuedMessage(hist []wire.Event) bool {
	for _, ev := range hist {
		if ev.Type == wire.EventUserMessage && ev.ProcessedAt == nil {
			return true
		}
	}
	return false
}

// TestSandboxQuota: with the workspace at its quota of sandboxes, another session's first
// tool call ends its turn with a session.error that says why, and makes no sandbox; the
// session is not harmed, and once a session with a sandbox is deleted the call succeeds.
func TestSandboxQuota(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t, func(c *app.Config) { c.RateLimits.WorkspaceSandboxes = 1 })
	holder := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	holder.send(userMessage(`/tool bash {"command":"echo held"}`))
	require.Equal(t, "end_turn", last(holder.untilIdle()).StopReason.Type)

	ctx := context.Background()
	held, err := e.client.Beta.Sessions.Get(ctx, holder.sessionID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, held.Agent.ID, held.EnvironmentID)
	require.NoError(t, err)
	refused := &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}
	refused.send(userMessage(`/tool bash {"command":"echo refused"}`))
	evs := refused.untilIdle()
	errEv := fieldsOf(t, find(t, evs, "session.error"))
	msg := errEv["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, "workspace sandbox quota reached")
	require.Contains(t, msg, "MANAGED_AGENT_WORKSPACE_MAX_SANDBOXES")
	require.Equal(t, "retries_exhausted", last(evs).StopReason.Type)
	_, err = turns.New(e.api.Store, discardLogger()).SandboxRef(ctx, refused.sessionID)
	require.ErrorIs(t, err, turns.ErrNoBinding, "no sandbox was made")

	_, err = e.client.Beta.Sessions.Delete(ctx, holder.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	refused.send(userMessage(`/tool bash {"command":"echo now"}`))
	evs = refused.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	require.True(t, strings.Contains(messageText(find(t, evs, "agent.message")), "now"), "the tool ran: %v", types(evs))
}
