//go:build integration

package e2e

// The whole server driven by a real Claude, through the official SDK only: a running env
// whose worker's model is the anthropic client pointed at internal/model/upstream, the strict
// local Messages API. Each test asserts on what the upstream received (Exchanges) and on
// what the SDK reads back, and says in a comment what would make it fail.
//
//	go test -race -tags integration -run 'RealModel' ./internal/e2e/
//	go test -tags integration -run '^$' -bench RealModelCache -benchtime=3x ./internal/e2e/

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// realModelID is the agents' model: adaptive thinking, effort and fast mode in the catalog,
// 128,000 output tokens, 512 tokens the shortest cacheable prefix.
const realModelID = "claude-opus-5"

// toolSessionRounds is the model requests of the tool session: 19 bash calls, each in its own
// response, and the final answer.
const toolSessionRounds = 20

// realModelEnv starts the strict upstream with opts and a running env whose worker calls it
// through the anthropic client (the default provider, the Anthropic API).
func realModelEnv(tb testing.TB, opts ...upstream.Option) (*env, *upstream.Server) {
	tb.Helper()
	up := upstream.Start(tb, opts...)
	e := newRunningEnv(tb, func(c *app.Config) {
		c.Model, c.AnthropicBaseURL, c.AnthropicAPIKey = "anthropic", up.URL(), upstream.DefaultAPIKey
		c.AllowUnsafeLocalSandbox = true // the local sandbox runs the script's own bash calls
	})
	return e, up
}

// realModelAgent creates an agent of model m with tools, and an environment.
func realModelAgent(tb testing.TB, e *env, m anthropic.BetaManagedAgentsModelConfigParams, tools ...anthropic.BetaAgentNewParamsToolUnion) (agentID, envID string) {
	tb.Helper()
	ctx := context.Background()
	agent, err := e.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "real", Model: m, Tools: tools})
	require.NoError(tb, err)
	envr, err := e.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "real-" + ids.New("")})
	require.NoError(tb, err)
	return agent.ID, envr.ID
}

// realModelSession is a new session of a new agent of model m with tools.
func realModelSession(tb testing.TB, e *env, m anthropic.BetaManagedAgentsModelConfigParams, tools ...anthropic.BetaAgentNewParamsToolUnion) string {
	tb.Helper()
	agentID, envID := realModelAgent(tb, e, m, tools...)
	sess, err := newSessionWith(context.Background(), e.client, agentID, envID)
	require.NoError(tb, err)
	return sess.ID
}

// realTurn opens the session's stream, sends events and reads up to and including the next
// session.status_idle.
func realTurn(tb testing.TB, e *env, sessionID string, events ...anthropic.BetaManagedAgentsEventParamsUnion) []anthropic.BetaManagedAgentsStreamSessionEventsUnion {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := e.client.Beta.Sessions.Events.StreamEvents(ctx, sessionID, anthropic.BetaSessionEventStreamParams{})
	defer st.Close()
	require.NoError(tb, st.Err())
	_, err := e.client.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{Events: events})
	require.NoError(tb, err)
	var out []anthropic.BetaManagedAgentsStreamSessionEventsUnion
	for {
		require.True(tb, st.Next(), "stream ended before idle after %v: %v", types(out), st.Err())
		out = append(out, st.Current())
		if st.Current().Type == "session.status_idle" {
			return out
		}
	}
}

// listedEvent is one event as the SDK lists it: its type and its JSON.
type listedEvent struct {
	Type   string
	Fields map[string]any
	Raw    string
}

// listEvents reads the session's whole history through the SDK's paging.
func listEvents(tb testing.TB, e *env, sessionID string) []listedEvent {
	tb.Helper()
	iter := e.client.Beta.Sessions.Events.ListAutoPaging(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt(int64(50))})
	var out []listedEvent
	for iter.Next() {
		raw := iter.Current().RawJSON()
		var fields map[string]any
		require.NoError(tb, json.Unmarshal([]byte(raw), &fields))
		out = append(out, listedEvent{Type: fields["type"].(string), Fields: fields, Raw: raw})
	}
	require.NoError(tb, iter.Err())
	return out
}

