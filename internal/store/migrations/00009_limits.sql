-- +goose Up
-- Per-key rate limits and per-workspace quotas (docs/operations.md#rate-limits-and-quotas).
--
-- The request limit of an API key is a GCRA bucket: tat is the key's theoretical arrival
-- time, the instant its bucket is full again. One INSERT … ON CONFLICT DO UPDATE per request
-- checks and moves it, so every API replica shares the limit at one round trip; allowed
-- records whether that statement let the request through (RETURNING sees only the new row).
-- UNLOGGED: the rows are rewritten on every request and worth nothing after a crash (the
-- buckets start full again), so they skip the WAL and are not replicated.
CREATE UNLOGGED TABLE key_request_buckets (
    key_id  text PRIMARY KEY,
    tat     timestamptz NOT NULL,
    allowed boolean NOT NULL
);

-- One row per open SSE stream of a key that has a stream cap. The stream's heartbeat moves
-- expires_at forward; a replica that dies stops renewing, and its streams' rows lapse.
-- UNLOGGED for the same reason: after a crash every stream has reconnected anyway.
CREATE UNLOGGED TABLE stream_leases (
    id         text PRIMARY KEY,
    key_id     text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX stream_leases_key ON stream_leases (key_id, expires_at);

-- The workspace quota on running sessions counts a workspace's active sessions on every
-- send that would start a turn: the few that are running, not the many idle ones.
CREATE INDEX sessions_workspace_active ON sessions (workspace_id)
    WHERE status IN ('running', 'rescheduling');

-- +goose Down
DROP INDEX sessions_workspace_active;
DROP TABLE stream_leases;
DROP TABLE key_request_buckets;
