//go:build integration

package e2e

import (
	"context"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/model/upstream"
)

func systemMessage(text string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsOfSystemMessage([]anthropic.BetaManagedAgentsSystemContentBlockParam{{Text: text}})
}

// A system.message reaches a model that takes mid-conversation system messages as a role
// "system" message right after the user turn it came with, for that turn and the later ones;
// on other models it is refused at send time with model_does_not_support_mid_conversation_system.
func TestRealModelSystemMessage(t *testing.T) {
	t.Parallel()
	e, up := realModelEnv(t, upstream.WithScript(func(*upstream.Request) upstream.Reply {
		return upstream.Reply{Content: []upstream.Block{{Type: "text", Text: "d'accord"}}}
	}))
	sessionID := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-5"})
	evs := realTurn(t, e, sessionID, userMessage("hello"), systemMessage("Answer in French."))
	require.Equal(t, "end_turn", fieldsOf(t, last(evs))["stop_reason"].(map[string]any)["type"])
	sys := fieldsOf(t, find(t, evs, "system.message"))
	require.NotNil(t, sys["processed_at"], "delivered with its user.message")

	realTurn(t, e, sessionID, userMessage("and now?"))
	exs := up.Exchanges()
	require.Len(t, exs, 2)
	for _, ex := range exs {
		require.Equal(t, 200, ex.Status, ex.ErrorMessage)
		msgs := ex.Request.Messages
		require.GreaterOrEqual(t, len(msgs), 2)
		require.Equal(t, "user", msgs[0].Role)
		require.Equal(t, "system", msgs[1].Role, "the system message follows the user turn it came with, in every later request")
		require.Equal(t, "Answer in French.", msgs[1].Content[0].Text)
	}

	// A model without mid-conversation system messages: refused, nothing appended.
	other := realModelSession(t, e, anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"})
	_, err := e.client.Beta.Sessions.Events.Send(context.Background(), other, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hi"), systemMessage("be brief")}})
	requireAPIErr(t, err, 400, "invalid_request_error", "not supported by the model claude-sonnet-4-5")
	require.Empty(t, e.eventsOf(other))
}
