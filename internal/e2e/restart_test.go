//go:build integration

package e2e

import (
	"context"
	"net/http/httptest"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/app"
)

// TestStreamResumeAcrossAPIRestart follows a tool-heavy turn on one API process, kills that
// process mid-turn, and reconnects to another process with the resume extension
// (?after_id=<last event seen>). The client must see every event of the log exactly once,
// in log order.
func TestStreamResumeAcrossAPIRestart(t *testing.T) {
	t.Parallel()
	f := newTurnFixture(t, builtinTools("always_allow"))
	ctx := context.Background()

	// A second API process on the same database.
	api2, err := app.NewAPI(ctx, app.Config{DatabaseURL: f.e.dbURL}, nil, discardLogger())
	require.NoError(t, err)
	srv2 := httptest.NewServer(api2.Handler)
	t.Cleanup(func() { srv2.CloseClientConnections(); srv2.Close(); api2.Close() })

	msg := "work\n"
	for range 8 {
		msg += `/tool bash {"command":"sleep 0.05"}` + "\n"
	}
	f.send(userMessage(msg))

	// Read a few events on the first process, then kill it under the client.
	seen := f.until("agent.tool_result")
	f.e.srv.CloseClientConnections()
	f.e.srv.Close()
	require.False(t, f.stream.Next(), "the stream must end when its process dies")

	c2 := anthropic.NewClient(option.WithBaseURL(srv2.URL), option.WithAPIKey(f.e.key), option.WithMaxRetries(0))
	resumed := openStream(t, c2, f.sessionID, anthropic.BetaSessionEventStreamParams{},
		option.WithQuery("after_id", last(seen).ID))
	for {
		require.True(t, resumed.Next(), "resumed stream ended: %v", resumed.Err())
		seen = append(seen, resumed.Current())
		if resumed.Current().Type == "session.status_idle" {
			break
		}
	}
	var history []string
	for _, ev := range f.e.history(t, f.sessionID) {
		history = append(history, ev.ID)
	}
	require.Equal(t, history, streamIDs(seen), "every event exactly once, in log order")
}
