-- +goose Up
-- What a session's MCP servers listed for its current turn. The listing is written once per
-- turn (turn_start_seq is the turn's version) by the first step that needs it, and every step
-- of the turn, retries included, offers the model exactly these tools. Only the latest turn's
-- listing is kept: older turns are never planned again, and their calls project from the log.
CREATE TABLE mcp_listings (
    session_id     text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    turn_start_seq bigint NOT NULL,
    servers        jsonb NOT NULL,
    listed_at      timestamptz NOT NULL
);

-- One row per MCP tool call that was sent (or was about to be) to its server. A call is sent
-- only by the step that inserted its row, so a step retried after a crash never sends it
-- again, whether or not the first attempt reached the server. The server's answer is kept
-- here as soon as it arrives, so a retry whose first attempt got the answer but could not
-- append it (a worker stopping, a lost connection) appends that answer instead of an
-- unknown outcome.
CREATE TABLE mcp_call_claims (
    tool_use_id  text PRIMARY KEY,
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    claimed_at   timestamptz NOT NULL,
    result       jsonb,
    completed_at timestamptz
);
CREATE INDEX mcp_call_claims_session ON mcp_call_claims (session_id);

-- At most one agent.mcp_tool_result per call: an attempt that outlived its heartbeat and a
-- retry cannot both answer it.
CREATE UNIQUE INDEX events_one_mcp_result ON events (session_id, (body ->> 'mcp_tool_use_id'))
    WHERE type = 'agent.mcp_tool_result';

-- +goose Down
-- Forward-only: there is no down migration.
