-- +goose Up
-- Vaults hold credentials for MCP servers (and environment-variable secrets) that sessions
-- name in vault_ids. Secrets are stored only sealed (AES-256-GCM, internal/secretbox): the
-- sealed column holds the ciphertext, its key id and nonce; auth holds what the API echoes.
CREATE TABLE vaults (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    display_name text NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    archived_at  timestamptz
);
CREATE INDEX vaults_workspace_created ON vaults (workspace_id, created_at, id);

CREATE TABLE vault_credentials (
    id           text PRIMARY KEY,
    vault_id     text NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
    display_name text,
    metadata     jsonb NOT NULL DEFAULT '{}',
    auth_type    text NOT NULL,
    -- match_url is the normalized mcp_server_url (internal/mcpurl); NULL for
    -- environment_variable credentials.
    match_url    text,
    auth         jsonb NOT NULL,
    sealed       bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    archived_at  timestamptz
);
CREATE INDEX vault_credentials_vault_created ON vault_credentials (vault_id, created_at, id);
-- One active credential per MCP server per vault.
CREATE UNIQUE INDEX vault_credentials_active_url ON vault_credentials (vault_id, match_url)
    WHERE archived_at IS NULL AND match_url IS NOT NULL;

-- The vaults a session resolves credentials from, in order. Not a foreign key: deleting a
-- vault leaves the id, and resolution skips vaults that are gone or archived.
ALTER TABLE sessions ADD COLUMN vault_ids text[] NOT NULL DEFAULT '{}';

-- +goose Down
-- Forward-only: there is no down migration.
