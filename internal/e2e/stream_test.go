//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/httpapi"
	"github.com/managed-agents/managed-agents/internal/store"
)

// streamDeadline only keeps a missing frame from hanging the suite; no assertion depends on it.
const streamDeadline = 30 * time.Second

type sdkStream = ssestream.Stream[anthropic.BetaManagedAgentsStreamSessionEventsUnion]

// openStream opens a session stream with the SDK and requires that it opened.
func openStream(t *testing.T, c anthropic.Client, sessionID string, p anthropic.BetaSessionEventStreamParams, opts ...option.RequestOption) *sdkStream {
	t.Helper()
	st := openStreamErr(t, c, sessionID, p, opts...)
	require.NoError(t, st.Err())
	return st
}

// openStreamErr opens a session stream with the SDK; a refused stream carries its error.
func openStreamErr(t *testing.T, c anthropic.Client, sessionID string, p anthropic.BetaSessionEventStreamParams, opts ...option.RequestOption) *sdkStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
	st := c.Beta.Sessions.Events.StreamEvents(ctx, sessionID, p, opts...)
	t.Cleanup(func() {
		cancel()
		_ = st.Close()
	})
	return st
}

// nextEvents reads n events from the stream.
func nextEvents(t *testing.T, st *sdkStream, n int) []anthropic.BetaManagedAgentsStreamSessionEventsUnion {
	t.Helper()
	out := make([]anthropic.BetaManagedAgentsStreamSessionEventsUnion, 0, n)
	for len(out) < n {
		require.True(t, st.Next(), "stream ended after %d of %d events: %v", len(out), n, st.Err())
		out = append(out, st.Current())
	}
	return out
}

func streamIDs(evs []anthropic.BetaManagedAgentsStreamSessionEventsUnion) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// requireNextIs proves nothing is pending on the streams: it appends a sentinel event and
// requires it to be the very next frame of each (a duplicate or a stray replay would come
// first).
func (e *env) requireNextIs(t *testing.T, sessionID string, streams ...*sdkStream) {
	t.Helper()
	sentinel := e.seedEvents(sessionID, time.Now(), agentEvent("agent.thinking", `{}`))[0].ID
	for _, st := range streams {
		require.Equal(t, []string{sentinel}, streamIDs(nextEvents(t, st, 1)))
	}
}

// rawStream is a stream read line by line, to check the exact bytes on the wire.
type rawStream struct {
	resp *http.Response
	r    *bufio.Reader
}

// openRawStream GETs baseURL+path with curl-like headers (x-api-key, the beta); extra
// header pairs override them.
func (e *env) openRawStream(t *testing.T, baseURL, path string, headers ...string) *rawStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+path, nil)
	require.NoError(t, err)
	req.Header.Set("x-api-key", e.key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", "managed-agents-2026-04-01")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
	})
	return &rawStream{resp: resp, r: bufio.NewReader(resp.Body)}
}

// frame reads the lines of the next frame, without the blank line that ends it.
func (s *rawStream) frame(t *testing.T) []string {
	t.Helper()
	var lines []string
	for {
		line, err := s.r.ReadString('\n')
		require.NoError(t, err, "frame so far: %q", lines)
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return lines
		}
		lines = append(lines, line)
	}
}

// interrupt is a user.interrupt param; on an idle session it is processed at once, so it is
// framed on the stream at once.
func interrupt() anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}}
}

// historyByID indexes a session's log by event id.
func (e *env) historyByID(sessionID string) map[string]map[string]any {
	e.t.Helper()
	out := map[string]map[string]any{}
	for _, ev := range e.eventsOf(sessionID) {
		out[ev["id"].(string)] = ev
	}
	return out
}

