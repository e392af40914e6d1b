package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sessions"
)

type apiHandler func(w http.ResponseWriter, r *http.Request) error

// authenticated checks, in the hosted service's order (API.md §17): a valid key (x-api-key or
// Authorization: Bearer) else 401, then the managed-agents beta else 404.
func (s *Server) authenticated(h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		if key == "" {
			key = bearerToken(r.Header.Get("Authorization"))
		}
		if key == "" {
			writeError(w, r, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
			return
		}
		ws, err := s.auth.Authenticate(r.Context(), key)
		if err != nil {
			if errors.Is(err, sessions.ErrUnknownKey) {
				writeError(w, r, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
				return
			}
			s.respondError(w, r, err)
			return
		}
		if !hasBeta(r.Header.Values("anthropic-beta"), betaManagedAgents) {
			writeError(w, r, http.StatusNotFound, "not_found_error", "not found", "")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), workspaceKey, ws))
		if err := h(w, r); err != nil {
			s.respondError(w, r, err)
		}
	})
}

// hasBeta looks for want in anthropic-beta values, which may be repeated headers each
// holding a comma-separated list.
func hasBeta(values []string, want string) bool {
	for _, v := range values {
		for b := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(b) == want {
				return true
			}
		}
	}
	return false
}

// bearerToken returns the credentials of an Authorization: Bearer header, or "". The scheme
// name is case-insensitive (RFC 9110 §11.1), so "bearer" from hand-written clients counts too.
func bearerToken(header string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
