//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/managed-agents/managed-agents/api/v1alpha1"
	"github.com/managed-agents/managed-agents/controllers"
	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/dispatcher"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes"
	"github.com/managed-agents/managed-agents/internal/sandbox/kubernetes/kubetest"
	"github.com/managed-agents/managed-agents/internal/sessions"
)

// selfHosted is a running env with a self-hosted environment, an environment key for it and
// an agent with the built-in toolset (always_allow) and a custom tool.
type selfHosted struct {
	*turnFixture
	envID   string
	envKey  string
	agentID string
}

// newSelfHosted starts a running env (work leases of leaseTTL) and a session on a new
// self-hosted environment; no worker serves it yet.
func newSelfHosted(t *testing.T, leaseTTL time.Duration, configure ...func(*app.Config)) *selfHosted {
	t.Helper()
	e := newRunningEnv(t, append([]func(*app.Config){func(c *app.Config) { c.WorkLeaseTTL = leaseTTL }}, configure...)...)
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "self-hosted", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{builtinTools("always_allow"), {OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
			Name: "lookup", Description: "looks a word up on the worker's machine",
			InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"word": map[string]any{"type": "string"}}}}}}})
	require.NoError(t, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "on-prem",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	require.NoError(t, err)
	ws := e.workspaceOf(t)
	k, err := e.api.Service.CreateKey(ctx, "test admin", sessions.KeyRequest{WorkspaceID: ws, EnvironmentID: envr.ID, Label: "worker"})
	require.NoError(t, err)
	sess, err := newSession(t, e.client, agent.ID, envr.ID)
	require.NoError(t, err)
	f := &turnFixture{t: t, e: e, sessionID: sess.ID, stream: openStream(t, e.client, sess.ID, anthropic.BetaSessionEventStreamParams{})}
	return &selfHosted{turnFixture: f, envID: envr.ID, envKey: k.Secret, agentID: agent.ID}
}

// workspaceOf is the workspace of the env's key.
func (e *env) workspaceOf(t *testing.T) string {
	t.Helper()
	p, err := e.api.Service.Authenticate(context.Background(), e.key)
	require.NoError(t, err)
	return p.WorkspaceID
}

// lookupTool is a custom tool the worker serves.
type lookupTool struct{ calls atomic.Int32 }

