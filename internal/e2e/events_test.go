//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/store"
)

// Bodies of agent events as the runtime will append them (API.md §5.3).
const (
	askToolUseBody    = `{"name":"bash","input":{"command":"ls"},"evaluated_permission":"ask","evaluation":{"type":"always_ask"},"session_thread_id":null}`
	allowToolUseBody  = `{"name":"read","input":{"file_path":"a.txt"},"evaluated_permission":"allow","evaluation":{"type":"always_allow"},"session_thread_id":null}`
	denyToolUseBody   = `{"name":"write","input":{"file_path":"a.txt","content":"x"},"evaluated_permission":"deny","session_thread_id":null}`
	askMCPToolUseBody = `{"mcp_server_name":"docs","name":"search","input":{"q":"x"},"evaluated_permission":"ask","evaluation":{"type":"always_ask"},"session_thread_id":null}`
	customToolUseBody = `{"name":"lookup","input":{"word":"ship"},"session_thread_id":null}`
)

// agentEvent is a processed agent event to seed.
func agentEvent(typ, body string) store.NewEvent {
	return store.NewEvent{Type: typ, Body: json.RawMessage(body), Processed: true}
}

// sendRaw posts {"events": …} and returns the response.
func (e *env) sendRaw(sessionID, events string) (*http.Response, string) {
	e.t.Helper()
	return e.raw(http.MethodPost, "/v1/sessions/"+sessionID+"/events", `{"events":`+events+`}`)
}

// echoesOf decodes the data of a send response.
func echoesOf(t *testing.T, body string) []map[string]any {
	t.Helper()
	var page struct {
		Data []map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &page), body)
	return page.Data
}

func TestEventSendUserMessage(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})

	res, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
			{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "look at this"}},
			{OfImage: &anthropic.BetaManagedAgentsImageBlockParam{Source: anthropic.BetaManagedAgentsImageBlockSourceUnionParam{
				OfURL: &anthropic.BetaManagedAgentsURLImageSourceParam{URL: "https://example.com/cat.png"}}}},
			{OfDocument: &anthropic.BetaManagedAgentsDocumentBlockParam{Title: param.NewOpt("notes"), Source: anthropic.BetaManagedAgentsDocumentBlockSourceUnionParam{
				OfText: &anthropic.BetaManagedAgentsPlainTextDocumentSourceParam{Data: "plain words"}}}},
		}}},
	}})
	require.NoError(t, err)
	requireKeys(t, objectOf(t, res.RawJSON()), "data")
	require.Len(t, res.Data, 1)
	echo := res.Data[0]
	require.Equal(t, "user.message", echo.Type)
	require.True(t, strings.HasPrefix(echo.ID, "sevt_"), echo.ID)
	obj := objectOf(t, echo.RawJSON())
	requireKeys(t, obj, "type", "id", "content", "processed_at")
	require.Nil(t, obj["processed_at"], "queued: processed_at is null until a turn takes it")
	require.JSONEq(t, `[{"type":"text","text":"look at this"},{"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}},
		{"type":"document","title":"notes","source":{"type":"text","media_type":"text/plain","data":"plain words"}}]`,
		jsonOf(t, obj["content"]))

	// The log holds exactly the echo.
	page, err := f.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{})
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	require.JSONEq(t, echo.RawJSON(), page.Data[0].RawJSON())

	// Sending is a 404 for unknown sessions and for sessions of other workspaces.
	_, err = f.client.Beta.Sessions.Events.Send(ctx, "sesn_missing", anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("x")}})
	requireAPIErr(t, err, 404, "not_found_error", "sesn_missing")
	other := f.clientFor(f.newKey())
	_, err = other.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("x")}})
	requireAPIErr(t, err, 404, "not_found_error", sess.ID)
	require.Len(t, f.eventsOf(sess.ID), 1)
}