func listedOfType(evs []listedEvent, typ string) []listedEvent {
	var out []listedEvent
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// toolResultsIn counts the tool_result blocks of a request: how many tool rounds the
// conversation it carries has finished.
func toolResultsIn(req *upstream.Request) int {
	n := 0
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				n++
			}
		}
	}
	return n
}

// lastToolResult is the last tool_result block of a request.
func lastToolResult(tb testing.TB, req *upstream.Request) upstream.Block {
	tb.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		c := req.Messages[i].Content
		for j := len(c) - 1; j >= 0; j-- {
			if c[j].Type == "tool_result" {
				return c[j]
			}
		}
	}
	tb.Fatalf("no tool_result in the request")
	return upstream.Block{}
}

// toolLoopScript answers a thinking block and a bash call until the request holds rounds-1
// tool results, then the final text. The thinking text differs each round, so a thinking
// block sent back in the wrong place fails its signature.
func toolLoopScript(rounds int) upstream.Script {
	return func(req *upstream.Request) upstream.Reply {
		done := toolResultsIn(req)
		if done >= rounds-1 {
			return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: fmt.Sprintf("All %d checks ran.", done)}}}
		}
		return upstream.Reply{Content: []upstream.Block{
			{Type: "thinking", Thinking: fmt.Sprintf("Check %d of %d: list the workspace and compare with the last listing before going on.", done+1, rounds-1)},
			{Type: "tool_use", Name: "bash", Input: json.RawMessage(fmt.Sprintf(`{"command":"echo check %d && ls -a"}`, done+1))},
		}}
	}
}

// requireAllAnswered fails on the first exchange the upstream refused, with its message.
func requireAllAnswered(tb testing.TB, exs []upstream.Exchange) {
	tb.Helper()
	for i, ex := range exs {
		require.Equal(tb, 200, ex.Status, "exchange %d refused: %s", i, ex.ErrorMessage)
	}
}

// exchangeUsage sums the upstream's usage over exchanges.
func exchangeUsage(exs []upstream.Exchange) upstream.Usage {
	var u upstream.Usage
	for _, ex := range exs {
		u.InputTokens += ex.Usage.InputTokens
		u.OutputTokens += ex.Usage.OutputTokens
		u.CacheCreationInputTokens += ex.Usage.CacheCreationInputTokens
		u.CacheReadInputTokens += ex.Usage.CacheReadInputTokens
		u.Ephemeral5mInputTokens += ex.Usage.Ephemeral5mInputTokens
		u.Ephemeral1hInputTokens += ex.Usage.Ephemeral1hInputTokens
	}
	return u
}

// promptTokensOf is every token of the prompts: uncached input, cache writes and cache reads
// (build-with-claude/prompt-caching, "Tracking cache performance").
func promptTokensOf(u upstream.Usage) int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

func numberAt(tb testing.TB, m map[string]any, path ...string) int64 {
	tb.Helper()
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		require.True(tb, ok, "%v: no object at %q", path, k)
		v = obj[k]
	}
	f, ok := v.(float64)
	require.True(tb, ok, "%v is %T %v, not a number", path, v, v)
	return int64(f)
}

