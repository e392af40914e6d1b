package httpapi

import (
	"net/http"
	"strconv"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) error {
	var p wire.AgentCreateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	a, err := s.svc.CreateAgent(r.Context(), workspace(r.Context()), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	var version int64
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return badRequest("version: must be an integer of at least 1")
		}
		version = n
	}
	a, err := s.svc.GetAgent(r.Context(), workspace(r.Context()), r.PathValue("id"), version)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request) error {
	var p wire.AgentUpdateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	a, err := s.svc.UpdateAgent(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) archiveAgent(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalBody(r); err != nil {
		return err
	}
	a, err := s.svc.ArchiveAgent(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	p, err := newQuery(r.URL).listParams("agents", "desc", 20, 100, false)
	if err != nil {
		return err
	}
	items, more, err := s.svc.ListAgents(r.Context(), workspace(r.Context()), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keysetPage("agents", items, more, p, agentKey, false))
	return nil
}

// listAgentVersions pages newest first by version number.
func (s *Server) listAgentVersions(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r.URL)
	limit, err := q.limit(20, 100)
	if err != nil {
		return err
	}
	c, err := q.pageCursor("agent_versions", "desc")
	if err != nil {
		return err
	}
	var after int64
	if c != nil {
		after = c.Version
	}
	items, more, err := s.svc.ListAgentVersions(r.Context(), workspace(r.Context()), r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	page := wire.Page[wire.Agent]{Data: items}
	if page.Data == nil {
		page.Data = []wire.Agent{}
	}
	if more && len(items) > 0 {
		page.NextPage = cursor{Kind: "agent_versions", Order: "desc", Version: items[len(items)-1].Version}.encode()
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
