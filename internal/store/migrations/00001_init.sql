-- +goose Up
CREATE TABLE workspaces (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored only as SHA-256 digests: a leaked table does not leak usable keys.
CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    key_hash     bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id             text PRIMARY KEY,
    workspace_id   text NOT NULL REFERENCES workspaces (id),
    latest_version bigint NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    archived_at    timestamptz
);
CREATE INDEX agents_workspace_created ON agents (workspace_id, created_at, id);

-- One immutable row per agent version; config is the whole resolved AgentConfig.
CREATE TABLE agent_versions (
    agent_id   text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    version    bigint NOT NULL,
    config     jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, version)
);

CREATE TABLE environments (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    name         text NOT NULL,
    description  text,
    config       jsonb NOT NULL,
    scope        text NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    archived_at  timestamptz,
    UNIQUE (workspace_id, name)
);
CREATE INDEX environments_workspace_created ON environments (workspace_id, created_at, id);

CREATE TABLE sessions (
    id             text PRIMARY KEY,
    workspace_id   text NOT NULL REFERENCES workspaces (id),
    agent_id       text NOT NULL REFERENCES agents (id),
    agent_version  bigint NOT NULL,
    -- RESTRICT: an environment cannot disappear under a session that references it.
    environment_id text NOT NULL REFERENCES environments (id) ON DELETE RESTRICT,
    title          text,
    metadata       jsonb NOT NULL DEFAULT '{}',
    agent          jsonb NOT NULL,
    status         text NOT NULL,
    stop_reason    jsonb,
    usage          jsonb NOT NULL,
    active_seconds double precision NOT NULL DEFAULT 0,
    -- last_seq is the seq of the newest event; appends bump it under the row lock, which
    -- makes each session's log gap-free and totally ordered.
    last_seq       bigint NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    archived_at    timestamptz,
    terminated_at  timestamptz
);
CREATE INDEX sessions_workspace_created ON sessions (workspace_id, created_at, id);
CREATE INDEX sessions_agent ON sessions (agent_id, agent_version);
CREATE INDEX sessions_environment ON sessions (environment_id);

CREATE TABLE events (
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq          bigint NOT NULL,
    id           text NOT NULL UNIQUE,
    type         text NOT NULL,
    body         jsonb NOT NULL,
    processed_at timestamptz,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- A session's sandbox. RESTRICT makes PostgreSQL refuse to delete a session whose sandbox
-- has not been torn down and unbound first.
CREATE TABLE sandbox_bindings (
    session_id  text PRIMARY KEY REFERENCES sessions (id) ON DELETE RESTRICT,
    provider    text NOT NULL,
    external_id text NOT NULL,
    spec_hash   text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
-- Forward-only: there is no down migration.
