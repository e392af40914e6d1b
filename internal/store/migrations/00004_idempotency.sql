-- +goose Up
-- A session created with an external key (a controller's resource UID, an API client's
-- Idempotency-Key) is created once per workspace and key: the unique index decides between
-- concurrent attempts. request_hash is the digest of the canonical create body, so a reused key
-- with a different body is refused instead of answered with a session it did not ask for.
ALTER TABLE sessions
    ADD COLUMN external_key text,
    ADD COLUMN request_hash text;
CREATE UNIQUE INDEX sessions_workspace_external_key ON sessions (workspace_id, external_key)
    WHERE external_key IS NOT NULL;

-- One row per keyed send of client events: a retried send with the same key returns response
-- (the first send's echoes) and appends nothing. The session's row lock serialises sends, so
-- the first one's row is always visible to a retry; the rows go with their session.
CREATE TABLE event_sends (
    session_id      text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    idempotency_key text NOT NULL,
    request_hash    text NOT NULL,
    response        jsonb NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (session_id, idempotency_key)
);

-- +goose Down
-- Forward-only: there is no down migration.
