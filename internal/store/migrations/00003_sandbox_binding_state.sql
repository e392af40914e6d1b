-- +goose Up
-- A binding is written pending (provider and the deterministic name the provider's Create is
-- idempotent on) before the sandbox is created, and made ready with the external id Create
-- returned: a create that crashed or timed out is adopted by the retry, never leaked.
-- Bindings from before this migration were written after their create, so they are ready;
-- so is a row inserted without a state (the old insert).
ALTER TABLE sandbox_bindings
    ADD COLUMN state text NOT NULL DEFAULT 'ready' CONSTRAINT sandbox_bindings_state CHECK (state IN ('pending', 'ready')),
    ADD COLUMN name text NOT NULL DEFAULT '',
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(),
    ADD CONSTRAINT sandbox_bindings_ready_has_id CHECK (state = 'pending' OR external_id <> '');

-- +goose Down
-- Forward-only: there is no down migration.
