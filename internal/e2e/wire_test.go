//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

func customResultParam(useID, text string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
		CustomToolUseID: useID, Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{
			{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text}}}}}
}

// A custom tool result re-sent after its turn ended is accepted with a new id and runs one
// more running → idle cycle without a model call (API.md §17); while its turn is still open a
// second result is refused. The re-sent result never reaches the model: the next turn's
// conversation stays valid and the model answers it.
func TestCustomToolResultResentAfterTurnEnded(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, anthropic.BetaAgentNewParamsToolUnion{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{
		Name: "get_weather", Description: "weather of a city",
		InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}})
	ctx := context.Background()
	f.send(userMessage("/tool get_weather {\"city\":\"Paris\"}\n/tool get_weather {\"city\":\"Rome\"}"))
	evs := f.untilIdle()
	require.Equal(t, "requires_action", last(evs).StopReason.Type)
	calls := last(evs).StopReason.EventIDs
	require.Len(t, calls, 2)

	first, err := f.e.client.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{customResultParam(calls[0], "sunny")}})
	require.NoError(t, err)
	evs = f.untilIdle()
	require.Equal(t, "requires_action", last(evs).StopReason.Type, "a partial answer parks again")

	// The turn is still open (parked on the second call): a second result for the first is a
	// duplicate the turn would use, and is refused.
	resp, body := f.e.sendRaw(f.sessionID, `[`+customResult(calls[0], "again")+`]`)
	requireRawErr(t, resp, body, 400, "invalid_request_error", "already answered")

	f.send(customResultParam(calls[1], "rainy"))
	evs = f.untilIdle()
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
	require.Equal(t, "get_weather: sunny\nget_weather: rainy", messageText(find(t, evs, "agent.message")))

	// After the turn ended: accepted with a new id, one running → idle cycle, no model request.
	again, err := f.e.client.Beta.Sessions.Events.Send(ctx, f.sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{customResultParam(calls[0], "sunny")}})
	require.NoError(t, err)
	require.Len(t, again.Data, 1)
	require.NotEqual(t, first.Data[0].ID, again.Data[0].ID)
	require.Equal(t, calls[0], objectOf(t, again.Data[0].RawJSON())["custom_tool_use_id"])
	evs = f.untilIdle()
	require.Equal(t, append([]string{"user.custom_tool_result", "session.status_running", "session.thread_status_running"}, closing...), types(evs))
	require.Equal(t, again.Data[0].ID, evs[0].ID)
	require.Equal(t, "end_turn", last(evs).StopReason.Type)

	// The conversation is still valid: the next turn runs the model, which sees one result per
	// call (the fake model echoes a plain message only when the last turn's results are not
	// mistaken for new ones).
	f.send(userMessage("next"))
	evs = f.untilIdle()
	require.Equal(t, "echo: next", messageText(find(t, evs, "agent.message")))
	require.Equal(t, "end_turn", last(evs).StopReason.Type)
}

// TestPreviewsPrecedeTheirMessage runs many turns with an instant model, watched by a stream
// that asked for agent.message previews. The worker publishes each preview before it commits
// the message, but previews and committed events reach the API process on separate paths;
// for every agent.message the stream must still write its event_start, then its deltas (all
// of them: their text is the message's), then the message itself.
func TestPreviewsPrecedeTheirMessage(t *testing.T) {
	t.Parallel()
	e := newRunningEnv(t, func(c *app.Config) { c.FakeWordDelay = 0 })
	f := newTurnFixtureIn(t, e)
	previewing := openStream(t, e.client, f.sessionID, anthropic.BetaSessionEventStreamParams{
		EventDeltas: []anthropic.BetaManagedAgentsDeltaType{"agent.message"}})

	const turns = 30
	for i := range turns {
		f.send(userMessage(fmt.Sprintf("turn %d: the quick brown fox jumps over the lazy dog", i)))
		var (
			started = map[string]bool{}
			text    = map[string]*strings.Builder{}
			msgs    int
		)
		for {
			require.True(t, previewing.Next(), "stream ended: %v", previewing.Err())
			ev := previewing.Current()
			switch ev.Type {
			case "event_start":
				var body struct {
					Event struct{ ID string } `json:"event"`
				}
				require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &body))
				require.False(t, started[body.Event.ID], "turn %d: one event_start per id", i)
				started[body.Event.ID] = true
				text[body.Event.ID] = &strings.Builder{}
			case "event_delta":
				var body struct {
					EventID string `json:"event_id"`
					Delta   struct {
						Content struct{ Text string }
					} `json:"delta"`
				}
				require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &body))
				require.True(t, started[body.EventID], "turn %d: a delta after its event_start", i)
				text[body.EventID].WriteString(body.Delta.Content.Text)
			case "agent.message":
				msgs++
				require.True(t, started[ev.ID], "turn %d: event_start of %s before the committed message", i, ev.ID)
				require.Equal(t, messageText(ev), text[ev.ID].String(), "turn %d: every delta before the committed message", i)
				delete(text, ev.ID)
			}
			if ev.Type == "session.status_idle" {
				break
			}
		}
		require.Equal(t, 1, msgs, "turn %d", i)
		// The plain stream of the fixture must not fall behind.
		f.untilIdle()
	}
}