func TestEventSendKeepsRequestOrder(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("zero").OfUserMessage}}})

	res, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		userMessage("one"),
		{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}},
		userMessage("two"),
		userMessage("three"),
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"user.message", "user.interrupt", "user.message", "user.message"},
		[]string{res.Data[0].Type, res.Data[1].Type, res.Data[2].Type, res.Data[3].Type})
	for i, text := range map[int]string{0: "one", 2: "two", 3: "three"} {
		require.JSONEq(t, fmt.Sprintf(`[{"type":"text","text":%q}]`, text), jsonOf(t, objectOf(t, res.Data[i].RawJSON())["content"]))
	}

	res2, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("four")}})
	require.NoError(t, err)

	// The log is the initial event, then every echo in request order, then the next request.
	evs := f.eventsOf(sess.ID)
	require.Len(t, evs, 6)
	want := []string{evs[0]["id"].(string), res.Data[0].ID, res.Data[1].ID, res.Data[2].ID, res.Data[3].ID, res2.Data[0].ID}
	seen := map[string]bool{}
	for i, ev := range evs {
		require.Equal(t, want[i], ev["id"], "log position %d", i)
		require.False(t, seen[want[i]], "duplicate id %s", want[i])
		seen[want[i]] = true
	}
}

func TestEventInterrupt(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})

	// On an idle session there is nothing to stop: the interrupt is processed at once.
	resp, body := f.sendRaw(sess.ID, `[{"type":"user.interrupt"}]`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	echo := echoesOf(t, body)[0]
	requireKeys(t, echo, "type", "id", "processed_at")
	require.Equal(t, "user.interrupt", echo["type"])
	processed, err := time.Parse(time.RFC3339Nano, echo["processed_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), processed, time.Hour)
	require.Equal(t, "idle", objectOf(t, mustGetRaw(t, f.env, "/v1/sessions/"+sess.ID))["status"])

	// On a running session it waits (processed_at null) until the runtime applies it.
	f.setSessionStatus(sess.ID, "running")
	resp, body = f.sendRaw(sess.ID, `[{"type":"user.interrupt"}]`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Nil(t, echoesOf(t, body)[0]["processed_at"])

	// Multiagent threads do not exist here, so naming one is an error.
	resp, body = f.sendRaw(sess.ID, `[{"type":"user.interrupt","session_thread_id":"sthr_1"}]`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "session_thread_id")
	require.Len(t, f.eventsOf(sess.ID), 2)
}

// mustGetRaw GETs a path and returns the 200 body.
func mustGetRaw(t *testing.T, e *env, path string) string {
	t.Helper()
	resp, body := e.raw(http.MethodGet, path, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	return body
}

func TestEventSendValidation(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("hi").OfUserMessage}}})
	msg := `{"type":"user.message","content":[{"type":"text","text":"ok"}]}`

	cases := []struct {
		name, events, msgPart, code string
	}{
		{"missing content", `[{"type":"user.message"}]`, "events[0].content", ""},
		{"empty content", `[{"type":"user.message","content":[]}]`, "events[0].content", ""},
		{"null content", `[{"type":"user.message","content":null}]`, "events[0].content", ""},
		{"missing type", `[{"content":[{"type":"text","text":"x"}]}]`, "events[0].type", ""},
		{"unknown event type", `[{"type":"user.shout","content":[{"type":"text","text":"x"}]}]`, "user.shout", ""},
		{"server event type", `[{"type":"agent.message","content":[{"type":"text","text":"x"}]}]`, "agent.message", ""},
		{"unknown field", `[{"type":"user.message","content":[{"type":"text","text":"x"}],"priority":1}]`, "priority", ""},
		{"field of another type", `[{"type":"user.message","content":[{"type":"text","text":"x"}],"tool_use_id":"sevt_1"}]`, "tool_use_id", ""},
		{"text block without text", `[{"type":"user.message","content":[{"type":"text"}]}]`, "content[0].text", ""},
		{"unknown block field", `[{"type":"user.message","content":[{"type":"text","text":"x","bold":true}]}]`, "bold", ""},
		{"image without source", `[{"type":"user.message","content":[{"type":"image"}]}]`, "content[0].source", ""},
		{"image with a text source", `[{"type":"user.message","content":[{"type":"image","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]`, "content[0].source", ""},
		{"url source without url", `[{"type":"user.message","content":[{"type":"image","source":{"type":"url"}}]}]`, "content[0].source", ""},
		{"redacted block with text", `[{"type":"user.message","content":[{"type":"redacted","text":"x"}]}]`, "content[0]", ""},
		{"redacted block", `[{"type":"user.message","content":[{"type":"text","text":"x"},{"type":"redacted"}]}]`, "content[1].type", ""},
		{"file source (no Files API yet)", `[{"type":"user.message","content":[{"type":"image","source":{"type":"file","file_id":"file_1"}}]}]`, "Files API", ""},
		{"image over 5 MB", `[{"type":"user.message","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.Repeat("AAAA", (5<<20)/4+1) + `"}}]}]`, "at most 5242880 bytes of base64", ""},
		{"search_result in a message", `[{"type":"user.message","content":[{"type":"search_result","source":"https://a","title":"a","content":[]}]}]`, "content[0].type", ""},
		{"deny_message with allow", `[{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"allow","deny_message":"no"}]`, "deny_message", ""},
		{"confirmation without result", `[{"type":"user.tool_confirmation","tool_use_id":"sevt_1"}]`, "result", ""},
		{"confirmation with a bad result", `[{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"maybe"}]`, "result", ""},
		{"confirmation without tool_use_id", `[{"type":"user.tool_confirmation","result":"allow"}]`, "tool_use_id", ""},
		{"custom result without id", `[{"type":"user.custom_tool_result","content":[{"type":"text","text":"x"}]}]`, "custom_tool_use_id", ""},
		{"user.tool_result on a cloud environment", `[{"type":"user.tool_result","tool_use_id":"sevt_1","content":[{"type":"text","text":"x"}]}]`, "self_hosted", ""},
		{"system.message not last", `[{"type":"system.message","content":[{"type":"text","text":"be nice"}]},` + msg + `]`, "must be the last event", ""},
		{"system.message alone", `[{"type":"system.message","content":[{"type":"text","text":"be nice"}]}]`, "must come right after", ""},
		{"system.message after an interrupt", `[{"type":"user.interrupt"},{"type":"system.message","content":[{"type":"text","text":"be nice"}]}]`, "must come right after", ""},
		{"system.message with an image", `[` + msg + `,{"type":"system.message","content":[{"type":"image","source":{"type":"url","url":"https://a/b.png"}}]}]`, "content[0].type", ""},
		{"user.define_outcome", `[{"type":"user.define_outcome","description":"a report","rubric":{"type":"text","content":"complete"}}]`, "user.define_outcome", ""},
		{"no events", `[]`, "events", ""},
		{"events not an array", `{}`, "events", ""},
		{"event not an object", `["user.message"]`, "events[0]", ""},
		{"one bad event in a batch", `[` + msg + `,` + msg + `,{"type":"user.message","content":[{"type":"image"}]}]`, "events[2]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.sendRaw(sess.ID, tc.events)
			eb := requireRawErr(t, resp, body, 400, "invalid_request_error", tc.msgPart)
			if tc.code != "" {
				require.NotNil(t, eb.Error.Details, body)
				require.Equal(t, tc.code, eb.Error.Details.ErrorCode)
			}
		})
	}
	resp, body := f.raw(http.MethodPost, "/v1/sessions/"+sess.ID+"/events", `{"events":[`+msg+`],"stream":true}`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "stream")
	resp, body = f.raw(http.MethodPost, "/v1/sessions/"+sess.ID+"/events", `{}`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "events")

	// Nothing of any rejected request reached the log.
	evs := f.eventsOf(sess.ID)
	require.Len(t, evs, 1)
	require.Equal(t, "user.message", evs[0]["type"])
}