// TestRealModelToolSession runs a 20-round tool session with thinking. It fails if
//   - thinking blocks are not kept with their signatures (the private part) and sent back:
//     the upstream answers 400 to a tool loop whose assistant message lost its thinking, or
//     to a changed signature, and the exchanges are not all 200;
//   - the client's cache breakpoints are removed or misplaced: the share read from cache
//     falls from about 0.9 to 0 (no breakpoint) or far below 0.80 (only the system prompt);
//   - span.model_request_end, session.usage or the session's usage drop or miscount the
//     cache tokens the API reported;
//   - agent.thinking shows the thinking text or its signature to clients.
func TestRealModelToolSession(t *testing.T) {
	t.Parallel()
	e, up := realModelEnv(t, upstream.WithScript(toolLoopScript(toolSessionRounds)))
	sid := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: realModelID}, builtinTools("always_allow"))
	evs := realTurn(t, e, sid, userMessage("Run the workspace checks, one command at a time."))

	exs := up.Exchanges()
	requireAllAnswered(t, exs)
	require.Equal(t, "end_turn", eventFields(t, last(evs))["stop_reason"].(map[string]any)["type"], "%v", types(evs))
	require.Len(t, exs, toolSessionRounds)
	var signed []upstream.Block // the thinking blocks the upstream answered so far
	for i, ex := range exs {
		require.Equal(t, i, toolResultsIn(ex.Request), "exchange %d", i)
		require.JSONEq(t, `{"type":"adaptive","display":"omitted"}`, string(ex.Request.Thinking), "exchange %d", i)
		// Every thinking block of the turn goes back, in order, exactly as answered.
		var sent []upstream.Block
		for _, m := range ex.Request.Messages {
			for _, b := range m.Content {
				if b.Type == "thinking" {
					sent = append(sent, upstream.Block{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
				}
			}
		}
		require.Equal(t, signed, sent, "exchange %d", i)
		for _, b := range ex.Content {
			if b.Type == "thinking" {
				signed = append(signed, upstream.Block{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
			}
		}
	}

	total := exchangeUsage(exs)
	share := float64(total.CacheReadInputTokens) / float64(promptTokensOf(total))
	t.Logf("%d requests: prompt %d tokens = input %d + cache write %d + cache read %d; read from cache %.3f",
		len(exs), promptTokensOf(total), total.InputTokens, total.CacheCreationInputTokens, total.CacheReadInputTokens, share)
	first, final := promptTokensOf(exs[0].Usage), promptTokensOf(exs[len(exs)-1].Usage)
	t.Logf("first prompt %d tokens, %.1f more per round", first, float64(final-first)/float64(len(exs)-1))
	require.GreaterOrEqual(t, share, 0.80)

	listed := listEvents(t, e, sid)
	var spans upstream.Usage
	ends := listedOfType(listed, "span.model_request_end")
	require.Len(t, ends, toolSessionRounds)
	for _, ev := range ends {
		require.Equal(t, false, ev.Fields["is_error"])
		spans.InputTokens += numberAt(t, ev.Fields, "model_usage", "input_tokens")
		spans.OutputTokens += numberAt(t, ev.Fields, "model_usage", "output_tokens")
		spans.CacheCreationInputTokens += numberAt(t, ev.Fields, "model_usage", "cache_creation_input_tokens")
		spans.CacheReadInputTokens += numberAt(t, ev.Fields, "model_usage", "cache_read_input_tokens")
	}
	require.Equal(t, total.CacheReadInputTokens, spans.CacheReadInputTokens)
	require.Equal(t, total.CacheCreationInputTokens, spans.CacheCreationInputTokens)
	require.Equal(t, total.InputTokens, spans.InputTokens)
	require.Equal(t, total.OutputTokens, spans.OutputTokens)

	usageEvs := listedOfType(listed, "session.usage")
	require.Len(t, usageEvs, 1, "one turn, one usage snapshot")
	require.Equal(t, total.CacheReadInputTokens, numberAt(t, usageEvs[0].Fields, "usage", "cache_read_input_tokens"))
	require.Equal(t, total.InputTokens, numberAt(t, usageEvs[0].Fields, "usage", "input_tokens"))
	require.Equal(t, total.CacheCreationInputTokens,
		numberAt(t, usageEvs[0].Fields, "usage", "cache_creation", "ephemeral_5m_input_tokens")+numberAt(t, usageEvs[0].Fields, "usage", "cache_creation", "ephemeral_1h_input_tokens"))
	sess, err := e.client.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, total.CacheReadInputTokens, sess.Usage.CacheReadInputTokens)
	require.Equal(t, total.InputTokens, sess.Usage.InputTokens)
	require.Equal(t, total.OutputTokens, sess.Usage.OutputTokens)
	require.Equal(t, total.CacheCreationInputTokens, sess.Usage.CacheCreation.Ephemeral5mInputTokens+sess.Usage.CacheCreation.Ephemeral1hInputTokens)

	thinkings := listedOfType(listed, "agent.thinking")
	require.Len(t, thinkings, toolSessionRounds-1)
	for _, ev := range thinkings {
		require.ElementsMatch(t, []string{"id", "type", "processed_at"}, slices.Collect(maps.Keys(ev.Fields)), ev.Raw)
		for _, b := range signed {
			require.NotContains(t, ev.Raw, b.Signature)
		}
		require.NotContains(t, ev.Raw, "Check ")
	}
	results := listedOfType(listed, "agent.tool_result")
	require.Len(t, results, toolSessionRounds-1)
	for _, ev := range results {
		require.Equal(t, false, ev.Fields["is_error"], ev.Raw)
	}
}

// TestRealModelEffortAndSpeed: the agent's effort and speed reach the API. It fails if the
// request loses output_config.effort, speed or the fast-mode beta header (without which the
// upstream refuses speed fast on claude-opus-5, so the turn would end in an error), if
// thinking is not adaptive, or if the span does not say the request ran fast; and, for the
// agent without them, if they are sent anyway.
func TestRealModelEffortAndSpeed(t *testing.T) {
	t.Parallel()
	e, up := realModelEnv(t)
	fast := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{
		ID:     realModelID,
		Effort: anthropic.BetaManagedAgentsModelConfigParamsEffortUnion{OfBetaManagedAgentsEffortHigh: &anthropic.BetaManagedAgentsEffortHighParam{}},
		Speed:  anthropic.BetaManagedAgentsModelConfigParamsSpeedFast,
	})
	evs := realTurn(t, e, fast, userMessage("hi"))
	require.Equal(t, "end_turn", eventFields(t, last(evs))["stop_reason"].(map[string]any)["type"])
	require.Equal(t, "ok", messageText(find(t, evs, "agent.message")))

	// The span says at which speed the request ran (null at standard speed, as hosted).
	require.Equal(t, "fast", eventFields(t, find(t, evs, "span.model_request_end"))["model_usage"].(map[string]any)["speed"])

	plain := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: realModelID})
	evs = realTurn(t, e, plain, userMessage("hi"))
	usage := eventFields(t, find(t, evs, "span.model_request_end"))["model_usage"].(map[string]any)
	require.Contains(t, usage, "speed")
	require.Nil(t, usage["speed"])

	exs := up.Exchanges()
	requireAllAnswered(t, exs)
	require.Len(t, exs, 2)
	for _, ex := range exs {
		require.JSONEq(t, `{"type":"adaptive","display":"omitted"}`, string(ex.Request.Thinking))
		require.Equal(t, 128_000, ex.Request.MaxTokens, "the model's output limit from the catalog")
	}
	req := exs[0].Request
	require.JSONEq(t, `{"effort":"high"}`, string(req.OutputConfig))
	require.Equal(t, "fast", req.Speed)
	require.Contains(t, betaHeaders(req), "fast-mode-2026-02-01")

	req = exs[1].Request
	require.Empty(t, req.OutputConfig)
	require.Empty(t, req.Speed)
	require.NotContains(t, betaHeaders(req), "fast-mode-2026-02-01")
}

