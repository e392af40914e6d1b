package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrCallAnswered: an append would answer an MCP call that the log already answers (the
// unique index events_one_mcp_result refused it).
var ErrCallAnswered = errors.New("the call already has a result")

const mcpResultIndex = "events_one_mcp_result"

// MCPListing is what a session's MCP servers listed for the turn that starts at TurnStartSeq.
type MCPListing struct {
	TurnStartSeq int64
	Servers      json.RawMessage
}

// GetMCPListing returns the session's latest MCP listing, or ErrNotFound.
func (q *Queries) GetMCPListing(ctx context.Context, sessionID string) (MCPListing, error) {
	var l MCPListing
	err := q.db.QueryRow(ctx, `SELECT turn_start_seq, servers FROM mcp_listings WHERE session_id = $1`, sessionID).
		Scan(&l.TurnStartSeq, &l.Servers)
	if err != nil {
		return MCPListing{}, fmt.Errorf("get MCP listing of %s: %w", sessionID, classify(err))
	}
	return l, nil
}

// PutMCPListing records l unless the session already has a listing for that turn or a later
// one; stored reports whether l was written. The first listing of a turn wins, so two
// attempts of one step converge on one set of tools.
func (q *Queries) PutMCPListing(ctx context.Context, sessionID string, l MCPListing, now time.Time) (stored bool, err error) {
	tag, err := q.db.Exec(ctx, `
		INSERT INTO mcp_listings (session_id, turn_start_seq, servers, listed_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (session_id) DO UPDATE SET turn_start_seq = EXCLUDED.turn_start_seq, servers = EXCLUDED.servers, listed_at = EXCLUDED.listed_at
		WHERE mcp_listings.turn_start_seq < EXCLUDED.turn_start_seq`,
		sessionID, l.TurnStartSeq, l.Servers, now)
	if err != nil {
		return false, fmt.Errorf("put MCP listing of %s: %w", sessionID, classify(err))
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimMCPCall records that the MCP call toolUseID is about to be sent; first is false when
// it was claimed before (by an earlier attempt of the step), and then result is the answer
// that attempt recorded, nil if it recorded none. A session that no longer exists is
// ErrReferenced.
func (q *Queries) ClaimMCPCall(ctx context.Context, sessionID, toolUseID string, now time.Time) (first bool, result json.RawMessage, err error) {
	tag, err := q.db.Exec(ctx, `INSERT INTO mcp_call_claims (tool_use_id, session_id, claimed_at) VALUES ($1, $2, $3) ON CONFLICT (tool_use_id) DO NOTHING`,
		toolUseID, sessionID, now)
	if err != nil {
		return false, nil, fmt.Errorf("claim MCP call %s: %w", toolUseID, classify(err))
	}
	if tag.RowsAffected() == 1 {
		return true, nil, nil
	}
	if err := q.db.QueryRow(ctx, `SELECT result FROM mcp_call_claims WHERE tool_use_id = $1 AND session_id = $2`, toolUseID, sessionID).Scan(&result); err != nil {
		return false, nil, fmt.Errorf("read the claim of MCP call %s: %w", toolUseID, classify(err))
	}
	return false, result, nil
}

// RecordMCPResult keeps the answer of a claimed MCP call (the first answer recorded wins).
func (q *Queries) RecordMCPResult(ctx context.Context, sessionID, toolUseID string, result json.RawMessage, now time.Time) error {
	if _, err := q.db.Exec(ctx, `UPDATE mcp_call_claims SET result = $3, completed_at = $4 WHERE tool_use_id = $1 AND session_id = $2 AND completed_at IS NULL`,
		toolUseID, sessionID, result, now); err != nil {
		return fmt.Errorf("record the result of MCP call %s: %w", toolUseID, classify(err))
	}
	return nil
}

// ForgetMCPResult drops the kept answer of a call whose result is in the log (the claim
// stays: the call is still never sent again), so an answer is not stored twice.
func (q *Queries) ForgetMCPResult(ctx context.Context, sessionID, toolUseID string) error {
	if _, err := q.db.Exec(ctx, `UPDATE mcp_call_claims SET result = NULL WHERE tool_use_id = $1 AND session_id = $2 AND result IS NOT NULL`,
		toolUseID, sessionID); err != nil {
		return fmt.Errorf("forget the result of MCP call %s: %w", toolUseID, classify(err))
	}
	return nil
}