func TestStreamDeliversEventsAfterOpening(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("before").OfUserMessage}}})
	before := f.seedEvents(sess.ID, time.Now(), agentEvent("agent.message", `{"content":[{"type":"text","text":"old"}]}`),
		agentEvent("agent.custom_tool_use", customToolUseBody))
	customUse := before[1].ID

	st := openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{})

	// Events from the API and from the store (as the runtime appends), interleaved.
	first, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{interrupt()}})
	require.NoError(t, err)
	seeded := f.seedEvents(sess.ID, time.Now(),
		agentEvent("span.model_request_start", `{}`),
		agentEvent("agent.message", `{"content":[{"type":"text","text":"b"}]}`))
	batch, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{CustomToolUseID: customUse,
			Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "a boat"}}}}},
		userMessage("queued"),
	}})
	require.NoError(t, err)
	updated, err := f.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: param.NewOpt("watched")})
	require.NoError(t, err)
	require.Equal(t, "watched", updated.Title)

	got := nextEvents(t, st, 4)
	// No replay of the events from before the stream opened; log order; each once. The
	// queued user.message is not framed: it appears once, when a turn delivers it (API.md §17).
	require.Equal(t, []string{first.Data[0].ID, seeded[0].ID, seeded[1].ID, batch.Data[0].ID}, streamIDs(got))
	require.Equal(t, []string{"user.interrupt", "span.model_request_start", "agent.message", "user.custom_tool_result"},
		[]string{got[0].Type, got[1].Type, got[2].Type, got[3].Type})
	require.Equal(t, "b", got[2].AsAgentMessage().Content[0].Text)
	require.Equal(t, customUse, got[3].AsUserCustomToolResult().CustomToolUseID)
	for _, ev := range got {
		require.False(t, ev.ProcessedAt.IsZero(), "%s is framed processed", ev.Type)
	}
	update := nextEvents(t, st, 1)[0]
	require.Equal(t, "session.updated", update.Type)
	requireKeys(t, objectOf(t, update.RawJSON()), "type", "id", "title", "processed_at")
	require.Equal(t, "watched", objectOf(t, update.RawJSON())["title"])

	// Each frame is exactly the event as the history has it.
	history := f.historyByID(sess.ID)
	require.Len(t, history, 9)
	for _, ev := range append(got, update) {
		require.JSONEq(t, jsonOf(t, history[ev.ID]), ev.RawJSON())
	}
	f.requireNextIs(t, sess.ID, st)
}

func TestStreamQueuedEventAppearsWhenDelivered(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	st := openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{})

	sent, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("q1"), userMessage("q2")}})
	require.NoError(t, err)
	running := f.seedEvents(sess.ID, time.Now(), agentEvent("session.status_running", `{}`))[0].ID
	// Deliver the messages as a turn does: processed now, moved to the end of the log.
	require.NoError(t, f.api.Store.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.LockSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		w := q.Writes(sess.ID, rec.LastSeq)
		w.Deliver([]string{sent.Data[0].ID, sent.Data[1].ID}, time.Now())
		return w.Flush(ctx)
	}))

	got := nextEvents(t, st, 3)
	require.Equal(t, []string{running, sent.Data[0].ID, sent.Data[1].ID}, streamIDs(got))
	for i, text := range []string{"q1", "q2"} {
		msg := got[i+1]
		require.Equal(t, "user.message", msg.Type)
		require.Equal(t, text, msg.AsUserMessage().Content[0].Text)
		require.False(t, msg.ProcessedAt.IsZero(), "framed once, when processed")
	}
	f.requireNextIs(t, sess.ID, st)
}

func TestStreamFraming(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	customUse := f.seedEvents(sess.ID, time.Now(), agentEvent("agent.custom_tool_use", customToolUseBody))[0].ID

	rs := f.openRawStream(t, f.srv.URL, "/v1/sessions/"+sess.ID+"/events/stream")
	require.Equal(t, http.StatusOK, rs.resp.StatusCode)
	require.Equal(t, "text/event-stream", rs.resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", rs.resp.Header.Get("Cache-Control"))
	require.True(t, strings.HasPrefix(rs.resp.Header.Get("request-id"), "req_"))

	res, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{CustomToolUseID: customUse,
			Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "line one\nline two"}}}}},
	}})
	require.NoError(t, err)
	echo := res.Data[0]
	// id (the resume extension's Last-Event-ID), the event type as the SSE event name, the whole
	// event as one data line, then a blank line.
	lines := rs.frame(t)
	require.Len(t, lines, 3, "%q", lines)
	require.Equal(t, "id: "+echo.ID, lines[0])
	require.Equal(t, "event: user.custom_tool_result", lines[1])
	data, ok := strings.CutPrefix(lines[2], "data: ")
	require.True(t, ok, lines[2])
	require.JSONEq(t, echo.RawJSON(), data)
	require.Contains(t, data, `line one\nline two`, "newlines in text stay escaped on the one data line")

	seeded := f.seedEvents(sess.ID, time.Now(), agentEvent("agent.tool_use", askToolUseBody))[0]
	lines = rs.frame(t)
	require.Equal(t, []string{"id: " + seeded.ID, "event: agent.tool_use"}, lines[:2])
	require.JSONEq(t, fmt.Sprintf(`{"type":"agent.tool_use","id":%q,"name":"bash","input":{"command":"ls"},"evaluated_permission":"ask",
		"evaluation":{"type":"always_ask"},"session_thread_id":null,"processed_at":%q}`, seeded.ID, seeded.ProcessedAt.UTC().Format(time.RFC3339Nano)),
		strings.TrimPrefix(lines[2], "data: "))

	// Deleting the session sends session.deleted as the last frame and ends the response.
	_, err = f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)
	lines = rs.frame(t)
	require.Len(t, lines, 2, "%q", lines)
	require.Equal(t, "event: session.deleted", lines[0])
	deleted := objectOf(t, strings.TrimPrefix(lines[1], "data: "))
	requireKeys(t, deleted, "type", "id", "processed_at")
	require.Equal(t, "session.deleted", deleted["type"])
	require.True(t, strings.HasPrefix(deleted["id"].(string), "sevt_"))
	_, err = time.Parse(time.RFC3339Nano, deleted["processed_at"].(string))
	require.NoError(t, err)
	rest, err := io.ReadAll(rs.r)
	require.NoError(t, err)
	require.Empty(t, rest)
}