func betaHeaders(req *upstream.Request) []string {
	var out []string
	for _, v := range req.Header.Values("anthropic-beta") {
		for b := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(b))
		}
	}
	return out
}

// smallPNG is a real 3×2 PNG: the upstream checks an image's bytes against its media type.
func smallPNG(tb testing.TB) []byte {
	tb.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.NRGBA{R: 200, G: 30, B: 90, A: 255})
	var buf bytes.Buffer
	require.NoError(tb, png.Encode(&buf, img))
	return buf.Bytes()
}

// minimalPDF is a one-page PDF with its cross-reference table.
func minimalPDF() []byte {
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// TestRealModelImagesAndDocuments: images and documents of a user.message, and an image a
// read tool call returns, reach the model as image and document blocks. It fails if the
// projection turns them into text or drops them, changes a source (the upstream checks the
// PNG's and the PDF's bytes against their media types), or if read's image is not passed
// inside the tool_result.
func TestRealModelImagesAndDocuments(t *testing.T) {
	t.Parallel()
	pngData := base64.StdEncoding.EncodeToString(smallPNG(t))
	pdfData := base64.StdEncoding.EncodeToString(minimalPDF())
	const imageURL = "https://example.com/photos/cat.png"
	const notes = "Shopping list: apples, pears, a ladder."

	e, up := realModelEnv(t, upstream.WithScript(func(req *upstream.Request) upstream.Reply {
		switch toolResultsIn(req) {
		case 0: // write a PNG into the workspace, as a program the agent ran would
			return upstream.Reply{Content: []upstream.Block{{Type: "thinking", Thinking: "Make the screenshot first."},
				{Type: "tool_use", Name: "bash", Input: json.RawMessage(fmt.Sprintf(`{"command":"echo %s | base64 -d > shot.png"}`, pngData))}}}
		case 1:
			return upstream.Reply{Content: []upstream.Block{{Type: "thinking", Thinking: "Now look at it."},
				{Type: "tool_use", Name: "read", Input: json.RawMessage(`{"file_path":"shot.png"}`)}}}
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "A small picture with one red pixel."}}}
	}))
	sid := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: realModelID}, builtinTools("always_allow"))
	msg := anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
		Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
			{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "Look at these, then at the screenshot."}},
			{OfImage: &anthropic.BetaManagedAgentsImageBlockParam{Source: anthropic.BetaManagedAgentsImageBlockSourceUnionParam{
				OfBase64: &anthropic.BetaManagedAgentsBase64ImageSourceParam{Data: pngData, MediaType: "image/png"}}}},
			{OfDocument: &anthropic.BetaManagedAgentsDocumentBlockParam{Source: anthropic.BetaManagedAgentsDocumentBlockSourceUnionParam{
				OfBase64: &anthropic.BetaManagedAgentsBase64DocumentSourceParam{Data: pdfData, MediaType: "application/pdf"}}}},
			{OfDocument: &anthropic.BetaManagedAgentsDocumentBlockParam{Title: param.NewOpt("notes"), Source: anthropic.BetaManagedAgentsDocumentBlockSourceUnionParam{
				OfText: &anthropic.BetaManagedAgentsPlainTextDocumentSourceParam{Data: notes}}}},
			{OfImage: &anthropic.BetaManagedAgentsImageBlockParam{Source: anthropic.BetaManagedAgentsImageBlockSourceUnionParam{
				OfURL: &anthropic.BetaManagedAgentsURLImageSourceParam{URL: imageURL}}}},
		}}}
	evs := realTurn(t, e, sid, msg)

	exs := up.Exchanges()
	requireAllAnswered(t, exs)
	require.Equal(t, "end_turn", eventFields(t, last(evs))["stop_reason"].(map[string]any)["type"], "%v", types(evs))
	require.Len(t, exs, 3)
	for i, ex := range exs {
		// Every request of the turn carries the user's blocks, unchanged.
		first := ex.Request.Messages[0]
		require.Equal(t, "user", first.Role)
		var got []string
		for _, b := range first.Content {
			got = append(got, b.Type)
		}
		require.Equal(t, []string{"text", "image", "document", "document", "image"}, got, "exchange %d", i)
		c := first.Content
		require.JSONEq(t, `{"type":"base64","media_type":"image/png","data":"`+pngData+`"}`, string(c[1].Source))
		require.JSONEq(t, `{"type":"base64","media_type":"application/pdf","data":"`+pdfData+`"}`, string(c[2].Source))
		require.JSONEq(t, `{"type":"text","media_type":"text/plain","data":"`+notes+`"}`, string(c[3].Source))
		require.Equal(t, "notes", c[3].Title)
		require.JSONEq(t, `{"type":"url","url":"`+imageURL+`"}`, string(c[4].Source))
	}

	// The read's result is an image block inside the tool_result the model receives.
	res := lastToolResult(t, exs[2].Request)
	require.False(t, res.IsError, string(res.Content))
	var blocks []upstream.Block
	require.NoError(t, json.Unmarshal(res.Content, &blocks), string(res.Content))
	var images []upstream.Block
	for _, b := range blocks {
		if b.Type == "image" {
			images = append(images, b)
		}
	}
	require.Len(t, images, 1, string(res.Content))
	require.JSONEq(t, `{"type":"base64","media_type":"image/png","data":"`+pngData+`"}`, string(images[0].Source))
}

