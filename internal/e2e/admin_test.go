//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

const testAdminKey = "admin-test-key-0123456789abcdef"

// adminCall sends an admin API request with key and decodes the JSON answer.
func adminCall(t *testing.T, baseURL, key, method, path, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, baseURL+path, rd)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
	return resp.StatusCode, out
}

// adminKeyIn creates a workspace and a key in it through the admin HTTP API; it returns the
// workspace id, the key id and the secret.
func adminKeyIn(t *testing.T, e *env, name string) (wsID, keyID, secret string) {
	t.Helper()
	status, ws := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/workspaces", `{"name":"`+name+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", ws)
	wsID = ws["id"].(string)
	status, k := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys", `{"workspace_id":"`+wsID+`","label":"`+name+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", k)
	return wsID, k["id"].(string), k["key"].(string)
}

func TestAdminAPIAuthorisation(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey}, nil)

	status, body := adminCall(t, e.srv.URL, "", "GET", "/v1/admin/workspaces", "")
	require.Equal(t, http.StatusUnauthorized, status, "%v", body)
	status, body = adminCall(t, e.srv.URL, e.key, "GET", "/v1/admin/workspaces", "")
	require.Equal(t, http.StatusForbidden, status, "a workspace key never authorises the admin API: %v", body)
	require.Equal(t, "permission_error", body["error"].(map[string]any)["type"])
	status, _ = adminCall(t, e.srv.URL, testAdminKey+"x", "GET", "/v1/admin/workspaces", "")
	require.Equal(t, http.StatusUnauthorized, status)

	// An admin-flagged key works on the admin API, and nowhere else.
	status, k := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys", `{"admin":true,"label":"ops"}`)
	require.Equal(t, http.StatusOK, status, "%v", k)
	require.Nil(t, k["workspace_id"])
	adminSecret := k["key"].(string)
	require.True(t, strings.HasPrefix(adminSecret, "sk-ma-"))
	require.Equal(t, "sk-ma-…"+adminSecret[len(adminSecret)-4:], k["hint"])
	status, list := adminCall(t, e.srv.URL, adminSecret, "GET", "/v1/admin/keys", "")
	require.Equal(t, http.StatusOK, status, "%v", list)
	for _, item := range list["data"].([]any) {
		require.NotContains(t, item.(map[string]any), "key", "a listing never holds a secret")
	}
	adminClient := e.clientFor(adminSecret)
	_, err := adminClient.Beta.Agents.List(context.Background(), anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusForbidden, "permission_error", "admin key")

	// Bad input: clear 4xx in the error shape, nothing created.
	for _, tc := range []struct{ path, body string }{
		{"/v1/admin/keys", `{}`},
		{"/v1/admin/keys", `{"workspace_id":"wrkspc_nope"}`},
		{"/v1/admin/keys", `{"admin":true,"workspace_id":"wrkspc_x"}`},
		{"/v1/admin/keys", `{"admin":true,"expires_at":"2001-01-01T00:00:00Z"}`},
		{"/v1/admin/keys", `{"admin":true,"surprise":1}`},
		{"/v1/admin/workspaces", `{"name":""}`},
		{"/v1/admin/keys/apikey_nope/revoke", ``},
		{"/v1/admin/keys/apikey_nope/rotate", `{"grace_seconds":-1}`},
	} {
		status, body := adminCall(t, e.srv.URL, testAdminKey, "POST", tc.path, tc.body)
		require.Contains(t, []int{400, 404}, status, "%s %s: %v", tc.path, tc.body, body)
		require.Equal(t, "error", body["type"])
	}
}