// answerFixture is a session whose log holds one agent event of each kind a client answers.
type answerFixture struct {
	*sessionFixture
	sessionID                                 string
	askUse, allowUse, denyUse, mcpUse, custom string
	message                                   string
}

func newAnswerFixture(t *testing.T) *answerFixture {
	t.Helper()
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	evs := f.seedEvents(sess.ID, time.Now(),
		agentEvent("agent.tool_use", askToolUseBody),
		agentEvent("agent.tool_use", allowToolUseBody),
		agentEvent("agent.tool_use", denyToolUseBody),
		agentEvent("agent.mcp_tool_use", askMCPToolUseBody),
		agentEvent("agent.custom_tool_use", customToolUseBody),
		agentEvent("agent.message", `{"content":[{"type":"text","text":"hold on"}]}`),
	)
	return &answerFixture{sessionFixture: f, sessionID: sess.ID, askUse: evs[0].ID, allowUse: evs[1].ID, denyUse: evs[2].ID,
		mcpUse: evs[3].ID, custom: evs[4].ID, message: evs[5].ID}
}

func confirmation(id, result string) string {
	return fmt.Sprintf(`{"type":"user.tool_confirmation","tool_use_id":%q,"result":%q}`, id, result)
}

func customResult(id, text string) string {
	return fmt.Sprintf(`{"type":"user.custom_tool_result","custom_tool_use_id":%q,"content":[{"type":"text","text":%q}]}`, id, text)
}

