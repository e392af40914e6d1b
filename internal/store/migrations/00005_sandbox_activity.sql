-- +goose Up
-- Idle sandboxes: last_active_at is the session's last sandbox use (the manager touches it
-- at most about once a minute), stopped says the idle sweep stopped the sandbox (its
-- workspace kept; the next acquisition starts it again), and the state expired marks a
-- sandbox the retention sweep destroyed: the session's next tool call fails as for a
-- sandbox that vanished, and teardown only removes the row.
ALTER TABLE sandbox_bindings
    ADD COLUMN last_active_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN stopped boolean NOT NULL DEFAULT false,
    DROP CONSTRAINT sandbox_bindings_state,
    ADD CONSTRAINT sandbox_bindings_state CHECK (state IN ('pending', 'ready', 'expired'));

-- The sweeps look for ready bindings idle longer than a duration.
CREATE INDEX sandbox_bindings_idle ON sandbox_bindings (last_active_at) WHERE state = 'ready';

-- +goose Down
-- Forward-only: there is no down migration.
