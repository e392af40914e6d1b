-- +goose Up
-- Self-hosted environments (docs/self-hosted-environments.md). An environment key is an API
-- key confined to one environment: it authorises that environment's work queue and the
-- sessions the queue hands out, nothing else. It lives with the other keys so revocation,
-- rotation, expiry and the key cache work for it unchanged.
ALTER TABLE api_keys ADD COLUMN environment_id text REFERENCES environments (id) ON DELETE CASCADE;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_environment_scope CHECK (environment_id IS NULL OR NOT admin);

-- A work item hands one session (or a healthcheck) of a self-hosted environment to a worker.
-- At most one item per session is live (not stopped): the server queues one when a built-in
-- call of the session waits for a worker and none is live. A claim (poll) issues a session
-- token stored here only as a digest; a reclaim issues a new one and voids the old.
-- last_heartbeat is the lease's version (the expected_last_heartbeat precondition); a claim
-- resets it, so a reclaimed item's old worker fails its next heartbeat with 412.
CREATE TABLE work_items (
    id                  text PRIMARY KEY,
    workspace_id        text NOT NULL REFERENCES workspaces (id),
    environment_id      text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    kind                text NOT NULL CHECK (kind IN ('session', 'healthcheck')),
    session_id          text,
    state               text NOT NULL CHECK (state IN ('queued', 'starting', 'active', 'stopping', 'stopped')),
    metadata            jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL,
    claimed_at          timestamptz,
    acknowledged_at     timestamptz,
    started_at          timestamptz,
    latest_heartbeat_at timestamptz,
    last_heartbeat      text,
    lease_expires_at    timestamptz,
    stop_requested_at   timestamptz,
    stopped_at          timestamptz,
    worker_id           text NOT NULL DEFAULT '',
    -- claim_key_id is the key whose poll claimed the item: its session token works only while
    -- that key does (a revoked environment key ends what it claimed).
    claim_key_id        text,
    claims              integer NOT NULL DEFAULT 0,
    token_hash          bytea UNIQUE,
    CHECK ((kind = 'session') = (session_id IS NOT NULL))
);
CREATE UNIQUE INDEX work_items_live_session ON work_items (session_id) WHERE state <> 'stopped';
CREATE INDEX work_items_claimable ON work_items (environment_id, created_at, id) WHERE state IN ('queued', 'starting', 'active');
CREATE INDEX work_items_environment ON work_items (environment_id, created_at DESC, id);

-- Who polled an environment lately: the queue statistics count workers polling within 30 s.
CREATE TABLE work_pollers (
    environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    worker_id      text NOT NULL,
    polled_at      timestamptz NOT NULL,
    PRIMARY KEY (environment_id, worker_id)
);

-- +goose Down
DROP TABLE work_pollers;
DROP TABLE work_items;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_environment_scope;
ALTER TABLE api_keys DROP COLUMN environment_id;
