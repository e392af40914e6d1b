package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// workerRoutes are the routes an environment key or a session token may call
// (docs/self-hosted-environments.md): the queue's, and the session reads and sends a worker
// makes. Everything else is 403 for them.
var workerRoutes = map[string]bool{
	"GET /v1/environments/{id}/work/poll":                 true,
	"GET /v1/environments/{id}/work/stats":                true,
	"GET /v1/environments/{id}/work":                      true,
	"GET /v1/environments/{id}/work/{work_id}":            true,
	"POST /v1/environments/{id}/work/{work_id}":           true,
	"POST /v1/environments/{id}/work/{work_id}/ack":       true,
	"POST /v1/environments/{id}/work/{work_id}/heartbeat": true,
	"POST /v1/environments/{id}/work/{work_id}/stop":      true,
	"GET /v1/sessions/{id}":                               true,
	"GET /v1/sessions/{id}/events":                        true,
	"POST /v1/sessions/{id}/events":                       true,
	"GET /v1/sessions/{id}/events/stream":                 true,
}

// itemRoutes are a work item's own routes, which the token of an item stopped moments ago
// still reaches (sessions.WithStoppedWork).
var itemRoutes = map[string]bool{
	"GET /v1/environments/{id}/work/{work_id}":            true,
	"POST /v1/environments/{id}/work/{work_id}/heartbeat": true,
	"POST /v1/environments/{id}/work/{work_id}/stop":      true,
}

// sessionRoute reports whether pattern's {id} is a session id.
func sessionRoute(pattern string) bool {
	return strings.HasPrefix(pattern, "GET /v1/sessions/") || strings.HasPrefix(pattern, "POST /v1/sessions/")
}

// workerAnswers are the only events a worker may send: the results of the calls it runs.
var workerAnswers = map[string]bool{wire.EventUserToolResult: true, wire.EventUserCustomToolResult: true}

// checkScope refuses what a confined principal (an environment key, a session token) may not
// do. The work routes check their environment themselves (workqueue); the session routes are
// checked here: a session token reaches its one session, an environment key the sessions of
// its environment.
func (s *Server) checkScope(r *http.Request, p sessions.Principal) error {
	if !p.Scoped() {
		return nil
	}
	if !workerRoutes[r.Pattern] {
		return &sessions.Error{Kind: sessions.KindForbidden, Message: "this key is confined to a self-hosted environment's work queue and the sessions it hands out"}
	}
	if !sessionRoute(r.Pattern) {
		return nil
	}
	id := r.PathValue("id")
	if err := wire.CheckString("id", id); err != nil {
		return badRequest(err.Error()) // before any lookup: the handler's own check comes later
	}
	if p.SessionID != "" {
		if id != p.SessionID {
			return &sessions.Error{Kind: sessions.KindForbidden, Message: fmt.Sprintf("this session token is confined to session %s", p.SessionID)}
		}
		return nil
	}
	env, err := s.svc.SessionEnvironmentID(r.Context(), p.WorkspaceID, id)
	if err != nil {
		return err
	}
	if env != p.EnvironmentID {
		return &sessions.Error{Kind: sessions.KindForbidden, Message: fmt.Sprintf("this key is confined to the sessions of environment %s", p.EnvironmentID)}
	}
	return nil
}

// checkWorkerEvents refuses, for a confined principal, any event but a tool call's result.
func checkWorkerEvents(p sessions.Principal, events []json.RawMessage) error {
	if !p.Scoped() {
		return nil
	}
	for i, raw := range events {
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return badRequest(fmt.Sprintf("events[%d]: must be an object", i))
		}
		if !workerAnswers[ev.Type] {
			return &sessions.Error{Kind: sessions.KindForbidden,
				Message: fmt.Sprintf("events[%d].type: a worker's key may send only user.tool_result and user.custom_tool_result", i)}
		}
	}
	return nil
}
