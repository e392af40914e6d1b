package controllers

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// API is what the reconcilers need of the Managed Agents service; *sessions.Service is the
// implementation, the one the REST API uses too, so a resource and a REST client see the
// same rules.
type API interface {
	EnsureWorkspace(ctx context.Context, name string) (string, error)
	WorkspaceExists(ctx context.Context, id string) (bool, error)

	CreateAgent(ctx context.Context, workspaceID string, p wire.AgentCreateParams) (wire.Agent, error)
	GetAgent(ctx context.Context, workspaceID, id string, version int64) (wire.Agent, error)
	UpdateAgent(ctx context.Context, workspaceID, id string, p wire.AgentUpdateParams) (wire.Agent, error)
	ArchiveAgent(ctx context.Context, workspaceID, id string) (wire.Agent, error)
	ListAgents(ctx context.Context, workspaceID string, p sessions.ListParams) ([]wire.Agent, bool, error)

	CreateEnvironment(ctx context.Context, workspaceID string, p wire.EnvironmentCreateParams) (wire.Environment, error)
	GetEnvironment(ctx context.Context, workspaceID, id string) (wire.Environment, error)
	UpdateEnvironment(ctx context.Context, workspaceID, id string, p wire.EnvironmentUpdateParams) (wire.Environment, error)
	ArchiveEnvironment(ctx context.Context, workspaceID, id string) (wire.Environment, error)
	DeleteEnvironment(ctx context.Context, workspaceID, id string) error
	ListEnvironments(ctx context.Context, workspaceID string, p sessions.ListParams) ([]wire.Environment, bool, error)

	CreateSessionKeyed(ctx context.Context, workspaceID, key string, p wire.SessionCreateParams) (wire.Session, error)
	SessionByKey(ctx context.Context, workspaceID, key string) (wire.Session, bool, error)
	GetSession(ctx context.Context, workspaceID, id string) (wire.Session, error)
	UpdateSession(ctx context.Context, workspaceID, id string, p wire.SessionUpdateParams) (wire.Session, error)
	SendEventsKeyed(ctx context.Context, workspaceID, sessionID, key string, raw []json.RawMessage) ([]wire.Event, error)
	StreamEvents(ctx context.Context, workspaceID, sessionID string, p sessions.EventListParams, sink func(wire.Event) (stop bool, err error)) (bool, error)
	BeginDelete(ctx context.Context, workspaceID, id string) (finished bool, err error)
	SessionDeleted(ctx context.Context, workspaceID, id string) (bool, error)
}

var _ API = (*sessions.Service)(nil)

// apiKind returns the kind of a rule violation the service reported, 0 for any other error
// (the database is down, a bug): those are retried with backoff, rule violations are not
// until the spec changes.
func apiKind(err error) sessions.Kind {
	var e *sessions.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// listPage is how many objects one page of an adoption search reads.
const listPage = 100

// ownedBy reports whether API metadata carries the resource's ownership mark.
func ownedBy(md map[string]string, uid string) bool {
	return uid != "" && md[ownerKey] == uid
}