func (*lookupTool) Name() string        { return "lookup" }
func (*lookupTool) Description() string { return "looks a word up" }
func (*lookupTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"word": map[string]any{"type": "string"}}}
}
func (l *lookupTool) Execute(_ context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	l.calls.Add(1)
	var in struct {
		Word string `json:"word"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: "defined: " + in.Word}}}, nil
}

// cuttable is an HTTP transport a test can cut, as if the worker's machine died: every
// request after the cut fails without reaching the server.
type cuttable struct{ cut atomic.Bool }

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("worker machine is gone")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// runWorker runs the SDK's EnvironmentWorker against the env until the test ends; it returns
// the worker's workdir, the custom tool it serves and a channel with Run's result.
func (s *selfHosted) runWorker(t *testing.T, key string, opts ...option.RequestOption) (string, *lookupTool, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	lookup := &lookupTool{}
	idle := 2 * time.Second
	client := anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(s.e.srv.URL), option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
	w := environments.NewEnvironmentWorker(client, environments.EnvironmentWorkerOptions{
		EnvironmentID: s.envID, EnvironmentKey: key, Workdir: dir, MaxIdle: &idle, Logger: discardLogger(),
		ToolsFunc: func(env *agenttoolset.AgentToolContext) []anthropic.BetaTool {
			return append(agenttoolset.BetaAgentToolset20260401(env), lookup)
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var once sync.Once
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { once.Do(cancel) })
	return dir, lookup, done
}

// runDispatcher runs an environment-worker until the test ends, and checks it stops cleanly.
func runDispatcher(t *testing.T, d *dispatcher.Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// workItems lists the environment's work with the environment key, through the SDK.
func (s *selfHosted) workItems(t *testing.T) []anthropic.BetaSelfHostedWork {
	t.Helper()
	c := s.e.clientFor(s.envKey)
	page, err := c.Beta.Environments.Work.List(context.Background(), s.envID, anthropic.BetaEnvironmentWorkListParams{})
	require.NoError(t, err)
	return page.Data
}

func toolMessage(command string) anthropic.BetaManagedAgentsEventParamsUnion {
	raw, _ := json.Marshal(map[string]string{"command": command})
	return userMessage("/tool bash " + string(raw))
}

func countTypes(evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// The official SDK's worker runs a session's built-in calls on its own machine: the result is
// the worker's user.tool_result, the session stays running while it waits, and the file the
// call wrote is in the worker's workdir, not in the server's sandboxes.
func TestSelfHostedBuiltinToolsRunOnTheWorker(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 5*time.Second)
	dir, _, _ := s.runWorker(t, s.envKey)

	s.send(toolMessage("echo from-the-worker > proof.txt && cat proof.txt"))
	evs := s.untilIdle()
	require.Equal(t, []string{"session.status_running", "session.thread_status_running", "user.message", "span.model_request_start",
		"agent.tool_use", "span.model_request_end", "user.tool_result", "span.model_request_start", "agent.message", "span.model_request_end",
		"session.thread_status_idle", "session.usage", "session.status_idle"}, types(evs))
	require.Equal(t, "bash: from-the-worker", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	b, err := os.ReadFile(filepath.Join(dir, "proof.txt"))
	require.NoError(t, err)
	require.Equal(t, "from-the-worker\n", string(b))
	_, err = os.Stat(filepath.Join(s.e.sandboxDir, "proof.txt"))
	require.True(t, os.IsNotExist(err))

	// The worker's item: claimed, acknowledged, heartbeated; stopped once the worker's runner
	// idles out.
	items := s.workItems(t)
	require.Len(t, items, 1)
	require.Equal(t, s.sessionID, items[0].Data.ID)
	require.NotEmpty(t, items[0].AcknowledgedAt)
	require.NotEmpty(t, items[0].StartedAt)
	require.Eventually(t, func() bool { return s.workItems(t)[0].State == "stopped" }, 30*time.Second, 200*time.Millisecond)

	// The next turn's call queues new work, which the same worker claims.
	s.send(toolMessage("cat proof.txt"))
	evs = s.untilIdle()
	require.Equal(t, "bash: from-the-worker", messageText(find(t, evs, "agent.message")))
	require.Len(t, s.workItems(t), 2)
}

// A custom tool the worker serves answers through user.custom_tool_result.
func TestSelfHostedCustomToolServedByWorker(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 5*time.Second)
	_, lookup, _ := s.runWorker(t, s.envKey)
	s.send(userMessage(`/tool lookup {"word":"lease"}`))
	evs := s.untilIdle()
	require.Equal(t, "requires_action", last(evs).StopReason.Type)
	evs = s.untilIdle()
	require.Contains(t, types(evs), "user.custom_tool_result")
	require.Equal(t, "lookup: defined: lease", messageText(find(t, evs, "agent.message")))
	require.Equal(t, int32(1), lookup.calls.Load())
}

// A worker that dies mid-call loses its lease; a second worker reclaims the item and runs the
// call, whose result enters the log once.
func TestSelfHostedWorkerKilledMidCall(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 3*time.Second)
	first := &cuttable{}
	dir1, _, _ := s.runWorker(t, s.envKey, option.WithHTTPClient(&http.Client{Transport: first}))

	s.send(toolMessage("touch started && sleep 2 && echo done-$(basename $PWD)"))
	s.until("agent.tool_use")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir1, "started"))
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the first worker never started the call")
	first.cut.Store(true)

	dir2, _, _ := s.runWorker(t, s.envKey)
	evs := s.untilIdle()
	require.Equal(t, 1, countTypes(evs, "user.tool_result"), "%v", types(evs))
	require.Equal(t, "bash: done-"+filepath.Base(dir2), messageText(find(t, evs, "agent.message")))
	items := s.workItems(t)
	require.Len(t, items, 1, "the same item was reclaimed, not a new one queued")

	hist, err := s.e.client.Beta.Sessions.Events.List(context.Background(), s.sessionID, anthropic.BetaSessionEventListParams{})
	require.NoError(t, err)
	results := 0
	for _, ev := range hist.Data {
		if ev.Type == "user.tool_result" {
			results++
		}
	}
	require.Equal(t, 1, results)
}

// An interrupt ends the turn at once; the worker's item is asked to stop and stops.
func TestSelfHostedInterruptStopsTheWork(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 4*time.Second)
	s.runWorker(t, s.envKey)
	s.send(toolMessage("sleep 30"))
	s.until("agent.tool_use")
	require.Eventually(t, func() bool {
		items := s.workItems(t)
		return len(items) == 1 && items[0].State == "active"
	}, 30*time.Second, 100*time.Millisecond)
	s.send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}})
	evs := s.untilIdle()
	require.Contains(t, types(evs), "user.interrupt")
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	// The next run at once replaces the stopping item; its call is not cut short by the old
	// worker's stop.
	s.send(toolMessage("echo again"))
	evs = s.untilIdle()
	require.Equal(t, "bash: again", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	items := s.workItems(t)
	require.Len(t, items, 2)
	require.Equal(t, "stopped", string(items[1].State), "the interrupted run's item")
}

// With no worker, a delegated call ends its turn with a session.error naming it once the
// bound passes; the session is idle and takes the next message.
func TestSelfHostedNoWorkerTimesOut(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 5*time.Second, func(c *app.Config) { c.SelfHostedToolTimeout = 2 * time.Second })
	s.send(toolMessage("true"))
	evs := s.untilIdle()
	errEv := find(t, evs, "session.error")
	require.Contains(t, errEv.RawJSON(), "no environment worker answered tool call")
	require.Equal(t, "retries_exhausted", last(evs).StopReason.Type)
	result := fieldsOf(t, find(t, evs, "agent.tool_result"))
	require.Equal(t, true, result["is_error"], "the unanswered call is answered as failed, so no later worker runs it")
	require.Equal(t, find(t, evs, "agent.tool_use").ID, result["tool_use_id"])
	require.Equal(t, "stopped", string(s.workItems(t)[0].State))
	s.send(userMessage("still there?"))
	evs = s.untilIdle()
	require.Equal(t, "echo: still there?", messageText(find(t, evs, "agent.message")))
}

// Deleting a session stops its work; a revoked environment key ends the worker's polling.
func TestSelfHostedDeleteAndRevokedKey(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 5*time.Second)
	_, _, done := s.runWorker(t, s.envKey)
	s.send(toolMessage("echo one"))
	s.untilIdle()
	// The worker still holds the item (its runner waits MaxIdle after the idle): the delete
	// stops it.
	require.Equal(t, "active", string(s.workItems(t)[0].State))
	_, err := s.e.client.Beta.Sessions.Delete(context.Background(), s.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Equal(t, "stopped", string(s.workItems(t)[0].State))

	keys, err := s.e.api.Service.ListKeys(context.Background(), s.e.workspaceOf(t))
	require.NoError(t, err)
	for _, k := range keys {
		if k.EnvironmentID == s.envID {
			_, err := s.e.api.Service.RevokeKey(context.Background(), "test admin", k.ID)
			require.NoError(t, err)
		}
	}
	select {
	case err := <-done:
		require.ErrorContains(t, err, "401")
	case <-time.After(30 * time.Second):
		t.Fatal("the worker kept polling with a revoked key")
	}
}

// The queue's wire: an empty poll is null, errors have the API's shape, a 412 carries the
// lease, and keys are confined to what they may reach.
func TestSelfHostedWire(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 5*time.Second)
	e := s.e
	base := "/v1/environments/" + s.envID + "/work"
	asWorker := []string{"x-api-key", "", "authorization", "Bearer " + s.envKey}

	resp, body := e.raw("GET", base+"/poll", "", asWorker...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "null", body)
	for _, bad := range []string{"?block_ms=0", "?block_ms=1000", "?block_ms=x", "?reclaim_older_than_ms=-1"} {
		resp, body = e.raw("GET", base+"/poll"+bad, "", asWorker...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad+": "+body)
		require.Contains(t, body, `"type":"invalid_request_error"`)
	}
	resp, body = e.raw("GET", base+"/stats", "", asWorker...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.JSONEq(t, `{"type":"work_queue_stats","depth":0,"pending":0,"oldest_queued_at":null,"workers_polling":0}`, body)

	// A call queues work; a poll claims it with a secret carrying a session token.
	s.send(toolMessage("true"))
	s.until("agent.tool_use")
	var work map[string]any
	require.Eventually(t, func() bool {
		resp, body = e.raw("GET", base+"/poll?block_ms=500", "", append(asWorker, "Anthropic-Worker-ID", "w1")...)
		return resp.StatusCode == http.StatusOK && body != "null"
	}, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, json.Unmarshal([]byte(body), &work))
	require.Equal(t, "starting", work["state"])
	require.Equal(t, map[string]any{"id": s.sessionID, "type": "session"}, work["data"])
	raw, err := base64.RawURLEncoding.DecodeString(work["secret"].(string))
	require.NoError(t, err)
	var secret struct {
		SessionsToken string `json:"sessions_token"`
	}
	require.NoError(t, json.Unmarshal(raw, &secret))
	require.NotEmpty(t, secret.SessionsToken)
	asSession := []string{"x-api-key", "", "authorization", "Bearer " + secret.SessionsToken}
	item := base + "/" + work["id"].(string)

	resp, body = e.raw("GET", base+"/stats", "")
	require.Contains(t, body, `"pending":1`)
	require.Contains(t, body, `"workers_polling":1`)

	// Heartbeats: the first with NO_HEARTBEAT, then each echoing the last; a stale one is 412.
	resp, body = e.raw("POST", item+"/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", "", asSession...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var hb map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &hb))
	require.Equal(t, "work_heartbeat", hb["type"])
	require.Equal(t, true, hb["lease_extended"])
	require.Equal(t, "active", hb["state"])
	require.EqualValues(t, 5, hb["ttl_seconds"])
	resp, body = e.raw("POST", item+"/heartbeat?expected_last_heartbeat=NO_HEARTBEAT", "", asSession...)
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, body)
	require.Contains(t, body, `"error_code":"heartbeat_precondition_failed"`)
	require.Contains(t, body, `"current_state":{"last_heartbeat":"`+hb["last_heartbeat"].(string)+`"`)

	// The session token reaches its session and its item only.
	resp, body = e.raw("GET", "/v1/sessions/"+s.sessionID, "", asSession...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	other, err := newSession(t, e.client, s.agentID, s.envID)
	require.NoError(t, err)
	for _, path := range []string{"/v1/sessions/" + other.ID, "/v1/agents", base + "/poll"} {
		resp, body = e.raw("GET", path, "", asSession...)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path+": "+body)
		require.Contains(t, body, `"type":"permission_error"`)
	}
	// The environment key reaches this environment's sessions, and sends only results.
	resp, body = e.raw("GET", "/v1/sessions/"+other.ID, "", asWorker...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.raw("POST", "/v1/sessions/"+other.ID+"/events", `{"events":[{"type":"user.message","content":[{"type":"text","text":"hi"}]}]}`, asWorker...)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	resp, body = e.raw("POST", "/v1/agents", `{"name":"x","model":"claude-opus-5"}`, asWorker...)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)

	// Another workspace's key sees no such environment.
	otherKey := e.newKey()
	resp, body = e.raw("GET", base+"/stats", "", "x-api-key", otherKey)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	// A cloud environment has no queue.
	cloud, err := e.client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: "cloud"})
	require.NoError(t, err)
	resp, body = e.raw("GET", "/v1/environments/"+cloud.ID+"/work/poll", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)

	// Metadata patches; stop is 204, a second stop 409, and the token is void after it.
	resp, body = e.raw("POST", item, `{"metadata":{"host":"rack-1"}}`, asWorker...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"metadata":{"host":"rack-1"}`)
	resp, body = e.raw("POST", item+"/stop", `{"force":true}`, asSession...)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.Empty(t, body)
	resp, body = e.raw("POST", item+"/stop", `{"force":true}`, asWorker...)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	resp, body = e.raw("GET", "/v1/sessions/"+s.sessionID, "", asSession...)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	resp, body = e.raw("GET", base+"/work_missing", "", asWorker...)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	require.Contains(t, body, "work work_missing not found")
	resp, body = e.raw("GET", base+"/%FF", "", asWorker...)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	resp, body = e.raw("GET", "/v1/sessions/%FF", "", asWorker...)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	resp, body = e.raw("GET", base+"/poll", "", append(asWorker, "Anthropic-Worker-ID", "bad\xffid")...)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)

	// A token claimed with a key that is then revoked stops working with it.
	k2, err := e.api.Service.CreateKey(context.Background(), "test admin", sessions.KeyRequest{WorkspaceID: e.workspaceOf(t), EnvironmentID: s.envID})
	require.NoError(t, err)
	_, err = e.client.Beta.Sessions.Events.Send(context.Background(), other.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hello")}})
	require.NoError(t, err)
	asK2 := []string{"x-api-key", "", "authorization", "Bearer " + k2.Secret}
	require.Eventually(t, func() bool {
		resp, body = e.raw("GET", base+"/poll?block_ms=500", "", asK2...)
		return resp.StatusCode == http.StatusOK && body != "null"
	}, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, json.Unmarshal([]byte(body), &work))
	raw, err = base64.RawURLEncoding.DecodeString(work["secret"].(string))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &secret))
	asToken2 := []string{"x-api-key", "", "authorization", "Bearer " + secret.SessionsToken}
	resp, body = e.raw("GET", "/v1/sessions/"+other.ID, "", asToken2...)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	_, err = e.api.Service.RevokeKey(context.Background(), "test admin", k2.ID)
	require.NoError(t, err)
	resp, body = e.raw("GET", "/v1/sessions/"+other.ID, "", asToken2...)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
}

