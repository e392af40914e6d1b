package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/anthropic"
	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

// These tests run the client against internal/model/upstream, a strict local Messages API
// that refuses what the real API refuses and accounts the prompt cache as documented.

func upstreamClient(t *testing.T, up *upstream.Server) *anthropic.Client {
	t.Helper()
	c, err := anthropic.New(anthropic.WithBaseURL(up.URL()), anthropic.WithAPIKey("test-key"))
	require.NoError(t, err)
	return c
}

// toolLoop replies with a bash call until the request holds rounds-1 tool results, then ends.
func toolLoop(rounds int) upstream.Script {
	return func(req *upstream.Request) upstream.Reply {
		results := 0
		for _, m := range req.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					results++
				}
			}
		}
		if results >= rounds-1 {
			return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "all done"}}}
		}
		return upstream.Reply{Content: []upstream.Block{
			{Type: "thinking", Thinking: "next step"},
			{Type: "tool_use", Name: "bash", Input: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, results))},
		}}
	}
}

func TestCacheBreakpointsReadWhatTheLastRequestWrote(t *testing.T) {
	t.Parallel()
	const rounds = 20
	tests := []struct {
		name     string
		cache    bool
		minShare float64
		maxShare float64
	}{
		{name: "with breakpoints", cache: true, minShare: 0.80, maxShare: 1},
		{name: "without", cache: false, minShare: 0, maxShare: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := upstream.Start(t, upstream.WithScript(toolLoop(rounds)))
			c := upstreamClient(t, up)
			system := strings.Repeat("You are a careful agent. ", 300) // well past the minimum cacheable length
			req := model.Request{
				Model: "claude-opus-5", System: system, MaxTokens: 4096, Cache: tt.cache,
				Thinking: &model.Thinking{Type: model.ThinkingAdaptive},
				Tools:    []model.Tool{{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(`{"type":"object"}`)}},
				Messages: []model.Message{{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: "count to twenty"}}}},
			}
			var read, total int64
			for i := 0; ; i++ {
				require.Less(t, i, rounds, "the loop did not end")
				resp, err := c.Stream(t.Context(), req, nil)
				require.NoError(t, err, "round %d", i)
				u := resp.Usage
				read += u.CacheReadInputTokens
				total += u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
				if resp.StopReason != model.StopToolUse {
					break
				}
				var results []model.Block
				for _, b := range resp.Content {
					if b.Type == model.BlockToolUse {
						results = append(results, model.Block{Type: model.BlockToolResult, ToolUseID: b.ID,
							Content: []model.Block{{Type: model.BlockText, Text: strings.Repeat("output line\n", 40)}}})
					}
				}
				req.Messages = append(req.Messages, model.Message{Role: "assistant", Content: resp.Content},
					model.Message{Role: "user", Content: results})
			}
			share := float64(read) / float64(total)
			t.Logf("cache reads: %d of %d input tokens (%.1f%%)", read, total, 100*share)
			require.GreaterOrEqual(t, share, tt.minShare)
			require.LessOrEqual(t, share, tt.maxShare)
			for _, ex := range up.Exchanges() {
				require.Equal(t, 200, ex.Status, ex.ErrorMessage)
			}
		})
	}
}

func TestRequestCarriesThinkingEffortSpeedAndMedia(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "seen"}}}
	}))
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	pdf := "JVBERi0xLjQKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
	req := model.Request{
		Model: "claude-opus-5", MaxTokens: 2048, Effort: "high", Speed: "fast",
		Thinking: &model.Thinking{Type: model.ThinkingAdaptive, Display: model.ThinkingDisplayOmitted},
		Messages: []model.Message{{Role: "user", Content: []model.Block{
			{Type: model.BlockText, Text: "what is in these?"},
			{Type: model.BlockImage, Source: json.RawMessage(`{"type":"base64","media_type":"image/png","data":"` + png + `"}`)},
			{Type: model.BlockDocument, Title: "spec", Source: json.RawMessage(`{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}`)},
			{Type: model.BlockDocument, Source: json.RawMessage(`{"type":"text","media_type":"text/plain","data":"plain notes"}`)},
		}}},
	}
	_, err := upstreamClient(t, up).Stream(t.Context(), req, nil)
	require.NoError(t, err)
	ex := up.Exchanges()
	require.Len(t, ex, 1)
	got := ex[0].Request
	require.JSONEq(t, `{"type":"adaptive","display":"omitted"}`, string(got.Thinking))
	require.JSONEq(t, `{"effort":"high"}`, string(got.OutputConfig))
	require.Equal(t, "fast", got.Speed)
	require.Contains(t, got.Header.Values("anthropic-beta"), "fast-mode-2026-02-01")
	content := got.Messages[0].Content
	require.Equal(t, []string{"text", "image", "document", "document"}, blockTypes(content))
	require.Equal(t, "spec", content[2].Title)
}

func blockTypes(bs []upstream.Block) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Type
	}
	return out
}

func TestCutToolCallIsMarked(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4000)
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			up := upstream.Start(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
				return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "writing"},
					{Type: "tool_use", Name: "write", Input: json.RawMessage(`{"content":"` + big + `"}`)}}}
			}))
			c := upstreamClient(t, up)
			req := model.Request{Model: "claude-opus-5", MaxTokens: 100,
				Tools:    []model.Tool{{Name: "write", InputSchema: json.RawMessage(`{"type":"object"}`)}},
				Messages: []model.Message{{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: "write it"}}}}}
			call := c.Create
			if stream {
				call = func(ctx context.Context, r model.Request) (model.Response, error) { return c.Stream(ctx, r, nil) }
			}
			resp, err := call(t.Context(), req)
			require.NoError(t, err, "a cut call is an answer, not a malformed stream to retry")
			require.Equal(t, model.StopMaxTokens, resp.StopReason)
			last := resp.Content[len(resp.Content)-1]
			require.Equal(t, model.BlockToolUse, last.Type)
			require.True(t, last.Truncated)
		})
	}
}

func TestRefusalAndPromptTooLong(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.WithContextWindow(2000), upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "no"}}, StopReason: "refusal",
			StopDetails: json.RawMessage(`{"type":"refusal","category":"cyber","explanation":"x"}`)}
	}))
	c := upstreamClient(t, up)
	req := model.Request{Model: "claude-opus-5", MaxTokens: 100,
		Messages: []model.Message{{Role: "user", Content: []model.Block{{Type: model.BlockText, Text: "hi"}}}}}
	resp, err := c.Stream(t.Context(), req, nil)
	require.NoError(t, err)
	require.Equal(t, model.StopRefusal, resp.StopReason)
	require.JSONEq(t, `{"type":"refusal","category":"cyber","explanation":"x"}`, string(resp.StopDetails))

	req.Messages[0].Content[0].Text = strings.Repeat("long ", 4000)
	_, err = c.Stream(t.Context(), req, nil)
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.True(t, me.PromptTooLong, me.Message)
	require.False(t, me.Retryable())
}
