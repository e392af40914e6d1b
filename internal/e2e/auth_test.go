//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"
)

// requireAPIErr asserts that err is the SDK's *anthropic.Error with the given status, error
// type and a message containing msgPart, and that its request id came from the server.
func requireAPIErr(t *testing.T, err error, status int, errType, msgPart string) *anthropic.Error {
	t.Helper()
	require.Error(t, err)
	var apiErr *anthropic.Error
	require.True(t, errors.As(err, &apiErr), "want *anthropic.Error, got %T: %v", err, err)
	require.Equal(t, status, apiErr.StatusCode, "body: %s", apiErr.RawJSON())
	require.Equal(t, errType, string(apiErr.Type()), "body: %s", apiErr.RawJSON())
	require.Contains(t, apiErr.Message, msgPart)
	require.True(t, strings.HasPrefix(apiErr.RequestID, "req_"), "request id %q", apiErr.RequestID)
	require.Equal(t, apiErr.RequestID, objectOf(t, apiErr.RawJSON())["request_id"])
	return apiErr
}

// objectOf decodes a JSON object.
func objectOf(t *testing.T, raw string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &m), "body: %s", raw)
	return m
}

// requireKeys asserts that obj has exactly the given keys: nullable fields must be present.
func requireKeys(t *testing.T, obj map[string]any, keys ...string) {
	t.Helper()
	got := make([]string, 0, len(obj))
	for k := range obj {
		got = append(got, k)
	}
	require.ElementsMatch(t, keys, got)
}