func TestStreamSessionDeleted(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	st1 := openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{})
	st2 := openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{})

	// A queued message is not framed before the session goes; session.deleted is all there is.
	_, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("bye")}})
	require.NoError(t, err)
	_, err = f.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{})
	require.NoError(t, err)

	for _, st := range []*sdkStream{st1, st2} {
		got := nextEvents(t, st, 1)[0]
		require.Equal(t, "session.deleted", got.Type)
		require.True(t, strings.HasPrefix(got.ID, "sevt_"))
		require.False(t, got.ProcessedAt.IsZero())
		require.False(t, st.Next(), "session.deleted is the last frame")
		require.NoError(t, st.Err(), "the stream ends cleanly")
	}

	// A new stream on the deleted session is a 404.
	st := openStreamErr(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{})
	require.False(t, st.Next())
	requireAPIErr(t, st.Err(), 404, "not_found_error", sess.ID)
}

// processedIDs lists the ids of a session's processed events in log order: what a replay
// frames.
func (e *env) processedIDs(sessionID string) (all, processed []string) {
	e.t.Helper()
	for _, ev := range e.eventsOf(sessionID) {
		all = append(all, ev["id"].(string))
		if ev["processed_at"] != nil {
			processed = append(processed, ev["id"].(string))
		}
	}
	return all, processed
}

func TestStreamResume(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("one").OfUserMessage}}})
	other := f.newSession(t, anthropic.BetaSessionNewParams{InitialEvents: []anthropic.BetaSessionNewParamsInitialEventUnion{{OfUserMessage: userMessage("elsewhere").OfUserMessage}}})
	f.seedEvents(sess.ID, time.Now(), agentEvent("agent.message", `{"content":[{"type":"text","text":"two"}]}`))
	_, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("queued"), interrupt()}})
	require.NoError(t, err)
	f.seedEvents(sess.ID, time.Now(), agentEvent("agent.thinking", `{}`), agentEvent("agent.message", `{"content":[{"type":"text","text":"five"}]}`))
	all, _ := f.processedIDs(sess.ID)
	require.Len(t, all, 6)

	cases := []struct {
		name  string
		after func(log []string) int // index of the event to resume after
		opt   func(id string) option.RequestOption
	}{
		{"after_id query", func([]string) int { return 0 }, func(id string) option.RequestOption { return option.WithQuery("after_id", id) }},
		{"Last-Event-ID header", func([]string) int { return 1 }, func(id string) option.RequestOption { return option.WithHeader("Last-Event-ID", id) }},
		{"after a queued event", func([]string) int { return 2 }, func(id string) option.RequestOption { return option.WithQuery("after_id", id) }},
		{"after the newest event", func(log []string) int { return len(log) - 1 }, func(id string) option.RequestOption { return option.WithQuery("after_id", id) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all, processed := f.processedIDs(sess.ID)
			after := all[tc.after(all)]
			// The replay is exactly the processed events after that id (queued ones appear
			// when delivered); live events follow with no gap and no duplicate.
			replay := []string{}
			for _, id := range processed {
				if slices.Index(all, id) > slices.Index(all, after) {
					replay = append(replay, id)
				}
			}
			st := openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{}, tc.opt(after))
			require.Equal(t, replay, streamIDs(nextEvents(t, st, len(replay))))
			live := f.seedEvents(sess.ID, time.Now(), agentEvent("span.model_request_start", `{}`))[0].ID
			require.Equal(t, []string{live}, streamIDs(nextEvents(t, st, 1)))
			f.requireNextIs(t, sess.ID, st)
		})
	}

	// A resume point that is not an event of this session is refused, in the error envelope.
	for _, id := range []string{"sevt_missing", f.eventsOf(other.ID)[0]["id"].(string)} {
		resp, body := f.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/events/stream?after_id="+url.QueryEscape(id), "")
		requireRawErr(t, resp, body, 400, "invalid_request_error", id)
		resp, body = f.raw(http.MethodGet, "/v1/sessions/"+sess.ID+"/events/stream", "", "Last-Event-ID", id)
		requireRawErr(t, resp, body, 400, "invalid_request_error", id)
	}
}

