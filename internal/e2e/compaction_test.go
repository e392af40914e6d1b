//go:build integration

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// Context compaction through the whole server: a worker on a strict Messages API whose
// window is small (the same window in the server's model catalog, as an operator would set it
// with MANAGED_AGENT_MODEL_CATALOG), driven by the official SDK.

const compactWindow = 24_000

// compactionEnv is a running env whose model is the upstream, with claude-opus-5's window
// shrunk to compactWindow on both sides.
func compactionEnv(t *testing.T, script upstream.Script) (*env, *upstream.Server) {
	t.Helper()
	up := upstream.Start(t, upstream.WithScript(script), upstream.WithContextWindow(compactWindow))
	catalogFile := filepath.Join(t.TempDir(), "models.json")
	require.NoError(t, os.WriteFile(catalogFile, []byte(`[{"id":"claude-opus-5","context_window":24000,"max_output_tokens":8000}]`), 0o600))
	e := newRunningEnv(t, func(c *app.Config) {
		c.Model, c.AnthropicBaseURL, c.AnthropicAPIKey = "anthropic", up.URL(), "test-key"
		c.ModelCatalog = catalogFile
		c.AllowUnsafeLocalSandbox = true // the local sandbox runs the test's own bash calls
	})
	return e, up
}

// isSummaryRequest reports whether the upstream request asks for a compaction summary.
func isSummaryRequest(req *upstream.Request) bool {
	msgs := req.Messages
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1].Content
	return len(last) > 0 && strings.Contains(last[len(last)-1].Text, "will be replaced by your summary")
}

func continues(req *upstream.Request) bool {
	return len(req.Messages) > 0 && len(req.Messages[0].Content) > 0 && strings.Contains(req.Messages[0].Content[0].Text, "<summary>")
}

func TestCompactionKeepsALongToolSessionGoing(t *testing.T) {
	t.Parallel()
	// Each round's tool result is ~4,000 tokens: the conversation passes 75% of the window
	// after a few rounds. Without compaction the upstream answers 400 "prompt is too long"
	// and the turn ends in retries_exhausted.
	e, up := compactionEnv(t, func(req *upstream.Request) upstream.Reply {
		switch {
		case isSummaryRequest(req):
			return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "SUMMARY: printed blocks of a's; keep going until told to stop."}}}
		case continues(req):
			return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "finished after compaction"}}}
		}
		return upstream.Reply{Content: []upstream.Block{
			{Type: "thinking", Thinking: "more output"},
			{Type: "tool_use", Name: "bash", Input: []byte(`{"command":"head -c 16000 /dev/zero | tr '\\0' a"}`)}}}
	})
	f := newTurnFixtureIn(t, e, builtinTools("always_allow"))
	f.send(userMessage("print a lot"))
	evs := f.untilIdle()

	idle := fieldsOf(t, last(evs))
	require.Equal(t, "end_turn", idle["stop_reason"].(map[string]any)["type"], "%v", types(evs))
	compacted := find(t, evs, "agent.thread_context_compacted")
	require.ElementsMatch(t, []string{"id", "type", "processed_at"}, keysOf(fieldsOf(t, compacted)), "clients never see the summary")
	require.Equal(t, "finished after compaction", messageText(find(t, evs, "agent.message")))

	var summaries int
	for _, ex := range up.Exchanges() {
		require.Equal(t, 200, ex.Status, "no request passed the window: %s", ex.ErrorMessage)
		if isSummaryRequest(ex.Request) {
			summaries++
		}
	}
	require.Equal(t, 1, summaries)
}

func TestCompactionLimitEndsTheTurn(t *testing.T) {
	t.Parallel()
	// One message larger than the whole window: nothing older can be summarised.
	e, up := compactionEnv(t, func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "unreachable"}}}
	})
	f := newTurnFixtureIn(t, e)
	f.send(userMessage(strings.Repeat("too long ", compactWindow)))
	evs := f.untilIdle()

	errEv := fieldsOf(t, find(t, evs, "session.error"))
	require.Equal(t, "compaction_limit_reached_error", errEv["error"].(map[string]any)["type"])
	require.Equal(t, "retries_exhausted", fieldsOf(t, last(evs))["stop_reason"].(map[string]any)["type"])
	for _, ex := range up.Exchanges() {
		require.Equal(t, 400, ex.Status)
		require.Contains(t, ex.ErrorMessage, "prompt is too long")
	}
	require.Len(t, up.Exchanges(), 1, "the same too-long request is never repeated")
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