// errorBody is the envelope of API.md §9.1 as read by raw requests.
type errorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Details *struct {
			ErrorCode string `json:"error_code"`
		} `json:"details"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// requireRawErr asserts a raw response is the error envelope with the given status, type and
// message part, with the request-id header equal to the body's request_id.
func requireRawErr(t *testing.T, resp *http.Response, body string, status int, errType, msgPart string) errorBody {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, "body: %s", body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var eb errorBody
	require.NoError(t, json.Unmarshal([]byte(body), &eb), "body: %s", body)
	require.Equal(t, "error", eb.Type)
	require.Equal(t, errType, eb.Error.Type, "body: %s", body)
	require.Contains(t, eb.Error.Message, msgPart)
	require.True(t, strings.HasPrefix(eb.RequestID, "req_"), "request_id %q", eb.RequestID)
	require.Equal(t, eb.RequestID, resp.Header.Get("request-id"))
	return eb
}

// send performs a request built by the test and returns the response and its body.
func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestAuthAcceptsAPIKeyAndBearer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("auth")) // the SDK sends Authorization: Bearer

	for name, headers := range map[string][]string{
		"x-api-key":            {"x-api-key", e.key},
		"authorization bearer": {"x-api-key", "", "Authorization", "Bearer " + e.key},
		"lower-case scheme":    {"x-api-key", "", "Authorization", "bearer " + e.key},
	} {
		resp, body := e.raw(http.MethodGet, "/v1/agents/"+agent.ID, "", headers...)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", name, body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), name)
		require.Regexp(t, `^req_\w+$`, resp.Header.Get("request-id"), name)
		require.Equal(t, agent.ID, objectOf(t, body)["id"], name)
	}

	// WithAuthToken is the SDK's other credential option; it also sends a bearer.
	viaToken := anthropic.NewClient(option.WithBaseURL(e.srv.URL), option.WithAuthToken(e.key), option.WithMaxRetries(0))
	got, err := viaToken.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.Equal(t, agent.ID, got.ID)
}

func TestAuthRejectsMissingAndInvalidKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cases := map[string][]string{
		"no credentials":        {"x-api-key", ""},
		"unknown x-api-key":     {"x-api-key", "sk-unknown"},
		"unknown bearer":        {"x-api-key", "", "Authorization", "Bearer sk-unknown"},
		"basic auth":            {"x-api-key", "", "Authorization", "Basic " + e.key},
		"empty bearer":          {"x-api-key", "", "Authorization", "Bearer "},
		"no beta and no key":    {"x-api-key", "", "anthropic-beta", ""},
		"wrong key on create":   {"x-api-key", "sk-unknown"},
		"unregistered test key": {"x-api-key", "sk-test-0000"},
	}
	var shapes []errorBody
	for name, headers := range cases {
		method, path, body := http.MethodGet, "/v1/agents", ""
		if name == "wrong key on create" {
			method, path, body = http.MethodPost, "/v1/environments", `{"name":"never"}`
		}
		resp, raw := e.raw(method, path, body, headers...)
		eb := requireRawErr(t, resp, raw, http.StatusUnauthorized, "authentication_error", "")
		require.NotEmpty(t, eb.Error.Message, name)
		eb.RequestID = ""
		shapes = append(shapes, eb)
	}
	for _, s := range shapes[1:] {
		require.Equal(t, shapes[0], s, "missing and invalid keys get the same body")
	}

	bad := e.clientFor("sk-not-a-key")
	_, err := bad.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	apiErr := requireAPIErr(t, err, http.StatusUnauthorized, "authentication_error", shapes[0].Error.Message)
	require.Equal(t, anthropic.ErrorCode(""), apiErr.ErrorCode())

	page, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Data, "the unauthenticated create wrote nothing")
}

func TestAuthUnknownRouteIs404BeforeAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/nothing"},
		{http.MethodGet, "/v1/agents/agent_x/unknown"},
		{http.MethodDelete, "/v1/agents/agent_x"}, // agents cannot be deleted
		{http.MethodPut, "/v1/environments/env_x"},
		{http.MethodGet, "/"},
	} {
		for _, key := range []string{"", "sk-unknown", e.key} {
			resp, body := e.raw(tc.method, tc.path, "", "x-api-key", key)
			requireRawErr(t, resp, body, http.StatusNotFound, "not_found_error", "")
		}
	}
}

func TestAuthRequiresManagedAgentsBeta(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("beta"))

	for name, beta := range map[string]string{
		"no beta":    "",
		"other beta": "files-api-2025-04-14",
		"older beta": "managed-agents-2025-01-01",
		"as a part":  "managed-agents-2026-04-01-preview",
	} {
		resp, body := e.raw(http.MethodGet, "/v1/agents/"+agent.ID, "", "anthropic-beta", beta)
		eb := requireRawErr(t, resp, body, http.StatusNotFound, "not_found_error", "not found")
		require.Equal(t, "not found", eb.Error.Message, name)
		// A write without the beta is refused before it reaches the service.
		resp, body = e.raw(http.MethodPost, "/v1/environments", `{"name":"`+name+`"}`, "anthropic-beta", beta)
		requireRawErr(t, resp, body, http.StatusNotFound, "not_found_error", "not found")
	}
	page, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Data)

	// Through the SDK: replacing its beta header gives the same 404.
	_, err = e.client.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{}, option.WithHeader("anthropic-beta", "files-api-2025-04-14"))
	requireAPIErr(t, err, http.StatusNotFound, "not_found_error", "not found")

	// Extra betas are tolerated: the SDK joins them into one comma-separated header ...
	got, err := e.client.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{Betas: []anthropic.AnthropicBeta{"future-feature-2099-01-01"}})
	require.NoError(t, err)
	require.Equal(t, agent.ID, got.ID)
	// ... curl users write lists with spaces ...
	resp, body := e.raw(http.MethodGet, "/v1/agents/"+agent.ID, "", "anthropic-beta", "unknown-beta, managed-agents-2026-04-01 ,another")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	// ... and some clients repeat the header.
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/agents/"+agent.ID, nil)
	require.NoError(t, err)
	req.Header.Set("x-api-key", e.key)
	req.Header.Add("anthropic-beta", "files-api-2025-04-14")
	req.Header.Add("anthropic-beta", "managed-agents-2026-04-01")
	resp, body = send(t, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

func TestAuthToleratesQueryBetaAndVersionHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	resp, body := e.raw(http.MethodPost, "/v1/agents?beta=true", `{"name":"curl","model":"claude-opus-5"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	id := objectOf(t, body)["id"].(string)
	resp, body = e.raw(http.MethodGet, "/v1/agents/"+id+"?beta=true", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.raw(http.MethodGet, "/v1/agents?beta=true&limit=1", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	for _, version := range []string{"", "2023-06-01", "2026-10-21", "1999-01-01"} {
		resp, body = e.raw(http.MethodGet, "/v1/agents/"+id, "", "anthropic-version", version)
		require.Equal(t, http.StatusOK, resp.StatusCode, "anthropic-version %q: %s", version, body)
	}
	got, err := e.client.Beta.Agents.Get(ctx, id, anthropic.BetaAgentGetParams{}, option.WithHeaderDel("anthropic-version"))
	require.NoError(t, err)
	require.Equal(t, id, got.ID)
}

func TestAuthEnvelopeRequestIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := map[string]bool{}
	check := func(resp *http.Response, body string) {
		t.Helper()
		rid := resp.Header.Get("request-id")
		require.Regexp(t, `^req_\w+$`, rid)
		require.False(t, seen[rid], "request ids are unique")
		seen[rid] = true
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		if resp.StatusCode >= 400 {
			require.Equal(t, rid, objectOf(t, body)["request_id"])
		}
	}
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/environments", `{"name":"rid"}`},
		{http.MethodGet, "/v1/environments", ""},
		{http.MethodGet, "/v1/agents/agent_missing", ""},
		{http.MethodPost, "/v1/agents", `{"name":1}`},
		{http.MethodGet, "/v1/unknown", ""},
		{http.MethodGet, "/v1/agents?limit=0", ""},
	} {
		resp, body := e.raw(tc.method, tc.path, tc.body)
		check(resp, body)
	}
	resp, body := e.raw(http.MethodGet, "/v1/agents", "", "x-api-key", "sk-bad")
	check(resp, body)
	resp, body = e.raw(http.MethodGet, "/v1/agents", "", "anthropic-beta", "")
	check(resp, body)
	// Deletes answer 200 with a JSON body, never a bare 204.
	resp, body = e.raw(http.MethodPost, "/v1/environments", `{"name":"to delete"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.raw(http.MethodDelete, "/v1/environments/"+objectOf(t, body)["id"].(string), "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	check(resp, body)
}

func TestAuthEnvelopeBadBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("target"))
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "target"})
	endpoints := []string{"/v1/agents", "/v1/agents/" + agent.ID, "/v1/environments", "/v1/environments/" + env.ID}
	cases := []struct {
		name, body, msg string
	}{
		{"malformed JSON", `{"name":`, "malformed JSON"},
		{"broken token", `{"name": nope}`, "malformed JSON"},
		{"trailing data", `{} {}`, "after the JSON value"},
		{"not an object", `["name"]`, "expected an object"},
		{"empty body", ``, "JSON object"},
		{"null body", `null`, "request body must be a JSON object"},
		{"unknown top-level field", `{"name":"x","colour":"red"}`, `unknown field "colour"`},
		{"wrong type", `{"name":5}`, "name: expected a string"},
	}
	for _, path := range endpoints {
		for _, tc := range cases {
			resp, body := e.raw(http.MethodPost, path, tc.body)
			eb := requireRawErr(t, resp, body, http.StatusBadRequest, "invalid_request_error", "")
			require.Contains(t, eb.Error.Message, tc.msg, "%s %s", path, tc.name)
		}
	}

	// The SDK surfaces the same errors with their field names.
	_, err := e.client.Beta.Agents.New(ctx, agentParams("x"), option.WithJSONSet("colour", "red"))
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", `unknown field "colour"`)
	_, err = e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "x"}, option.WithJSONSet("name", 5))
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "name: expected a string")
	_, err = e.client.Beta.Agents.Update(ctx, agent.ID, anthropic.BetaAgentUpdateParams{}, option.WithJSONSet("system", []int{1}))
	requireAPIErr(t, err, http.StatusBadRequest, "invalid_request_error", "system")

	// Nothing was written by any of it.
	got, err := e.client.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Version)
	envs, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{env.ID}, environmentIDs(envs.Data))
	agents, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{agent.ID}, agentIDs(agents.Data))
}

func TestAuthEnvelopeBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := createAgent(t, e.client, agentParams("kept"))
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "kept"})
	big := `{"name":"` + strings.Repeat("a", 32<<20) + `","model":"claude-opus-5"}`
	for _, path := range []string{"/v1/agents", "/v1/environments", "/v1/agents/" + agent.ID, "/v1/environments/" + env.ID,
		"/v1/agents/" + agent.ID + "/archive", "/v1/environments/" + env.ID + "/archive"} {
		resp, body := e.raw(http.MethodPost, path, big)
		requireRawErr(t, resp, body, http.StatusRequestEntityTooLarge, "request_too_large", "32 MB")
	}
	ctx := context.Background()
	agents, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Equal(t, []string{agent.ID}, agentIDs(agents.Data))
	require.EqualValues(t, 1, agents.Data[0].Version)
	require.True(t, agents.Data[0].ArchivedAt.IsZero())
	envs, err := e.client.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.JSONEq(t, env.RawJSON(), envs.Data[0].RawJSON())
}

func TestAuthWorkspaceIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	agent := createAgent(t, e.client, agentParams("mine"))
	env := createEnvironment(t, e.client, anthropic.BetaEnvironmentNewParams{Name: "mine"})
	sess, err := newSession(t, e.client, agent.ID, env.ID)
	require.NoError(t, err)

	other := e.clientFor(e.newKey())
	notFound := func(err error, id string) {
		t.Helper()
		requireAPIErr(t, err, http.StatusNotFound, "not_found_error", id)
	}
	_, err = other.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{})
	notFound(err, agent.ID)
	_, err = other.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{Version: param.NewOpt(int64(1))})
	notFound(err, agent.ID)
	_, err = other.Beta.Agents.Update(ctx, agent.ID, anthropic.BetaAgentUpdateParams{Name: param.NewOpt("stolen")})
	notFound(err, agent.ID)
	_, err = other.Beta.Agents.Archive(ctx, agent.ID, anthropic.BetaAgentArchiveParams{})
	notFound(err, agent.ID)
	_, err = other.Beta.Agents.Versions.List(ctx, agent.ID, anthropic.BetaAgentVersionListParams{})
	notFound(err, agent.ID)

	_, err = other.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	notFound(err, env.ID)
	_, err = other.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Name: param.NewOpt("stolen")})
	notFound(err, env.ID)
	_, err = other.Beta.Environments.Archive(ctx, env.ID, anthropic.BetaEnvironmentArchiveParams{})
	notFound(err, env.ID)
	_, err = other.Beta.Environments.Delete(ctx, env.ID, anthropic.BetaEnvironmentDeleteParams{})
	notFound(err, env.ID)

	_, err = other.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	notFound(err, sess.ID)
	_, err = other.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	notFound(err, sess.ID)
	_, err = other.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{})
	notFound(err, sess.ID)
	// Another workspace cannot build a session from these parts either.
	otherEnv, err := other.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "theirs"})
	require.NoError(t, err)
	_, err = newSession(t, other, agent.ID, otherEnv.ID)
	notFound(err, agent.ID)
	otherAgent, err := other.Beta.Agents.New(ctx, agentParams("theirs"))
	require.NoError(t, err)
	_, err = newSession(t, other, otherAgent.ID, env.ID)
	notFound(err, env.ID)

	agents, err := other.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Equal(t, []string{otherAgent.ID}, agentIDs(agents.Data))
	envs, err := other.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Equal(t, []string{otherEnv.ID}, environmentIDs(envs.Data))
	sessions, err := other.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{IncludeArchived: param.NewOpt(true)})
	require.NoError(t, err)
	require.Empty(t, sessions.Data)

	// The owner's resources are untouched.
	got, err := e.client.Beta.Agents.Get(ctx, agent.ID, anthropic.BetaAgentGetParams{})
	require.NoError(t, err)
	require.Equal(t, "mine", got.Name)
	require.True(t, got.ArchivedAt.IsZero())
	gotEnv, err := e.client.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	require.NoError(t, err)
	require.Equal(t, "mine", gotEnv.Name)
	require.Empty(t, gotEnv.ArchivedAt)
	gotSess, err := e.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Nil(t, objectOf(t, gotSess.RawJSON())["archived_at"])
	mine, err := e.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{agent.ID}, agentIDs(mine.Data))
}