// TestRealModelToolCallCutAtMaxTokens: a tool call cut at the model's output limit is never
// run and is answered with an error result the model sees. It fails if the cut call runs
// (its bash command would create the marker file; were it run with the {} an incomplete input
// decodes to, its result would be bash's own input error, not the cut's), if the turn asks
// for the same request again or ends in retries_exhausted, or if the next request does not
// answer the call with that error.
func TestRealModelToolCallCutAtMaxTokens(t *testing.T) {
	t.Parallel()
	const marker = "cut-call-ran"
	// The upstream counts ceil(len/4) tokens: 600,000 bytes of input is 150,000 tokens,
	// past claude-opus-5's 128,000.
	long := strings.Repeat("x", 600_000)
	e, up := realModelEnv(t, upstream.WithScript(func(req *upstream.Request) upstream.Reply {
		if toolResultsIn(req) == 0 {
			return upstream.Reply{Content: []upstream.Block{
				{Type: "thinking", Thinking: "Write the whole report in one command."},
				{Type: "tool_use", Name: "bash", Input: json.RawMessage(`{"command":"touch ` + marker + ` && echo ` + long + `"}`)},
			}}
		}
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "That was too long; I will write it in parts."}}}
	}))
	sid := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: realModelID}, builtinTools("always_allow"))
	evs := realTurn(t, e, sid, userMessage("Write the report."))

	exs := up.Exchanges()
	requireAllAnswered(t, exs)
	require.Equal(t, "end_turn", eventFields(t, last(evs))["stop_reason"].(map[string]any)["type"], "%v", types(evs))
	require.NotContains(t, types(evs), "session.error")
	require.Len(t, exs, 2, "no retry at the model's own limit, no repeated request")
	for _, ex := range exs {
		require.Equal(t, 128_000, ex.Request.MaxTokens)
	}
	require.Equal(t, "max_tokens", exs[0].StopReason)
	require.Len(t, exs[0].Request.Messages, 1)
	require.Len(t, exs[1].Request.Messages, 3, "the second request answers the cut call")
	// The second request holds the cut call (under the id the model gave it) and, right after
	// it, the error result.
	var calls []upstream.Block
	for _, b := range exs[1].Request.Messages[1].Content {
		if b.Type == "tool_use" {
			calls = append(calls, b)
		}
	}
	require.Len(t, calls, 1)
	require.Equal(t, "bash", calls[0].Name)
	res := lastToolResult(t, exs[1].Request)
	require.Equal(t, calls[0].ID, res.ToolUseID)
	require.True(t, res.IsError)
	require.Contains(t, string(res.Content), "was not run")
	require.Contains(t, string(res.Content), "max_tokens 128000")

	listed := listEvents(t, e, sid)
	useAt, resultAt := -1, -1
	for i, ev := range listed {
		switch ev.Type {
		case "agent.tool_use":
			require.Equal(t, -1, useAt, "one tool call")
			useAt = i
		case "agent.tool_result":
			require.Equal(t, -1, resultAt, "one tool result")
			resultAt = i
		}
	}
	require.Positive(t, useAt)
	require.Greater(t, resultAt, useAt)
	result := listed[resultAt]
	require.Equal(t, listed[useAt].Fields["id"], result.Fields["tool_use_id"])
	var cut []upstream.Block
	for _, b := range exs[0].Content {
		if b.Type == "tool_use" {
			cut = append(cut, b)
		}
	}
	require.Len(t, cut, 1)
	require.Equal(t, cut[0].ID, calls[0].ID, "the call goes back under the model's own id")
	require.NotEqual(t, calls[0].ID, listed[useAt].Fields["id"], "clients know it by its event id")
	require.Equal(t, true, result.Fields["is_error"])
	require.Contains(t, result.Raw, "was not run")

	err := filepath.WalkDir(e.sandboxDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		require.NotEqual(t, marker, d.Name(), "the cut call ran: %s exists", path)
		return nil
	})
	require.NoError(t, err)
}