// Keys made through the admin API isolate workspaces: B sees none of A's resources.
func TestAdminKeysIsolateWorkspaces(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey}, nil)
	ctx := context.Background()
	_, _, keyA := adminKeyIn(t, e, "team-a")
	_, _, keyB := adminKeyIn(t, e, "team-b")
	a, b := e.clientFor(keyA), e.clientFor(keyB)

	agent := createAgent(t, a, agentParams("a-agent"))
	environment := createEnvironment(t, a, anthropic.BetaEnvironmentNewParams{Name: "a-env"})
	sess, err := newSession(t, a, agent.ID, environment.ID)
	require.NoError(t, err)
	_, err = a.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hi")}})
	require.NoError(t, err)

	_, err = b.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", agent.ID)
	_, err = b.Beta.Environments.Get(ctx, environment.ID, anthropic.BetaEnvironmentGetParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", environment.ID)
	_, err = b.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", sess.ID)
	_, err = b.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", sess.ID)
	st := openStreamErr(t, b, sess.ID, anthropic.BetaSessionEventStreamParams{})
	requireAPIErr(t, st.Err(), http.StatusNotFound, "not_found_error", sess.ID)
	agents, err := b.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)
	require.Empty(t, agents.Data)
	sessions, err := b.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	require.NoError(t, err)
	require.Empty(t, sessions.Data)
	_, err = a.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err, "A still reaches its own session")
}

// Revoking a key refuses it at once and ends the streams it holds open.
func TestAdminRevokeEndsOpenStream(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey}, nil)
	ctx := context.Background()
	_, keyID, key := adminKeyIn(t, e, "revoked")
	c := e.clientFor(key)
	agent := createAgent(t, c, agentParams("r"))
	environment := createEnvironment(t, c, anthropic.BetaEnvironmentNewParams{Name: "r"})
	sess, err := newSession(t, c, agent.ID, environment.ID)
	require.NoError(t, err)
	st := openStream(t, c, sess.ID, anthropic.BetaSessionEventStreamParams{})

	status, body := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys/"+keyID+"/revoke", "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.NotNil(t, body["revoked_at"])

	// The open stream ends with an authentication error (no more events).
	for st.Next() {
		t.Fatalf("a revoked key's stream delivered %s", st.Current().Type)
	}
	requireAPIErr(t, st.Err(), http.StatusOK, "authentication_error", "revoked")
	_, err = c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", "")
	again := openStreamErr(t, c, sess.ID, anthropic.BetaSessionEventStreamParams{})
	requireAPIErr(t, again.Err(), http.StatusUnauthorized, "authentication_error", "")
}

// Rotation: the new key works, the old one is refused (at once, or after the grace).
func TestAdminRotateKey(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey}, nil)
	ctx := context.Background()
	wsID, keyID, oldKey := adminKeyIn(t, e, "rotating")
	agent := createAgent(t, e.clientFor(oldKey), agentParams("kept"))

	status, body := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys/"+keyID+"/rotate", "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	newKey, newKeyID := body["key"].(string), body["id"].(string)
	require.Equal(t, wsID, body["workspace_id"])
	require.Equal(t, "rotating", body["label"], "the new key keeps the label")
	require.NotNil(t, body["previous"].(map[string]any)["revoked_at"])

	oldClient, newClient := e.clientFor(oldKey), e.clientFor(newKey)
	_, err := oldClient.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", "")
	got, err := newClient.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err, "the new key reaches the same workspace")
	require.Equal(t, agent.ID, got.ID)

	// A revoked key cannot be rotated; rotating with a grace keeps the old key working.
	status, body = adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys/"+keyID+"/rotate", "")
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	status, body = adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys/"+newKeyID+"/rotate", `{"grace_seconds":3600}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Nil(t, body["previous"].(map[string]any)["revoked_at"])
	require.NotNil(t, body["previous"].(map[string]any)["expires_at"])
	_, err = newClient.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err, "within its grace the rotated key still works")
	third := e.clientFor(body["key"].(string))
	_, err = third.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)
}

