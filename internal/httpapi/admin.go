package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// The admin API manages workspaces and API keys. It is ours (the hosted service manages
// them in its console), lives under /v1/admin, needs no beta header, and is authorised only
// by the configured admin key (MANAGED_AGENT_ADMIN_KEY) or a key with the admin flag: never
// by a workspace key (403).

// adminWorkspace and adminKey are the admin API's objects.
type adminWorkspace struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt wire.Time `json:"created_at"`
}

type adminKey struct {
	Type        string  `json:"type"`
	ID          string  `json:"id"`
	WorkspaceID *string `json:"workspace_id"`
	Label       string  `json:"label"`
	Hint        string  `json:"hint"`
	Admin       bool    `json:"admin"`
	// EnvironmentID is set on an environment key (docs/self-hosted-environments.md).
	EnvironmentID *string    `json:"environment_id"`
	CreatedBy     string     `json:"created_by"`
	CreatedAt     wire.Time  `json:"created_at"`
	ExpiresAt     *wire.Time `json:"expires_at"`
	RevokedAt     *wire.Time `json:"revoked_at"`
	// Key is the secret, present only in the response that created it.
	Key string `json:"key,omitempty"`
}

type adminList[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
}

func workspaceJSON(w sessions.Workspace) adminWorkspace {
	return adminWorkspace{Type: "workspace", ID: w.ID, Name: w.Name, CreatedAt: wire.Time(w.CreatedAt)}
}

func keyJSON(k sessions.APIKey) adminKey {
	out := adminKey{Type: "api_key", ID: k.ID, Label: k.Label, Hint: k.Hint, Admin: k.Admin, CreatedBy: k.CreatedBy, CreatedAt: wire.Time(k.CreatedAt)}
	if k.WorkspaceID != "" {
		out.WorkspaceID = &k.WorkspaceID
	}
	if k.EnvironmentID != "" {
		out.EnvironmentID = &k.EnvironmentID
	}
	if k.ExpiresAt != nil {
		t := wire.Time(*k.ExpiresAt)
		out.ExpiresAt = &t
	}
	if k.RevokedAt != nil {
		t := wire.Time(*k.RevokedAt)
		out.RevokedAt = &t
	}
	return out
}

type actorKeyType struct{}

func actorOf(ctx context.Context) sessions.Actor {
	a, _ := ctx.Value(actorKeyType{}).(sessions.Actor)
	return a
}

// adminAuthenticated admits the configured admin key or an admin-flagged key.
func (s *Server) adminAuthenticated(h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKey(r)
		var actor sessions.Actor
		switch {
		case key == "":
			writeError(w, r, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
			return
		case s.adminKeyDigest != nil && subtle.ConstantTimeCompare(digest(key), s.adminKeyDigest) == 1:
			actor = "MANAGED_AGENT_ADMIN_KEY"
			if info := infoOf(r.Context()); info != nil {
				info.keyHint = "MANAGED_AGENT_ADMIN_KEY"
			}
		default:
			p, ok := s.principal(w, r)
			if !ok {
				return
			}
			if !p.Admin {
				writeError(w, r, http.StatusForbidden, "permission_error", "this key cannot use the admin API: use MANAGED_AGENT_ADMIN_KEY or an admin key", "")
				return
			}
			actor = sessions.Actor("key " + p.KeyID + " (" + p.Hint + ")")
		}
		r = r.WithContext(context.WithValue(r.Context(), actorKeyType{}, actor))
		if err := h(w, r); err != nil {
			s.respondError(w, r, err)
		}
	})
}

func digest(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func (s *Server) adminCreateWorkspace(w http.ResponseWriter, r *http.Request) error {
	var p struct {
		Name string `json:"name"`
	}
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	ws, err := s.svc.CreateWorkspace(r.Context(), actorOf(r.Context()), p.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, workspaceJSON(ws))
	return nil
}

func (s *Server) adminListWorkspaces(w http.ResponseWriter, r *http.Request) error {
	list, err := s.svc.ListWorkspaces(r.Context())
	if err != nil {
		return err
	}
	out := adminList[adminWorkspace]{Data: make([]adminWorkspace, 0, len(list))}
	for _, ws := range list {
		out.Data = append(out.Data, workspaceJSON(ws))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) adminCreateKey(w http.ResponseWriter, r *http.Request) error {
	var p struct {
		WorkspaceID string     `json:"workspace_id"`
		Label       string     `json:"label"`
		ExpiresAt   *wire.Time `json:"expires_at"`
		Admin       bool       `json:"admin"`
		// EnvironmentID makes an environment key for a self-hosted environment.
		EnvironmentID string `json:"environment_id"`
	}
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	req := sessions.KeyRequest{WorkspaceID: p.WorkspaceID, Label: p.Label, Admin: p.Admin, EnvironmentID: p.EnvironmentID}
	if p.ExpiresAt != nil {
		t := time.Time(*p.ExpiresAt)
		req.ExpiresAt = &t
	}
	k, err := s.svc.CreateKey(r.Context(), actorOf(r.Context()), req)
	if err != nil {
		return err
	}
	out := keyJSON(k.APIKey)
	out.Key = k.Secret
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) adminListKeys(w http.ResponseWriter, r *http.Request) error {
	list, err := s.svc.ListKeys(r.Context(), newQuery(r.URL).v.Get("workspace_id"))
	if err != nil {
		return err
	}
	out := adminList[adminKey]{Data: make([]adminKey, 0, len(list))}
	for _, k := range list {
		out.Data = append(out.Data, keyJSON(k))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) adminRevokeKey(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptionalBody(r); err != nil {
		return err
	}
	k, err := s.svc.RevokeKey(r.Context(), actorOf(r.Context()), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, keyJSON(k))
	return nil
}

func (s *Server) adminRotateKey(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var p struct {
		// GraceSeconds keeps the old key working that long (0: it ends now).
		GraceSeconds int64 `json:"grace_seconds"`
	}
	if len(body) > 0 {
		if err := wire.CheckText(body); err != nil {
			return badRequest(err.Error())
		}
		if err := wire.DecodeStrict(body, &p); err != nil {
			return badRequest(err.Error())
		}
	}
	if p.GraceSeconds < 0 || p.GraceSeconds > int64(30*24*time.Hour/time.Second) {
		return badRequest("grace_seconds: must be between 0 and 2592000")
	}
	k, old, err := s.svc.RotateKey(r.Context(), actorOf(r.Context()), r.PathValue("id"), time.Duration(p.GraceSeconds)*time.Second)
	if err != nil {
		return err
	}
	out := keyJSON(k.APIKey)
	out.Key = k.Secret
	writeJSON(w, http.StatusOK, struct {
		adminKey
		Previous adminKey `json:"previous"`
	}{out, keyJSON(old)})
	return nil
}