func TestEventToolAnswersRejected(t *testing.T) {
	t.Parallel()
	f := newAnswerFixture(t)
	otherSession := f.newSession(t, anthropic.BetaSessionNewParams{})
	foreign := f.seedEvents(otherSession.ID, time.Now(), agentEvent("agent.tool_use", askToolUseBody))[0].ID

	cases := []struct{ name, events, msgPart string }{
		{"unknown tool_use_id", `[` + confirmation("sevt_missing", "allow") + `]`, "sevt_missing"},
		{"tool_use of another session", `[` + confirmation(foreign, "allow") + `]`, foreign},
		{"confirming a custom tool call", `[` + confirmation(f.custom, "allow") + `]`, "agent.custom_tool_use"},
		{"confirming a message", `[` + confirmation(f.message, "allow") + `]`, "agent.message"},
		{"confirming an allowed call", `[` + confirmation(f.allowUse, "allow") + `]`, "does not await confirmation"},
		{"confirming a denied call", `[` + confirmation(f.denyUse, "allow") + `]`, "does not await confirmation"},
		{"custom result for a built-in call", `[` + customResult(f.askUse, "x") + `]`, "agent.tool_use"},
		{"custom result for an unknown id", `[` + customResult("sevt_missing", "x") + `]`, "sevt_missing"},
		{"confirmed twice in one request", `[` + confirmation(f.askUse, "allow") + `,` + confirmation(f.askUse, "deny") + `]`, "twice"},
		{"custom result twice in one request", `[` + customResult(f.custom, "a") + `,` + customResult(f.custom, "b") + `]`, "twice"},
		{"a good answer next to a bad one", `[` + confirmation(f.askUse, "allow") + `,` + confirmation(f.allowUse, "allow") + `]`, "events[1]"},
		{"custom result with a bad block", `[{"type":"user.custom_tool_result","custom_tool_use_id":"` + f.custom + `","content":[{"type":"redacted"}]}]`, "content[0].type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.sendRaw(f.sessionID, tc.events)
			requireRawErr(t, resp, body, 400, "invalid_request_error", tc.msgPart)
		})
	}
	require.Len(t, f.eventsOf(f.sessionID), 6, "rejected answers write nothing")
}

func TestEventToolConfirmation(t *testing.T) {
	t.Parallel()
	f := newAnswerFixture(t)
	ctx := context.Background()

	res, err := f.client.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{ToolUseID: f.askUse, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}},
		{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{ToolUseID: f.mcpUse, Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultDeny, DenyMessage: param.NewOpt("not that server")}},
	}})
	require.NoError(t, err)
	require.Len(t, res.Data, 2)

	allow := objectOf(t, res.Data[0].RawJSON())
	requireKeys(t, allow, "type", "id", "tool_use_id", "result", "session_thread_id", "processed_at")
	require.Equal(t, "user.tool_confirmation", allow["type"])
	require.Equal(t, f.askUse, allow["tool_use_id"])
	require.Equal(t, "allow", allow["result"])
	require.Nil(t, allow["session_thread_id"])
	// Answers apply on receipt, ahead of the run resuming (API.md §17).
	require.NotNil(t, allow["processed_at"])
	require.False(t, res.Data[0].ProcessedAt.IsZero())

	deny := objectOf(t, res.Data[1].RawJSON())
	requireKeys(t, deny, "type", "id", "tool_use_id", "result", "deny_message", "session_thread_id", "processed_at")
	require.Equal(t, f.mcpUse, deny["tool_use_id"])
	require.Equal(t, "deny", deny["result"])
	require.Equal(t, "not that server", deny["deny_message"])

	// A session_thread_id sent along is accepted and ignored: answers route by event id.
	another := f.seedEvents(f.sessionID, time.Now(), agentEvent("agent.tool_use", askToolUseBody))[0].ID
	resp, body := f.sendRaw(f.sessionID, `[{"type":"user.tool_confirmation","tool_use_id":"`+another+`","result":"allow","session_thread_id":"sthr_primary"}]`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Nil(t, echoesOf(t, body)[0]["session_thread_id"])

	// A later second answer to either call is refused.
	for _, id := range []string{f.askUse, f.mcpUse} {
		resp, body := f.sendRaw(f.sessionID, `[`+confirmation(id, "deny")+`]`)
		requireRawErr(t, resp, body, 400, "invalid_request_error", "already answered")
	}
	evs := f.eventsOf(f.sessionID)
	require.Len(t, evs, 10)
	require.JSONEq(t, res.Data[0].RawJSON(), jsonOf(t, evs[6]))
	require.JSONEq(t, res.Data[1].RawJSON(), jsonOf(t, evs[7]))
}

