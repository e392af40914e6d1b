package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/store"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// MCPFailure is an MCP server that could not be listed for a turn: it becomes a session.error
// (mcp_authentication_failed_error when Auth, else mcp_connection_failed_error) with
// retry_status retrying, and the turn goes on without that server's tools; the next turn tries
// it again (API.md §5.5).
type MCPFailure struct {
	Server  string
	Auth    bool
	Message string
}

// turnListing reads the listing of the turn starting at startSeq; listed is false when the
// stored listing, if any, belongs to an earlier turn.
func turnListing(ctx context.Context, q *store.Queries, sessionID string, startSeq int64) (servers []agent.MCPServerTools, listed bool, err error) {
	l, err := q.GetMCPListing(ctx, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case l.TurnStartSeq != startSeq:
		return nil, false, nil
	}
	if err := json.Unmarshal(l.Servers, &servers); err != nil {
		return nil, false, fmt.Errorf("decode the MCP listing of session %s: %w", sessionID, err)
	}
	return servers, true, nil
}

// ErrTurnMoved: the session's turn is no longer the one a step was working on (an attempt
// that outlived its heartbeat, while a retry finished the turn and a new one began). The step
// must not act on its stale history.
var ErrTurnMoved = errors.New("the session's turn has moved on")

// RecordMCPListing stores what the session's MCP servers listed for the turn that starts at
// turnStartSeq, and a session.error for each failure, in one transaction, and returns the
// listing the turn uses. If an earlier attempt already recorded one for this turn, that one is
// returned and nothing is written: every step of a turn offers the same tools, and a retried
// listing does not report its failures twice. If the session has moved on to a later turn, it
// writes nothing and returns ErrTurnMoved.
func (s *Service) RecordMCPListing(ctx context.Context, sessionID string, turnStartSeq int64, servers []agent.MCPServerTools, failures []MCPFailure) ([]agent.MCPServerTools, error) {
	if servers == nil {
		servers = []agent.MCPServerTools{}
	}
	raw, err := json.Marshal(servers)
	if err != nil {
		return nil, fmt.Errorf("encode MCP listing: %w", err)
	}
	// A server's schemas may hold what jsonb cannot store (\u0000): stored as the log stores
	// event bodies, or every turn of the session would fail on it.
	raw = wire.LogSafeJSON(raw)
	var out []agent.MCPServerTools
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := lockLive(ctx, q, sessionID); err != nil {
			return err
		}
		w, err := q.GetTurnWindow(ctx, sessionID)
		if err != nil {
			return err
		}
		if w.StartSeq != turnStartSeq {
			return ErrTurnMoved
		}
		stored, err := q.PutMCPListing(ctx, sessionID, store.MCPListing{TurnStartSeq: turnStartSeq, Servers: raw}, s.now())
		if err != nil {
			return err
		}
		if !stored {
			out, _, err = turnListing(ctx, q, sessionID, turnStartSeq)
			return err
		}
		// Read back as every later step reads it (jsonb normalizes what it stores).
		if out, _, err = turnListing(ctx, q, sessionID, turnStartSeq); err != nil {
			return err
		}
		if len(failures) == 0 {
			return nil
		}
		bodies := make([]body, 0, len(failures))
		for _, f := range failures {
			typ := wire.SessionErrorMCPConnectionFailed
			if f.Auth {
				typ = wire.SessionErrorMCPAuthFailed
			}
			e := wire.NewSessionErrorBody(typ, f.Message, wire.RetryStatusRetrying)
			e.Error.MCPServerName = &f.Server
			bodies = append(bodies, body{wire.EventSessionError, e})
		}
		evs, err := newEvents(bodies...)
		if err != nil {
			return err
		}
		_, err = q.AppendEvents(ctx, sessionID, evs, s.now())
		return err
	})
	return out, err
}

// ClaimMCPCall records that the MCP call toolUseID is about to be sent to its server; first is
// false when an earlier attempt claimed it, and then the call must not be sent again: result is
// the answer that attempt recorded, or nil when its fate is unknown. A session deleted,
// archived or terminated meanwhile is ErrSessionGone: nothing more is sent for it.
func (s *Service) ClaimMCPCall(ctx context.Context, sessionID, toolUseID string) (first bool, result json.RawMessage, err error) {
	err = s.store.InTx(ctx, func(q *store.Queries) error {
		if _, err := lockLive(ctx, q, sessionID); err != nil {
			return err
		}
		first, result, err = q.ClaimMCPCall(ctx, sessionID, toolUseID, s.now())
		return err
	})
	return first, result, err
}

// RecordMCPResult keeps the answer of a claimed MCP call until it is in the log, so a retry
// whose first attempt got it appends it rather than an unknown outcome.
func (s *Service) RecordMCPResult(ctx context.Context, sessionID, toolUseID string, result json.RawMessage) error {
	return s.store.RecordMCPResult(ctx, sessionID, toolUseID, wire.LogSafeJSON(result), s.now())
}

// ForgetMCPResult drops the answer kept with a call's claim once the answer is in the log.
func (s *Service) ForgetMCPResult(ctx context.Context, sessionID, toolUseID string) error {
	return s.store.ForgetMCPResult(ctx, sessionID, toolUseID)
}

// ErrCallAnswered: the log already holds the answer to the call a step tried to answer (an
// earlier attempt that outlived its heartbeat got there first). The step has nothing left to do.
var ErrCallAnswered = store.ErrCallAnswered
