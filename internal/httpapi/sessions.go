package httpapi

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

var sessionStatuses = []string{wire.SessionStatusRescheduling, wire.SessionStatusRunning, wire.SessionStatusIdle, wire.SessionStatusTerminated}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var p wire.SessionCreateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	sess, err := s.svc.CreateSessionKeyed(r.Context(), workspace(r.Context()), key, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.svc.GetSession(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) updateSession(w http.ResponseWriter, r *http.Request) error {
	var p wire.SessionUpdateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	sess, err := s.svc.UpdateSession(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) archiveSession(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalBody(r); err != nil {
		return err
	}
	sess, err := s.svc.ArchiveSession(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.svc.DeleteSession(r.Context(), workspace(r.Context()), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Deleted{ID: id, Type: "session_deleted"})
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	lp, err := q.listParams("sessions", "desc", 20, 100, true)
	if err != nil {
		return err
	}
	p := sessions.SessionListParams{ListParams: lp, AgentID: q.v.Get("agent_id")}
	if v := q.v.Get("agent_version"); v != "" {
		if p.AgentID == "" {
			return badRequest("agent_version: only allowed together with agent_id")
		}
		if p.AgentVersion, err = strconv.ParseInt(v, 10, 64); err != nil || p.AgentVersion < 1 {
			return badRequest("agent_version: must be an integer of at least 1")
		}
	}
	for _, st := range q.list("statuses") {
		if !slices.Contains(sessionStatuses, st) {
			return badRequest("statuses: " + strconv.Quote(st) + " is not one of rescheduling, running, idle, terminated")
		}
		p.Statuses = append(p.Statuses, st)
	}
	var items []wire.Session
	var more bool
	// No session belongs to a deployment or memory store on this server, so those filters
	// match nothing.
	if q.v.Get("deployment_id") == "" && q.v.Get("memory_store_id") == "" {
		if items, more, err = s.svc.ListSessions(r.Context(), workspace(r.Context()), p); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, keysetPage("sessions", items, more, lp, sessionKey, true))
	return nil
}