func TestEventCustomToolResult(t *testing.T) {
	t.Parallel()
	f := newAnswerFixture(t)
	ctx := context.Background()

	res, err := f.client.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{CustomToolUseID: f.custom, IsError: param.NewOpt(false),
			Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "a vessel"}}}}},
	}})
	require.NoError(t, err)
	echo := objectOf(t, res.Data[0].RawJSON())
	requireKeys(t, echo, "type", "id", "custom_tool_use_id", "content", "is_error", "session_thread_id", "processed_at")
	require.Equal(t, "user.custom_tool_result", echo["type"])
	require.Equal(t, f.custom, echo["custom_tool_use_id"])
	require.Equal(t, false, echo["is_error"])
	require.Nil(t, echo["session_thread_id"])
	require.JSONEq(t, `[{"type":"text","text":"a vessel"}]`, jsonOf(t, echo["content"]))
	// Custom tool results are processed on receipt (API.md §5.1).
	require.NotNil(t, echo["processed_at"])
	require.False(t, res.Data[0].ProcessedAt.IsZero())

	resp, body := f.sendRaw(f.sessionID, `[`+customResult(f.custom, "again")+`]`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "already answered")
	evs := f.eventsOf(f.sessionID)
	require.Len(t, evs, 7)
	require.JSONEq(t, res.Data[0].RawJSON(), jsonOf(t, evs[6]))

	// content is optional.
	second := f.seedEvents(f.sessionID, time.Now(), agentEvent("agent.custom_tool_use", customToolUseBody))[0].ID
	resp, body = f.sendRaw(f.sessionID, `[{"type":"user.custom_tool_result","custom_tool_use_id":"`+second+`","is_error":true}]`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	requireKeys(t, echoesOf(t, body)[0], "type", "id", "custom_tool_use_id", "is_error", "session_thread_id", "processed_at")
}