// managed-agents environment-worker serves a self-hosted environment with one of this
// project's sandbox providers: the call runs in the session's sandbox, which the next turn
// finds again, and which goes when the session is deleted.
func TestEnvironmentWorkerDispatcherLocalProvider(t *testing.T) {
	t.Parallel()
	s := newSelfHosted(t, 5*time.Second)
	sandboxes := t.TempDir()
	d, err := app.NewEnvironmentWorker(app.Config{ServerURL: s.e.srv.URL, EnvironmentID: s.envID, EnvironmentKey: s.envKey,
		Sandbox: "local", SandboxDir: sandboxes, EnvironmentWorkerConcurrency: 2, LogLevel: "error"}, option.WithMaxRetries(0))
	require.NoError(t, err)
	runDispatcher(t, d)

	s.send(toolMessage("echo kept > note.txt && pwd"))
	evs := s.untilIdle()
	msg := messageText(find(t, evs, "agent.message"))
	require.Contains(t, msg, sandboxes, "the call ran in the dispatcher's local sandbox")
	s.send(toolMessage("cat note.txt"))
	evs = s.untilIdle()
	require.Equal(t, "bash: kept", messageText(find(t, evs, "agent.message")))

	entries, err := os.ReadDir(sandboxes)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	// Deleting the session stops its work at once; the dispatcher then destroys the sandbox.
	_, err = s.e.client.Beta.Sessions.Delete(context.Background(), s.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Equal(t, "stopped", string(s.workItems(t)[0].State))
	require.Eventually(t, func() bool {
		entries, err := os.ReadDir(sandboxes)
		return err == nil && len(entries) == 0
	}, 30*time.Second, 200*time.Millisecond, "the deleted session's sandbox is still there")
}

// environment-worker with the docker provider: the session's calls run in a container of its
// own (uid 1000, /workspace, loopback only), which the deleted session's last item removes.
func TestEnvironmentWorkerDispatcherDockerProvider(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("docker", "image", "inspect", "managed-agents-sandbox:dev").CombinedOutput(); err != nil {
		t.Fatalf("the docker sandbox image is missing: run make sandbox-image (%v: %s)", err, out)
	}
	runner := managedAgentsBinary(t)
	s := newSelfHosted(t, 5*time.Second)
	d, err := app.NewEnvironmentWorker(app.Config{ServerURL: s.e.srv.URL, EnvironmentID: s.envID, EnvironmentKey: s.envKey,
		Sandbox: "docker", DockerRunner: runner, DockerDeployment: "test", LogLevel: "error"})
	require.NoError(t, err)
	runDispatcher(t, d)

	s.send(toolMessage("id -u; pwd; echo persisted > f.txt"))
	evs := s.untilIdle()
	require.Equal(t, "bash: 1000 /workspace", messageText(find(t, evs, "agent.message")))
	s.send(toolMessage("cat f.txt; grep -c : /proc/net/dev"))
	evs = s.untilIdle()
	require.Equal(t, "bash: persisted 1", messageText(find(t, evs, "agent.message")), "one container across the session's runs, loopback only")

	containers := func() string {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=managed-agents.session="+s.sessionID).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	require.NotEmpty(t, containers())
	_, err = s.e.client.Beta.Sessions.Delete(context.Background(), s.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return containers() == "" }, 60*time.Second, 250*time.Millisecond, "the deleted session's container is still there")
}

// `managed-agents admin keys create --environment` makes an environment key: confined to the
// environment, listed with it, rotated into a key of the same environment; a cloud
// environment gets none.
func TestAdminCLIEnvironmentKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bin := managedAgentsBinary(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"admin"}, args...)...)
		cmd.Env = append(os.Environ(), "MANAGED_AGENT_DATABASE_URL="+e.dbURL)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ctx := context.Background()
	ws := e.workspaceOf(t)
	hosted, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "hosted-here",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	require.NoError(t, err)
	cloud, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "cloud"})
	require.NoError(t, err)

	out, err := run("keys", "create", "--workspace", ws, "--environment", hosted.ID, "--label", "rack-1")
	require.NoError(t, err, out)
	require.Contains(t, out, "environment: "+hosted.ID)
	key, id := fieldOf(t, out, "key:"), fieldOf(t, out, "id:")
	stats := "/v1/environments/" + hosted.ID + "/work/stats"
	resp, body := e.raw("GET", stats, "", "x-api-key", key)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.raw("GET", "/v1/agents", "", "x-api-key", key)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)

	listing, err := run("keys", "list", "--workspace", ws)
	require.NoError(t, err, listing)
	require.Contains(t, listing, "(environment "+hosted.ID+")")

	rotated, err := run("keys", "rotate", id, "--json")
	require.NoError(t, err, rotated)
	var k struct {
		Key           string `json:"key"`
		EnvironmentID string `json:"environment_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(rotated[strings.Index(rotated, "{"):]), &k))
	require.Equal(t, hosted.ID, k.EnvironmentID)
	resp, body = e.raw("GET", stats, "", "x-api-key", k.Key)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	out, err = run("keys", "create", "--workspace", ws, "--environment", cloud.ID)
	require.Error(t, err)
	require.Contains(t, out, "is not self_hosted")
	out, err = run("keys", "create", "--workspace", ws, "--environment", "env_nope")
	require.Error(t, err)
	require.Contains(t, out, "not found")
}

// environment-worker with the kubernetes provider (envtest, the SandboxBinding controller and
// the test's kubelet): each session's calls run in a sandbox pod of its own, found again by
// the session's next run, and deleted with the session.
func TestEnvironmentWorkerDispatcherKubernetesProvider(t *testing.T) {
	t.Parallel()
	const ns = "sandboxes"
	c := kubetest.StartCluster(t)
	c.Namespace(t, ns)
	kubelet := kubetest.Start(t, c.Client, ns)
	c.RunSandboxController(t, controllers.SandboxPods{SandboxdImage: "managed-agents:test",
		Workers: controllers.PodPeer{Selector: map[string]string{"app.kubernetes.io/component": "environment-worker"}}})
	p, err := kubernetes.New(kubernetes.Config{Client: c.Client, Namespace: ns, Image: "sandbox:test", Port: kubelet.Port(),
		PollInterval: 20 * time.Millisecond, ReadyTimeout: time.Minute})
	require.NoError(t, err)

	s := newSelfHosted(t, 5*time.Second)
	d, err := dispatcher.New(dispatcher.Config{Client: anthropic.NewClient(option.WithBaseURL(s.e.srv.URL), option.WithAPIKey("unused")),
		EnvironmentID: s.envID, EnvironmentKey: s.envKey, Provider: p, Concurrency: 2, Logger: discardLogger()})
	require.NoError(t, err)
	runDispatcher(t, d)
	ctx := t.Context()

	s.send(toolMessage("echo in-a-pod > f.txt && cat f.txt"))
	evs := s.untilIdle()
	require.Equal(t, "bash: in-a-pod", messageText(find(t, evs, "agent.message")))
	var bindings v1alpha1.SandboxBindingList
	require.NoError(t, c.Client.List(ctx, &bindings, client.InNamespace(ns)))
	require.Len(t, bindings.Items, 1, "one sandbox for the session")
	s.send(toolMessage("cat f.txt"))
	evs = s.untilIdle()
	require.Equal(t, "bash: in-a-pod", messageText(find(t, evs, "agent.message")), "the session's next run finds its pod's files")

	_, err = s.e.client.Beta.Sessions.Delete(context.Background(), s.sessionID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var left v1alpha1.SandboxBindingList
		require.NoError(t, c.Client.List(ctx, &left, client.InNamespace(ns)))
		return len(left.Items) == 0
	}, 60*time.Second, 250*time.Millisecond, "the deleted session's sandbox is still there")
}