// An expired key is refused, and a stream it holds ends at the expiry.
func TestAdminKeyExpiry(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey}, nil)
	ctx := context.Background()
	status, ws := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/workspaces", `{"name":"expiring"}`)
	require.Equal(t, http.StatusOK, status)
	expires := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	status, k := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys", `{"workspace_id":"`+ws["id"].(string)+`","expires_at":"`+expires+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", k)
	c := e.clientFor(k["key"].(string))
	agent := createAgent(t, c, agentParams("x"))
	environment := createEnvironment(t, c, anthropic.BetaEnvironmentNewParams{Name: "x"})
	sess, err := newSession(t, c, agent.ID, environment.ID)
	require.NoError(t, err)
	st := openStream(t, c, sess.ID, anthropic.BetaSessionEventStreamParams{})
	for st.Next() {
		t.Fatalf("unexpected event %s", st.Current().Type)
	}
	requireAPIErr(t, st.Err(), http.StatusOK, "authentication_error", "expired")
	_, err = c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", "")
}

// A key cached by another API replica is refused there as soon as it is revoked here: the
// revocation travels through PostgreSQL NOTIFY, not a cache TTL.
func TestAdminRevocationReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey}, nil)
	ctx := context.Background()
	replicaURL := e.replica(t, app.Config{})
	_, keyID, key := adminKeyIn(t, e, "two-replicas")
	c2 := anthropic.NewClient(option.WithBaseURL(replicaURL), option.WithAPIKey(key), option.WithMaxRetries(0))
	_, err := c2.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err, "the replica accepts (and caches) the key")

	status, body := adminCall(t, e.srv.URL, testAdminKey, "POST", "/v1/admin/keys/"+keyID+"/revoke", "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Eventually(t, func() bool {
		_, err := c2.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the other replica refuses the revoked key")
	_, err = c2.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", "")
}

// A revocation whose NOTIFY is lost still ends the key's open streams, within the key
// cache's TTL: the bound new requests have (docs/operations.md). A direct UPDATE of api_keys
// sends no notice; the TTL is shortened so the test is quick. Before the fix, such a stream
// stayed open until the client left, delivering events all along. A stream whose key is
// still valid outlives several rechecks.
func TestRevocationWithoutNoticeEndsOpenStream(t *testing.T) {
	t.Parallel()
	const ttl = 500 * time.Millisecond
	// endDeadline leaves a loaded machine room (20 TTLs); the stream's own deadline is
	// streamDeadline, later still.
	const endDeadline = 10 * time.Second
	e := newAPIEnv(t, app.Config{AdminKey: testAdminKey, KeyCacheTTL: ttl}, nil)
	ctx := context.Background()

	// kept is the env's own key (another workspace): never revoked.
	keptAgent := createAgent(t, e.client, agentParams("kept"))
	keptEnv := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "kept"})
	keptSess, err := newSession(t, e.client, keptAgent.ID, keptEnv.ID)
	require.NoError(t, err)
	kept := openStream(t, e.client, keptSess.ID, anthropic.BetaSessionEventStreamParams{})
	keptOpened := time.Now()

	_, keyID, key := adminKeyIn(t, e, "revoked-quietly")
	c := e.clientFor(key)
	agent := createAgent(t, c, agentParams("r"))
	environment := createEnvironment(t, c, anthropic.BetaEnvironmentNewParams{Name: "r"})
	sess, err := newSession(t, c, agent.ID, environment.ID)
	require.NoError(t, err)
	st := openStream(t, c, sess.ID, anthropic.BetaSessionEventStreamParams{})
	type end struct {
		delivered []string
		err       error
	}
	ended := make(chan end, 1)
	go func() {
		var got end
		for st.Next() {
			got.delivered = append(got.delivered, st.Current().Type)
		}
		got.err = st.Err()
		ended <- got
	}()

	tag, err := e.api.Store.Pool().Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, keyID)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	select {
	case got := <-ended:
		require.Empty(t, got.delivered, "a revoked key's stream delivered events")
		requireAPIErr(t, got.err, http.StatusOK, "authentication_error", "revoked")
	case <-time.After(endDeadline):
		t.Fatalf("the stream of a key revoked without notice is still open %s later (the key cache's TTL is %s)", endDeadline, ttl)
	}
	_, err = c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", "")
	again := openStreamErr(t, c, sess.ID, anthropic.BetaSessionEventStreamParams{})
	requireAPIErr(t, again.Err(), http.StatusUnauthorized, "authentication_error", "")

	// The valid key's stream has been checked again a few times by now and is still open.
	time.Sleep(time.Until(keptOpened.Add(3 * ttl)))
	sent, err := e.client.Beta.Sessions.Events.Send(ctx, keptSess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{interrupt()}})
	require.NoError(t, err)
	require.Equal(t, []string{sent.Data[0].ID}, streamIDs(nextEvents(t, kept, 1)))
}

// The README's key management: `managed-agents admin` against the database.
func TestAdminCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bin := managedAgentsBinary(t)
	var audit strings.Builder
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"admin"}, args...)...)
		cmd.Env = append(os.Environ(), "MANAGED_AGENT_DATABASE_URL="+e.dbURL)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		require.NoError(t, err, "admin %v: %s%s", args, stdout.String(), stderr.String())
		audit.WriteString(stderr.String())
		return stdout.String()
	}
	var ws struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(run("workspaces", "create", "cli-team", "--json")), &ws))
	require.True(t, strings.HasPrefix(ws.ID, "wrkspc_"))
	require.Contains(t, run("workspaces", "list"), ws.ID)

	out := run("keys", "create", "--workspace", ws.ID, "--label", "ci", "--expires-in", "24h")
	require.Contains(t, out, "The key is shown only now")
	key := fieldOf(t, out, "key:")
	id := fieldOf(t, out, "id:")
	c := e.clientFor(key)
	ctx := context.Background()
	_, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)

	listing := run("keys", "list", "--workspace", ws.ID)
	require.Contains(t, listing, id)
	require.Contains(t, listing, "active until")
	require.NotContains(t, listing, key, "a listing never shows a secret")

	// The CLI is another process: the API learns of its changes by NOTIFY, milliseconds later.
	refusedSoon := func(c anthropic.Client) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
			return err != nil
		}, 10*time.Second, 10*time.Millisecond)
		_, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
		requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", "")
	}
	rotated := run("keys", "rotate", id)
	newKey := fieldOf(t, rotated, "key:")
	refusedSoon(c)
	nc := e.clientFor(newKey)
	_, err = nc.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)

	run("keys", "revoke", fieldOf(t, rotated, "id:"))
	refusedSoon(nc)

	// Each action left an audit line naming the operator, whatever the log level.
	for _, action := range []string{"workspace.create", "key.create", "key.rotate", "key.revoke"} {
		require.Contains(t, audit.String(), "action="+action, "audit lines:\n%s", audit.String())
	}
	require.Contains(t, audit.String(), `actor="admin CLI (`)
	require.NotContains(t, audit.String(), key, "an audit line never holds a secret")

	// Errors are clear and exit non-zero.
	cmd := exec.Command(bin, "admin", "keys", "revoke", "apikey_nope")
	cmd.Env = append(os.Environ(), "MANAGED_AGENT_DATABASE_URL="+e.dbURL)
	msg, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(msg), "not found")
	cmd = exec.Command(bin, "admin", "workspaces", "list", "--data-dir", filepath.Join(t.TempDir(), "none"))
	cmd.Env = withoutEnv(os.Environ(), "MANAGED_AGENT_DATABASE_URL")
	msg, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(msg), "MANAGED_AGENT_DATABASE_URL is not set")
}

// fieldOf returns the value after label on its line of out.
func fieldOf(t *testing.T, out, label string) string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q line in:\n%s", label, out)
	return ""
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