func TestEventToolResultOnSelfHosted(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	selfHosted, err := f.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "workers",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	require.NoError(t, err)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{EnvironmentID: selfHosted.ID})
	evs := f.seedEvents(sess.ID, time.Now(),
		agentEvent("agent.tool_use", allowToolUseBody),
		agentEvent("agent.tool_use", askToolUseBody),
		agentEvent("agent.tool_use", askToolUseBody),
		agentEvent("agent.tool_use", denyToolUseBody),
		agentEvent("agent.mcp_tool_use", askMCPToolUseBody),
	)
	allowed, asked, refused, denied, mcp := evs[0].ID, evs[1].ID, evs[2].ID, evs[3].ID, evs[4].ID
	toolResult := func(id string) string {
		return fmt.Sprintf(`[{"type":"user.tool_result","tool_use_id":%q,"content":[{"type":"text","text":"done"}],"is_error":false}]`, id)
	}

	// The worker answers an allowed call directly; the echo is processed on receipt.
	resp, body := f.sendRaw(sess.ID, toolResult(allowed))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	echo := echoesOf(t, body)[0]
	requireKeys(t, echo, "type", "id", "tool_use_id", "content", "is_error", "session_thread_id", "processed_at")
	require.Equal(t, allowed, echo["tool_use_id"])
	require.NotNil(t, echo["processed_at"])
	resp, body = f.sendRaw(sess.ID, toolResult(allowed))
	requireRawErr(t, resp, body, 400, "invalid_request_error", "already answered")

	// An ask-gated call runs only after an allow: the result before it, or after a deny, is
	// refused; after the allow the worker's result is accepted (the SDK worker's flow).
	resp, body = f.sendRaw(sess.ID, toolResult(asked))
	requireRawErr(t, resp, body, 400, "invalid_request_error", "confirmation")
	resp, body = f.sendRaw(sess.ID, `[`+confirmation(asked, "allow")+`,`+confirmation(refused, "deny")+`]`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = f.sendRaw(sess.ID, toolResult(asked))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, asked, echoesOf(t, body)[0]["tool_use_id"])
	resp, body = f.sendRaw(sess.ID, toolResult(refused))
	requireRawErr(t, resp, body, 400, "invalid_request_error", "denied")
	// A call the policy denied never runs.
	resp, body = f.sendRaw(sess.ID, toolResult(denied))
	requireRawErr(t, resp, body, 400, "invalid_request_error", "denied")
	// user.tool_result answers built-in calls only.
	resp, body = f.sendRaw(sess.ID, toolResult(mcp))
	requireRawErr(t, resp, body, 400, "invalid_request_error", "agent.mcp_tool_use")

	types := []string{}
	for _, ev := range f.eventsOf(sess.ID)[5:] {
		types = append(types, ev["type"].(string))
	}
	require.Equal(t, []string{"user.tool_result", "user.tool_confirmation", "user.tool_confirmation", "user.tool_result"}, types)
}

