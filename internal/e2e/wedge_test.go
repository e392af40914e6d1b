//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"
)

// A NUL in a command's output or in a model's tool input used to wedge the session: the
// append failed with SQLSTATE 22P05 on every retry, no session.error came, and delete was
// refused because the session stayed running. Now the log holds U+FFFD in its place
// (wire.LogSafeJSON), the turn ends normally and the session can be deleted.
func TestNULInToolOutputOrInputDoesNotWedgeTheSession(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		message string
		// input is the tool_use input as logged, result a substring of the tool result.
		input   map[string]any
		result  string
		isError bool
	}{
		{
			name:    "NUL in command output",
			message: `/tool bash {"command":"printf 'a\\000b'"}`,
			input:   map[string]any{"command": `printf 'a\000b'`},
			result:  "a\uFFFDb\n[binary output: 3 bytes, 1 of them NUL",
		},
		{
			name:    "NUL in the model's tool input",
			message: `/tool read {"file_path":"a\u0000b"}`,
			input:   map[string]any{"file_path": "a\uFFFDb"},
			result:  "a\uFFFDb",
			isError: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newTurnFixture(t, builtinTools("always_allow"))
			e := f.e
			f.send(userMessage(tc.message))
			evs := f.untilIdle()
			require.Equal(t, append([]string{"session.status_running", "session.thread_status_running", "user.message",
				"span.model_request_start", "agent.tool_use", "span.model_request_end", "agent.tool_result",
				"span.model_request_start", "agent.message", "span.model_request_end"}, closing...), types(evs))
			require.Equal(t, "end_turn", last(evs).StopReason.Type)
			require.Equal(t, tc.input, fieldsOf(t, find(t, evs, "agent.tool_use"))["input"])

			// The history holds the tool result with the replacement, as the stream showed it.
			page, err := e.client.Beta.Sessions.Events.List(ctx, f.sessionID, anthropic.BetaSessionEventListParams{})
			require.NoError(t, err)
			var result map[string]any
			for _, ev := range page.Data {
				if ev.Type == "agent.tool_result" {
					require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &result))
				}
			}
			require.NotNil(t, result, "the history has the tool result")
			require.Equal(t, tc.isError, result["is_error"])
			require.Contains(t, resultText(t, result), tc.result)
			require.Equal(t, fieldsOf(t, find(t, evs, "agent.tool_result"))["content"], result["content"])

			sess, err := e.client.Beta.Sessions.Get(ctx, f.sessionID, anthropic.BetaSessionGetParams{})
			require.NoError(t, err)
			require.Equal(t, anthropic.BetaManagedAgentsSessionStatus("idle"), sess.Status)
			_, err = e.client.Beta.Sessions.Delete(ctx, f.sessionID, anthropic.BetaSessionDeleteParams{})
			require.NoError(t, err, "an idle session can be deleted")
		})
	}
}

func resultText(t *testing.T, result map[string]any) string {
	t.Helper()
	blocks, ok := result["content"].([]any)
	require.True(t, ok, "content is a list of blocks: %v", result["content"])
	var text string
	for _, b := range blocks {
		if s, ok := b.(map[string]any)["text"].(string); ok {
			text += s
		}
	}
	return text
}
