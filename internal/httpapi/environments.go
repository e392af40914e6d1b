package httpapi

import (
	"net/http"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	var p wire.EnvironmentCreateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	e, err := s.svc.CreateEnvironment(r.Context(), workspace(r.Context()), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.svc.GetEnvironment(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) updateEnvironment(w http.ResponseWriter, r *http.Request) error {
	var p wire.EnvironmentUpdateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	e, err := s.svc.UpdateEnvironment(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) archiveEnvironment(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalBody(r); err != nil {
		return err
	}
	e, err := s.svc.ArchiveEnvironment(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.svc.DeleteEnvironment(r.Context(), workspace(r.Context()), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Deleted{ID: id, Type: "environment_deleted"})
	return nil
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) error {
	p, err := newQuery(r.URL).listParams("environments", "desc", 20, 100, false)
	if err != nil {
		return err
	}
	items, more, err := s.svc.ListEnvironments(r.Context(), workspace(r.Context()), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keysetPage("environments", items, more, p, environmentKey, false))
	return nil
}