// eventIDs lists the ids of listed events.
func eventIDs(evs []anthropic.BetaManagedAgentsSessionEventUnion) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func TestEventList(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})

	// A queued message (processed_at null), then agent events whose processed_at does not
	// follow log order: the list is in log order and created_at[...] compares processed_at.
	res, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("go")}})
	require.NoError(t, err)
	queued := res.Data[0].ID
	base := time.Now().UTC().Truncate(time.Microsecond).Add(time.Hour)
	t0, t1, t2 := base, base.Add(time.Hour), base.Add(2*time.Hour)
	late := f.seedEvents(sess.ID, t2, agentEvent("agent.message", `{"content":[{"type":"text","text":"late"}]}`))[0].ID
	early := f.seedEvents(sess.ID, t0, agentEvent("span.model_request_start", `{}`), agentEvent("agent.thinking", `{}`))
	start, thinking := early[0].ID, early[1].ID
	middle := f.seedEvents(sess.ID, t1, agentEvent("agent.message", `{"content":[{"type":"text","text":"middle"}]}`))[0].ID
	logOrder := []string{queued, late, start, thinking, middle}

	list := func(p anthropic.BetaSessionEventListParams) []string {
		t.Helper()
		page, err := f.client.Beta.Sessions.Events.List(ctx, sess.ID, p)
		require.NoError(t, err)
		require.False(t, page.JSON.NextPage.Valid(), "one page: no next_page")
		return eventIDs(page.Data)
	}
	reversed := []string{middle, thinking, start, late, queued}
	require.Equal(t, logOrder, list(anthropic.BetaSessionEventListParams{}))
	require.Equal(t, logOrder, list(anthropic.BetaSessionEventListParams{Order: "asc"}))
	require.Equal(t, reversed, list(anthropic.BetaSessionEventListParams{Order: "desc"}))

	require.Equal(t, []string{late, middle}, list(anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.message"}}))
	require.Equal(t, []string{queued, late, middle}, list(anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.message", "user.message"}}))
	require.Empty(t, list(anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"session.error"}}))

	require.Equal(t, []string{late, middle}, list(anthropic.BetaSessionEventListParams{CreatedAtGte: param.NewOpt(t1)}))
	require.Equal(t, []string{start, thinking}, list(anthropic.BetaSessionEventListParams{CreatedAtLt: param.NewOpt(t1)}))
	require.Equal(t, []string{late, middle}, list(anthropic.BetaSessionEventListParams{CreatedAtGt: param.NewOpt(t0), CreatedAtLte: param.NewOpt(t2)}))
	require.Equal(t, []string{middle}, list(anthropic.BetaSessionEventListParams{CreatedAtGt: param.NewOpt(t0), CreatedAtLt: param.NewOpt(t2)}))
	require.Equal(t, []string{thinking, start}, list(anthropic.BetaSessionEventListParams{Order: "desc", CreatedAtGte: param.NewOpt(t0), CreatedAtLte: param.NewOpt(t0)}))
	require.Equal(t, []string{middle}, list(anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.message", "user.message"}, CreatedAtLt: param.NewOpt(t2)}))

	// Typed decoding through the SDK.
	page, err := f.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Order: "desc", Limit: param.NewOpt(int64(1))})
	require.NoError(t, err)
	require.Equal(t, "agent.message", page.Data[0].Type)
	require.Equal(t, "middle", page.Data[0].AsAgentMessage().Content[0].Text)
	require.True(t, page.Data[0].ProcessedAt.Equal(t1), "processed_at %s", page.Data[0].ProcessedAt)
}

func TestEventListPages(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	var all []string
	for i := range 7 {
		typ, body := "agent.message", fmt.Sprintf(`{"content":[{"type":"text","text":"m%d"}]}`, i)
		if i%3 == 0 {
			typ, body = "agent.thinking", `{}`
		}
		all = append(all, f.seedEvents(sess.ID, time.Now(), agentEvent(typ, body))[0].ID)
	}
	thinking := []string{all[0], all[3], all[6]}

	walk := func(p anthropic.BetaSessionEventListParams) ([]string, int) {
		t.Helper()
		var ids []string
		pages := 0
		for {
			page, err := f.client.Beta.Sessions.Events.List(ctx, sess.ID, p)
			require.NoError(t, err)
			pages++
			ids = append(ids, eventIDs(page.Data)...)
			if page.NextPage == "" {
				require.NotContains(t, objectOf(t, page.RawJSON()), "next_page")
				require.NotContains(t, objectOf(t, page.RawJSON()), "prev_page", "only the sessions list has prev_page")
				return ids, pages
			}
			p.Page = param.NewOpt(page.NextPage)
		}
	}
	ids, pages := walk(anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(3))})
	require.Equal(t, all, ids)
	require.Equal(t, 3, pages)
	ids, pages = walk(anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(7))})
	require.Equal(t, all, ids)
	require.Equal(t, 1, pages)
	ids, _ = walk(anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(2)), Order: "desc"})
	want := append([]string(nil), all...)
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	require.Equal(t, want, ids)
	ids, pages = walk(anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(1)), Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.thinking"}})
	require.Equal(t, thinking, ids)
	require.Equal(t, 3, pages)

	// The SDK's auto-pager re-sends the filters with each cursor.
	var walked []string
	iter := f.client.Beta.Sessions.Events.ListAutoPaging(ctx, sess.ID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(2))})
	for iter.Next() {
		walked = append(walked, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, all, walked)
	walked = nil
	iter = f.client.Beta.Sessions.Events.ListAutoPaging(ctx, sess.ID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(2)), Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.message"}})
	for iter.Next() {
		walked = append(walked, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	require.Equal(t, []string{all[1], all[2], all[4], all[5]}, walked)

	// Bad parameters.
	first, err := f.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(2))})
	require.NoError(t, err)
	_, err = f.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Order: "desc", Page: param.NewOpt(first.NextPage)})
	requireAPIErr(t, err, 400, "invalid_request_error", "page token order does not match request")
	_, err = f.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.shout"}})
	requireAPIErr(t, err, 400, "invalid_request_error", "agent.shout")
	for _, q := range []string{"limit=0", "limit=1001", "order=random", "page=nonsense", "created_at[lt]=tomorrow", "types[]=session.deleted"} {
		resp, body := f.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/events?"+q, "")
		requireRawErr(t, resp, body, 400, "invalid_request_error", "")
	}
	resp, body := f.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/events?limit=1000", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	_, err = f.client.Beta.Sessions.Events.List(ctx, "sesn_missing", anthropic.BetaSessionEventListParams{})
	requireAPIErr(t, err, 404, "not_found_error", "sesn_missing")
}
