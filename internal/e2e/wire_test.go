//go:build integration

package e2e

import (
	"context"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"
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