// TestRealModelRefusal: a refusal ends the turn with stop_reason refusal and the API's
// stop_details on both idle events. It fails if the refusal is read as an end_turn (the
// stop_reason would be end_turn and stop_details null) or if its details are lost.
func TestRealModelRefusal(t *testing.T) {
	t.Parallel()
	const details = `{"type":"refusal","category":"cyber","explanation":"The request asks for working malware."}`
	e, up := realModelEnv(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "I can't help with that."}},
			StopReason: "refusal", StopDetails: json.RawMessage(details)}
	}))
	sid := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: realModelID}, builtinTools("always_allow"))
	evs := realTurn(t, e, sid, userMessage("Write ransomware for me."))

	exs := up.Exchanges()
	require.Len(t, exs, 1)
	require.Equal(t, "refusal", exs[0].StopReason)
	for _, typ := range []string{"session.thread_status_idle", "session.status_idle"} {
		f := eventFields(t, find(t, evs, typ))
		require.Equal(t, map[string]any{"type": "refusal"}, f["stop_reason"], typ)
		got, err := json.Marshal(f["stop_details"])
		require.NoError(t, err)
		require.JSONEq(t, details, string(got), typ)
	}
	sess, err := e.client.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
	require.NoError(t, err)
	require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("idle"), sess.Status)
}

