-- +goose Up
-- Where the session's current (or latest) turn starts in the log, and the session's usage
-- before that turn, so each step of the turn engine reads only the turn, not the whole log.
-- 0 / NULL (sessions from before this migration): the turn is read from the log's start with
-- zero base usage, which is what the engine did before.
ALTER TABLE sessions
    ADD COLUMN turn_start_seq  bigint NOT NULL DEFAULT 0,
    ADD COLUMN turn_base_usage jsonb;

-- Queued client events are read with every turn, wherever they are in the log.
CREATE INDEX events_queued ON events (session_id, seq) WHERE processed_at IS NULL;

-- +goose Down
-- Forward-only: there is no down migration.