func TestStreamResumeLongBacklog(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	from := f.seedEvents(sess.ID, time.Now(), agentEvent("agent.thinking", `{}`))[0].ID
	// A queued message inside the backlog takes a place in the stream's read batch but is
	// not framed; the rest must still flow without waiting for another wake-up.
	_, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("queued")}})
	require.NoError(t, err)
	backlog := make([]store.NewEvent, 1234)
	for i := range backlog {
		backlog[i] = agentEvent("agent.message", fmt.Sprintf(`{"content":[{"type":"text","text":"%d"}]}`, i))
	}
	seeded := f.seedEvents(sess.ID, time.Now(), backlog...)

	// No heartbeat comes to the rescue: only the stream's own reads may move it on.
	quiet := anthropic.NewClient(option.WithBaseURL(f.heartbeatServer(t, time.Hour)), option.WithAPIKey(f.key), option.WithMaxRetries(0))
	st := openStream(t, quiet, sess.ID, anthropic.BetaSessionEventStreamParams{}, option.WithQuery("after_id", from))
	got := nextEvents(t, st, len(seeded))
	for i, ev := range got {
		require.Equal(t, seeded[i].ID, ev.ID, "replayed event %d", i)
	}
	require.Equal(t, "1233", got[len(got)-1].AsAgentMessage().Content[0].Text)
	f.requireNextIs(t, sess.ID, st)
}

func TestStreamConcurrentAppends(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	// Eight streams of one session share their reads of the log (sessions.sharedReads): each
	// must still see every event once, in order.
	var streams []*sdkStream
	for range 8 {
		streams = append(streams, openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{}))
	}

	// Three API writers and two store writers append at the same time.
	const perWriter = 8
	var wg sync.WaitGroup
	errs := make(chan error, 5*perWriter)
	for range 3 {
		wg.Go(func() {
			for range perWriter {
				_, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{interrupt()}})
				errs <- err
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range perWriter {
				_, err := f.api.Store.AppendEvents(ctx, sess.ID, []store.NewEvent{agentEvent("agent.thinking", `{}`)}, time.Now())
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	all, processed := f.processedIDs(sess.ID)
	require.Len(t, all, 5*perWriter)
	require.Equal(t, all, processed)
	for _, st := range streams {
		require.Equal(t, all, streamIDs(nextEvents(t, st, len(all))), "every stream sees the log in order, each event once")
	}
	f.requireNextIs(t, sess.ID, streams...)
}

func TestStreamRefused(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	path := "/v1/sessions/" + sess.ID + "/events/stream"

	st := openStreamErr(t, f.client, "sesn_missing", anthropic.BetaSessionEventStreamParams{})
	require.False(t, st.Next())
	requireAPIErr(t, st.Err(), 404, "not_found_error", "sesn_missing")
	st = openStreamErr(t, f.clientFor(f.newKey()), sess.ID, anthropic.BetaSessionEventStreamParams{})
	require.False(t, st.Next())
	requireAPIErr(t, st.Err(), 404, "not_found_error", sess.ID)
	st = openStreamErr(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{EventDeltas: []anthropic.BetaManagedAgentsDeltaType{"agent.message", "agent.speech"}})
	require.False(t, st.Next())
	requireAPIErr(t, st.Err(), 400, "invalid_request_error", "agent.speech")

	// Errors are JSON, not a stream.
	resp, body := f.raw(http.MethodGet, "/v1/sessions/sesn_missing/events/stream", "")
	requireRawErr(t, resp, body, 404, "not_found_error", "sesn_missing")
	resp, body = f.raw(http.MethodGet, path, "", "x-api-key", "")
	requireRawErr(t, resp, body, 401, "authentication_error", "")
	resp, body = f.raw(http.MethodGet, path, "", "anthropic-beta", "")
	requireRawErr(t, resp, body, 404, "not_found_error", "")
	resp, body = f.raw(http.MethodGet, path+"?event_deltas[]=user.message", "")
	requireRawErr(t, resp, body, 400, "invalid_request_error", "user.message")
	resp, body = f.raw(http.MethodGet, path+"?"+strings.Repeat("event_deltas[]=agent.message&", 101), "")
	requireRawErr(t, resp, body, 400, "invalid_request_error", "100")
}

func TestStreamEventDeltasAccepted(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})

	// Up to 100 values are accepted, in both spellings of the array.
	rs := f.openRawStream(t, f.srv.URL, "/v1/sessions/"+sess.ID+"/events/stream?"+strings.Repeat("event_deltas[]=agent.message&", 99)+"event_deltas=agent.thinking")
	require.Equal(t, http.StatusOK, rs.resp.StatusCode)
	st := openStream(t, f.client, sess.ID, anthropic.BetaSessionEventStreamParams{EventDeltas: []anthropic.BetaManagedAgentsDeltaType{"agent.message", "agent.thinking"}})

	// Without a runtime there are no previews; committed events still arrive.
	res, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{interrupt()}})
	require.NoError(t, err)
	require.Equal(t, []string{res.Data[0].ID}, streamIDs(nextEvents(t, st, 1)))
	require.Equal(t, "id: "+res.Data[0].ID, rs.frame(t)[0])
}

