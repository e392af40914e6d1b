package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

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
// it was claimed before (by an earlier attempt of the step). A session that no longer exists
// is ErrReferenced.
func (q *Queries) ClaimMCPCall(ctx context.Context, sessionID, toolUseID string, now time.Time) (first bool, err error) {
	tag, err := q.db.Exec(ctx, `INSERT INTO mcp_call_claims (tool_use_id, session_id, claimed_at) VALUES ($1, $2, $3) ON CONFLICT (tool_use_id) DO NOTHING`,
		toolUseID, sessionID, now)
	if err != nil {
		return false, fmt.Errorf("claim MCP call %s: %w", toolUseID, classify(err))
	}
	return tag.RowsAffected() == 1, nil
}
