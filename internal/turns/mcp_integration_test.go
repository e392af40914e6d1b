//go:build integration

package turns

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/ids"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

func (e engine) turnStart(t *testing.T) int64 {
	t.Helper()
	w, err := e.st.GetTurnWindow(context.Background(), e.session)
	require.NoError(t, err)
	return w.StartSeq
}

func (e engine) errors(t *testing.T) []wire.SessionError {
	t.Helper()
	h, err := e.st.History(context.Background(), e.session)
	require.NoError(t, err)
	var out []wire.SessionError
	for _, ev := range h {
		if ev.Type == wire.EventSessionError {
			b, err := wire.DecodeBody[wire.SessionErrorBody](ev)
			require.NoError(t, err)
			out = append(out, b.Error)
		}
	}
	return out
}

func TestRecordMCPListingOncePerTurn(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	e.send(t)
	_, err := e.svc.Advance(ctx, e.session)
	require.NoError(t, err)
	turn := e.turnStart(t)

	first := []agent.MCPServerTools{{Server: "gh", Tools: []agent.MCPTool{{Name: "get_issue", Description: "nul \u0000 inside", InputSchema: json.RawMessage(`{"type":"object","description":"\u0000"}`)}}}}
	got, err := e.svc.RecordMCPListing(ctx, e.session, turn, first, []MCPFailure{{Server: "down", Message: "unreachable"}, {Server: "locked", Auth: true, Message: "401"}})
	require.NoError(t, err, "what jsonb cannot hold is stored as the log stores it")
	require.Len(t, got, 1)
	require.Equal(t, "get_issue", got[0].Tools[0].Name)

	// A second attempt of the step gets the first listing and reports nothing again.
	second := []agent.MCPServerTools{{Server: "gh", Tools: []agent.MCPTool{{Name: "other", InputSchema: json.RawMessage(`{"type":"object"}`)}}}}
	again, err := e.svc.RecordMCPListing(ctx, e.session, turn, second, []MCPFailure{{Server: "down", Message: "unreachable"}})
	require.NoError(t, err)
	require.Equal(t, got, again)
	errs := e.errors(t)
	require.Len(t, errs, 2)
	require.Equal(t, wire.SessionErrorMCPConnectionFailed, errs[0].Type)
	require.Equal(t, "down", *errs[0].MCPServerName)
	require.Equal(t, wire.RetryStatusRetrying, errs[0].RetryStatus.Type)
	require.Equal(t, wire.SessionErrorMCPAuthFailed, errs[1].Type)

	// Steps read the turn's listing back.
	loaded, err := e.svc.LoadConversation(ctx, e.session)
	require.NoError(t, err)
	require.False(t, loaded.MCPListed, "the session's agent snapshot names no MCP servers, so nothing is read")

	// A stale attempt for an earlier turn writes nothing.
	_, err = e.svc.RecordMCPListing(ctx, e.session, turn-1, second, nil)
	require.ErrorIs(t, err, ErrTurnMoved)
	l, err := e.st.GetMCPListing(ctx, e.session)
	require.NoError(t, err)
	require.Equal(t, turn, l.TurnStartSeq)
}

func TestClaimMCPCall(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	id := ids.New(ids.Event)

	first, res, err := e.svc.ClaimMCPCall(ctx, e.session, id)
	require.NoError(t, err)
	require.True(t, first)
	require.Nil(t, res)

	first, res, err = e.svc.ClaimMCPCall(ctx, e.session, id)
	require.NoError(t, err)
	require.False(t, first, "a call is claimed once")
	require.Nil(t, res, "no answer was kept: the outcome is unknown")

	require.NoError(t, e.svc.RecordMCPResult(ctx, e.session, id, json.RawMessage(`{"content":[{"type":"text","text":"42"}],"is_error":false}`)))
	require.NoError(t, e.svc.RecordMCPResult(ctx, e.session, id, json.RawMessage(`{"content":[],"is_error":true}`)))
	_, res, err = e.svc.ClaimMCPCall(ctx, e.session, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"content":[{"type":"text","text":"42"}],"is_error":false}`, string(res), "the first answer kept wins")

	// One agent.mcp_tool_result per call, whoever appends it.
	answer := func() error {
		body, err := wire.EncodeBody(wire.EventAgentMCPToolResult, wire.MCPToolResultBody{MCPToolUseID: id, Content: wire.NewTextContent("42")})
		require.NoError(t, err)
		_, err = e.svc.Emitter(e.session).Emit(ctx, []agent.NewEvent{{ID: ids.New(ids.Event), Type: wire.EventAgentMCPToolResult, Body: body}})
		return err
	}
	require.NoError(t, answer())
	require.ErrorIs(t, answer(), ErrCallAnswered)

	// A session that is gone claims nothing.
	require.NoError(t, e.st.InTx(ctx, func(q *store.Queries) error {
		rec, err := q.LockSession(ctx, e.session)
		if err != nil {
			return err
		}
		rec.Status = wire.SessionStatusTerminated
		return q.UpdateSession(ctx, rec)
	}))
	_, _, err = e.svc.ClaimMCPCall(ctx, e.session, ids.New(ids.Event))
	require.ErrorIs(t, err, ErrSessionGone)
}