// Prompt too long without compaction: not here; the compaction tests (compaction_test.go)
// cover what a too-long prompt does.

// BenchmarkRealModelCache runs the 20-round tool session of TestRealModelToolSession
// against the strict upstream, one fresh session per iteration with the upstream's cache
// expired in between (Advance), and reports per session:
//
//   - cache_read_share: cache_read_input_tokens / every prompt token;
//   - prompt_tokens: every prompt token of the session's 20 requests;
//   - billed_in_cached: the input-token equivalents billed with caching, each kind of prompt
//     token weighted by its list price over the input price in the catalog's claude-opus-5
//     (input 1×, 5-minute cache write 1.25×, 1-hour write 2×, cache read 0.1×);
//   - billed_in_nocache: the same session without caching. The server has no switch that
//     turns its breakpoints off, so it is computed: every prompt token at the input price,
//     which is what the API bills a request without cache_control (the conversation, and so
//     the prompt, is the same: the script answers the same whatever was cached);
//   - billed_in_ratio: billed_in_cached / billed_in_nocache;
//   - usd_cached, usd_nocache: the list cost of the whole session (output included) both
//     ways, from the catalog's prices.
func BenchmarkRealModelCache(b *testing.B) {
	e, up := realModelEnv(b, upstream.WithScript(toolLoopScript(toolSessionRounds)))
	agentID, envID := realModelAgent(b, e, anthropic.BetaManagedAgentsModelConfigParams{ID: realModelID}, builtinTools("always_allow"))
	m, ok := catalog.Builtin().Lookup(realModelID)
	require.True(b, ok)
	p := m.Price
	wWrite5m, wWrite1h, wRead := p.CacheWrite5m/p.Input, p.CacheWrite1h/p.Input, p.CacheRead/p.Input

	var total upstream.Usage
	var costCached, costNoCache catalog.Cents
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		up.Advance(time.Hour) // past every entry's TTL: each session starts with a cold cache
		before := len(up.Exchanges())
		sess, err := newSessionWith(context.Background(), e.client, agentID, envID)
		require.NoError(b, err)
		evs := realTurn(b, e, sess.ID, userMessage("Run the workspace checks, one command at a time."))
		exs := up.Exchanges()[before:]
		requireAllAnswered(b, exs)
		require.Equal(b, "end_turn", eventFields(b, last(evs))["stop_reason"].(map[string]any)["type"])
		require.Len(b, exs, toolSessionRounds)
		for _, ex := range exs {
			u := ex.Usage
			costCached = costCached.Add(m.Cost(catalog.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheWrite5mTokens: u.Ephemeral5mInputTokens, CacheWrite1hTokens: u.Ephemeral1hInputTokens, CacheReadTokens: u.CacheReadInputTokens}))
			costNoCache = costNoCache.Add(m.Cost(catalog.Usage{InputTokens: promptTokensOf(u), OutputTokens: u.OutputTokens}))
		}
		u := exchangeUsage(exs)
		require.Equal(b, u.CacheCreationInputTokens, u.Ephemeral5mInputTokens+u.Ephemeral1hInputTokens)
		total.InputTokens += u.InputTokens
		total.OutputTokens += u.OutputTokens
		total.CacheCreationInputTokens += u.CacheCreationInputTokens
		total.CacheReadInputTokens += u.CacheReadInputTokens
		total.Ephemeral5mInputTokens += u.Ephemeral5mInputTokens
		total.Ephemeral1hInputTokens += u.Ephemeral1hInputTokens
	}
	b.StopTimer()

	n := float64(b.N)
	prompt := float64(promptTokensOf(total))
	cached := float64(total.InputTokens) + wWrite5m*float64(total.Ephemeral5mInputTokens) +
		wWrite1h*float64(total.Ephemeral1hInputTokens) + wRead*float64(total.CacheReadInputTokens)
	b.ReportMetric(float64(total.CacheReadInputTokens)/prompt, "cache_read_share")
	b.ReportMetric(prompt/n, "prompt_tokens")
	b.ReportMetric(cached/n, "billed_in_cached")
	b.ReportMetric(prompt/n, "billed_in_nocache")
	b.ReportMetric(cached/prompt, "billed_in_ratio")
	b.ReportMetric(costCached.Float()/100/n, "usd_cached")
	b.ReportMetric(costNoCache.Float()/100/n, "usd_nocache")
	b.Logf("per session: input %d, cache write %d (5m %d, 1h %d), cache read %d, output %d tokens",
		total.InputTokens/int64(b.N), total.CacheCreationInputTokens/int64(b.N), total.Ephemeral5mInputTokens/int64(b.N),
		total.Ephemeral1hInputTokens/int64(b.N), total.CacheReadInputTokens/int64(b.N), total.OutputTokens/int64(b.N))
}

// eventFields is an event's JSON as a map (fieldsOf, for benchmarks too).
func eventFields(tb testing.TB, ev anthropic.BetaManagedAgentsStreamSessionEventsUnion) map[string]any {
	tb.Helper()
	var m map[string]any
	require.NoError(tb, json.Unmarshal([]byte(ev.RawJSON()), &m))
	return m
}
