package httpapi

import (
	"net/http"
	"time"

	"github.com/managed-agents/managed-agents/internal/wire"
)

func (s *Server) createVault(w http.ResponseWriter, r *http.Request) error {
	var p wire.VaultCreateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	v, err := s.svc.CreateVault(r.Context(), workspace(r.Context()), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) getVault(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.GetVault(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) updateVault(w http.ResponseWriter, r *http.Request) error {
	var p wire.VaultUpdateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	v, err := s.svc.UpdateVault(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) archiveVault(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalBody(r); err != nil {
		return err
	}
	v, err := s.svc.ArchiveVault(r.Context(), workspace(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) deleteVault(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.svc.DeleteVault(r.Context(), workspace(r.Context()), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Deleted{ID: id, Type: "vault_deleted"})
	return nil
}

func (s *Server) listVaults(w http.ResponseWriter, r *http.Request) error {
	p, err := newQuery(r.URL).listParams("vaults", "desc", 20, 100, false)
	if err != nil {
		return err
	}
	items, more, err := s.svc.ListVaults(r.Context(), workspace(r.Context()), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keysetPage("vaults", items, more, p, vaultKey, false))
	return nil
}

func (s *Server) createCredential(w http.ResponseWriter, r *http.Request) error {
	var p wire.CredentialCreateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	c, err := s.svc.CreateCredential(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) getCredential(w http.ResponseWriter, r *http.Request) error {
	c, err := s.svc.GetCredential(r.Context(), workspace(r.Context()), r.PathValue("id"), r.PathValue("credential_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) updateCredential(w http.ResponseWriter, r *http.Request) error {
	var p wire.CredentialUpdateParams
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	c, err := s.svc.UpdateCredential(r.Context(), workspace(r.Context()), r.PathValue("id"), r.PathValue("credential_id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) archiveCredential(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalBody(r); err != nil {
		return err
	}
	c, err := s.svc.ArchiveCredential(r.Context(), workspace(r.Context()), r.PathValue("id"), r.PathValue("credential_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteCredential(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("credential_id")
	if err := s.svc.DeleteCredential(r.Context(), workspace(r.Context()), r.PathValue("id"), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.Deleted{ID: id, Type: "vault_credential_deleted"})
	return nil
}

func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request) error {
	p, err := newQuery(r.URL).listParams("credentials", "desc", 20, 100, false)
	if err != nil {
		return err
	}
	items, more, err := s.svc.ListCredentials(r.Context(), workspace(r.Context()), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keysetPage("credentials", items, more, p, credentialKey, false))
	return nil
}

func vaultKey(v wire.Vault) (time.Time, string) { return time.Time(v.CreatedAt), v.ID }

func credentialKey(c wire.Credential) (time.Time, string) { return time.Time(c.CreatedAt), c.ID }
