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
	"sync"
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

// TestRunningSessionsQuotaResumingAnswers: an answer that resumes a parked turn counts against
// the workspace quota of running sessions like a message that starts a turn (issue 35). Three
// sessions are parked on a custom tool call and the quota is 1; their answers, sent at once,
// are decided one at a time: exactly one is admitted and its turn resumes, the others get the
// quota's 429 and nothing of theirs is written. A partial answer (one of the two calls another
// turn waits on) resumes nothing and is accepted although the quota is full. Once the admitted
// turn ends, a refused answer sent again resumes its session, and the last one, sent through
// the SDK's retries, waits out the refusal while that turn runs: no session is wedged.
func TestRunningSessionsQuotaResumingAnswers(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t, func(c *app.Config) { c.RateLimits.WorkspaceRunningSessions = 1 })
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "quota", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
			Name: "get_weather", Description: "weather of a city",
			InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "quota"})
	require.NoError(t, err)

	type parkedTurn struct{ session, call string }
	// park starts a turn in a new session and waits until it is parked; it returns the calls
	// the turn waits on. Under the quota the turns run one after another.
	park := func(text string) (string, []string) {
		sess, err := newSession(t, e.client, agent.ID, envr.ID)
		require.NoError(t, err)
		sent, err := e.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(text)}})
		require.NoError(t, err)
		idle, err := wire.DecodeBody[wire.StatusIdleBody](waitIdleAfter(t, e, sess.ID, sent.Data[0].ID))
		require.NoError(t, err)
		require.Equal(t, wire.StopRequiresAction, idle.StopReason.Type)
		return sess.ID, idle.StopReason.EventIDs
	}
	// Every model call of these turns first sleeps 4 s: the resumed one holds the quota's only
	// slot while the other answers are decided.
	var full []parkedTurn
	for range 3 {
		id, calls := park("/tool get_weather {\"city\":\"Paris\"}\n/sleep 4000")
		require.Len(t, calls, 1)
		full = append(full, parkedTurn{id, calls[0]})
	}
	twoID, twoCalls := park("/tool get_weather {\"city\":\"Oslo\"}\n/tool get_weather {\"city\":\"Rome\"}")
	require.Len(t, twoCalls, 2)

	answer := func(c anthropic.Client, sessionID, call, text string) (*anthropic.BetaManagedAgentsSendSessionEvents, error) {
		return c.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{customResultParam(call, text)}})
	}
	// All at once: the three answers that would each resume a turn, and the partial one.
	sent := make([]*anthropic.BetaManagedAgentsSendSessionEvents, len(full)+1)
	errs := make([]error, len(full)+1)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			<-start
			if i < len(full) {
				sent[i], errs[i] = answer(e.client, full[i].session, full[i].call, "sunny")
			} else {
				sent[i], errs[i] = answer(e.client, twoID, twoCalls[0], "cold")
			}
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errs[len(full)], "a partial answer resumes nothing and is never refused")

	var admitted []int
	var refused []parkedTurn
	for i, err := range errs[:len(full)] {
		if err == nil {
			admitted = append(admitted, i)
			continue
		}
		apiErr := requireAPIErr(t, err, http.StatusTooManyRequests, "rate_limit_error",
			"this workspace already has 1 running sessions, its limit: the answer would resume this session's parked turn")
		require.Contains(t, apiErr.Message, "nothing was written")
		require.Equal(t, "5", apiErr.Response.Header.Get("retry-after"))
		require.Equal(t, "running_sessions_quota", objectOf(t, apiErr.RawJSON())["error"].(map[string]any)["details"].(map[string]any)["error_code"])
		refused = append(refused, full[i])
	}
	require.Len(t, admitted, 1, "exactly one answer resumes its turn under a quota of 1: %v", errs)
	for _, r := range refused {
		hist, err := e.api.Store.History(ctx, r.session)
		require.NoError(t, err)
		for _, ev := range hist {
			require.NotEqual(t, wire.EventUserCustomToolResult, ev.Type, "the refused answer was not written")
		}
	}

	// resumed waits for the turn that the answer sent resumed to end, and checks it used it.
	resumed := func(sessionID string, sent *anthropic.BetaManagedAgentsSendSessionEvents) {
		t.Helper()
		idle, err := wire.DecodeBody[wire.StatusIdleBody](waitIdleAfter(t, e, sessionID, sent.Data[0].ID))
		require.NoError(t, err)
		require.Equal(t, wire.StopEndTurn, idle.StopReason.Type)
		hist, err := e.api.Store.History(ctx, sessionID)
		require.NoError(t, err)
		require.Equal(t, "get_weather: sunny", lastMessageText(t, hist))
	}
	resumed(full[admitted[0]].session, sent[admitted[0]])

	// The slot is free: the refused answer, sent again, resumes its turn.
	again, err := answer(e.client, refused[0].session, refused[0].call, "sunny")
	require.NoError(t, err)
	// The SDK, retries on, waits out the refusal while that turn runs.
	retrying := e.clientFor(e.key, option.WithMaxRetries(3))
	retried, err := answer(retrying, refused[1].session, refused[1].call, "sunny")
	require.NoError(t, err)
	resumed(refused[0].session, again)
	resumed(refused[1].session, retried)

	// The partial answer's turn still waits on its other call; its answer resumes it.
	done, err := answer(e.client, twoID, twoCalls[1], "warm")
	require.NoError(t, err)
	idle, err := wire.DecodeBody[wire.StatusIdleBody](waitIdleAfter(t, e, twoID, done.Data[0].ID))
	require.NoError(t, err)
	require.Equal(t, wire.StopEndTurn, idle.StopReason.Type)
}

// lastMessageText is the text of the log's last agent.message.
func lastMessageText(t *testing.T, hist []wire.Event) string {
	t.Helper()
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Type != wire.EventAgentMessage {
			continue
		}
		body, err := wire.DecodeBody[wire.AgentMessageBody](hist[i])
		require.NoError(t, err)
		var b strings.Builder
		for _, c := range body.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	t.Fatalf("no agent.message in the log")
	return ""
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