// heartbeatServer serves the env's API with a short SSE heartbeat.
func (e *env) heartbeatServer(t *testing.T, every time.Duration) string {
	t.Helper()
	h := httpapi.New(httpapi.Config{Service: e.api.Service, Auth: e.api.Service, Logger: slog.New(slog.DiscardHandler), Heartbeat: every})
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.CloseStreams()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// byteSpy records what the SDK reads from response bodies and signals the first ping frame.
type byteSpy struct {
	mu   sync.Mutex
	seen bytes.Buffer
	ping chan struct{}
	once sync.Once
}

func (s *byteSpy) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err == nil {
		resp.Body = spyBody{ReadCloser: resp.Body, spy: s}
	}
	return resp, err
}

func (s *byteSpy) bytes() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen.String()
}

type spyBody struct {
	io.ReadCloser
	spy *byteSpy
}

func (b spyBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.spy.mu.Lock()
	b.spy.seen.Write(p[:n])
	pinged := strings.Contains(b.spy.seen.String(), "event: ping\n")
	b.spy.mu.Unlock()
	if pinged {
		b.spy.once.Do(func() { close(b.spy.ping) })
	}
	return n, err
}

func TestStreamHeartbeat(t *testing.T) {
	t.Parallel()
	f := newSessionFixture(t)
	ctx := context.Background()
	sess := f.newSession(t, anthropic.BetaSessionNewParams{})
	base := f.heartbeatServer(t, 20*time.Millisecond)

	// On the wire a heartbeat is a ping frame.
	rs := f.openRawStream(t, base, "/v1/sessions/"+sess.ID+"/events/stream")
	require.Equal(t, []string{"event: ping", `data: {"type":"ping"}`}, rs.frame(t))
	require.Equal(t, []string{"event: ping", `data: {"type":"ping"}`}, rs.frame(t))

	// The SDK reads the pings and skips them: the first event it yields is the message.
	spy := &byteSpy{ping: make(chan struct{})}
	client := anthropic.NewClient(option.WithBaseURL(base), option.WithAPIKey(f.key), option.WithMaxRetries(0), option.WithMiddleware(spy.middleware))
	st := openStream(t, client, sess.ID, anthropic.BetaSessionEventStreamParams{})
	type result struct {
		ok  bool
		ev  anthropic.BetaManagedAgentsStreamSessionEventsUnion
		err error
	}
	got := make(chan result, 1)
	go func() {
		ok := st.Next()
		got <- result{ok, st.Current(), st.Err()}
	}()
	select {
	case <-spy.ping:
	case <-time.After(streamDeadline):
		t.Fatal("the SDK read no ping frame")
	}
	res, err := f.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{interrupt()}})
	require.NoError(t, err)
	var r result
	select {
	case r = <-got:
	case <-time.After(streamDeadline):
		t.Fatal("the SDK yielded nothing")
	}
	require.True(t, r.ok, "stream ended: %v", r.err)
	require.Equal(t, res.Data[0].ID, r.ev.ID)
	require.Equal(t, "user.interrupt", r.ev.Type)
	wire := spy.bytes()
	require.Less(t, strings.Index(wire, "event: ping\n"), strings.Index(wire, "event: user.interrupt\n"))

}
