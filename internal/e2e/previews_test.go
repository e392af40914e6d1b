//go:build integration

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// TestPreviewsOnlyOnOptedInStreams runs one turn watched by two streams: one that asked for
// agent.message previews and one that did not. The first sees span.model_request_start,
// event_start, event_deltas whose text is a prefix of the message, then the committed
// agent.message; the second sees no preview frame at all.
func TestPreviewsOnlyOnOptedInStreams(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t, func(c *app.Config) { c.FakeWordDelay = 5 * time.Millisecond })
	f := newTurnFixtureIn(t, e) // f.stream is the plain stream
	previewing := openStream(t, e.client, f.sessionID, anthropic.BetaSessionEventStreamParams{
		EventDeltas: []anthropic.BetaManagedAgentsDeltaType{"agent.message"}})

	f.send(userMessage("tell me a story about streams that preview their words"))
	plain := f.untilIdle()
	for _, ev := range plain {
		require.NotContains(t, []string{"event_start", "event_delta"}, ev.Type)
	}

	var got []anthropic.BetaManagedAgentsStreamSessionEventsUnion
	for {
		require.True(t, previewing.Next(), "stream ended: %v", previewing.Err())
		got = append(got, previewing.Current())
		if previewing.Current().Type == "session.status_idle" {
			break
		}
	}
	msg := find(t, got, "agent.message")
	var startAt, msgAt, starts int
	var deltaText strings.Builder
	for i, ev := range got {
		switch ev.Type {
		case "event_start":
			starts++
			startAt = i
			var body struct {
				Event struct{ ID, Type string } `json:"event"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &body))
			require.Equal(t, msg.ID, body.Event.ID, "the preview announces the id the message will carry")
			require.Equal(t, "agent.message", body.Event.Type)
		case "event_delta":
			var body struct {
				EventID string `json:"event_id"`
				Delta   struct {
					Type    string
					Index   int
					Content struct{ Type, Text string }
				} `json:"delta"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &body))
			require.Equal(t, msg.ID, body.EventID)
			require.Equal(t, "content_delta", body.Delta.Type)
			deltaText.WriteString(body.Delta.Content.Text)
		case "agent.message":
			msgAt = i
		}
	}
	require.Equal(t, 1, starts, "at most one event_start per event id")
	require.Less(t, startAt, msgAt, "the preview comes before the committed message")
	require.Equal(t, "span.model_request_start", got[startAt-1].Type)
	require.NotEmpty(t, deltaText.String())
	require.True(t, strings.HasPrefix(messageText(msg), deltaText.String()),
		"deltas (%q) are a prefix of the message (%q)", deltaText.String(), messageText(msg))
	for _, ev := range got[msgAt+1:] {
		require.NotContains(t, []string{"event_start", "event_delta"}, ev.Type, "nothing after the committed event")
	}
}
