-- +goose Up
-- API keys become manageable: a label and a visible hint to tell them apart (the secret
-- itself is still stored only as a digest), an optional expiry, revocation, and admin keys,
-- which authorise the admin API and belong to no workspace.
ALTER TABLE api_keys
    ADD COLUMN label      text NOT NULL DEFAULT '',
    ADD COLUMN hint       text NOT NULL DEFAULT '',
    ADD COLUMN admin      boolean NOT NULL DEFAULT false,
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN revoked_at timestamptz,
    ADD COLUMN created_by text NOT NULL DEFAULT '',
    ADD COLUMN ended_by   text NOT NULL DEFAULT '',
    ALTER COLUMN workspace_id DROP NOT NULL,
    ADD CONSTRAINT api_keys_scope CHECK (admin = (workspace_id IS NULL));
CREATE INDEX api_keys_workspace ON api_keys (workspace_id, created_at, id);
-- Every key before this migration came from MANAGED_AGENT_API_KEY (or dev's generated key):
-- mark them so, or a changed configured key would leave them working. Their hint is filled
-- in by the next start that configures them (only the secret's holder can compute it).
UPDATE api_keys SET created_by = 'MANAGED_AGENT_API_KEY', label = 'configured';

-- +goose Down
DROP INDEX api_keys_workspace;
DELETE FROM api_keys WHERE workspace_id IS NULL;
ALTER TABLE api_keys
    DROP CONSTRAINT api_keys_scope,
    ALTER COLUMN workspace_id SET NOT NULL,
    DROP COLUMN ended_by,
    DROP COLUMN created_by,
    DROP COLUMN revoked_at,
    DROP COLUMN expires_at,
    DROP COLUMN admin,
    DROP COLUMN hint,
    DROP COLUMN label;
