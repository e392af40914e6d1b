package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/sessions"
)

type apiHandler func(w http.ResponseWriter, r *http.Request) error

// apiKey returns the key a request presents (x-api-key, else Authorization: Bearer), or "".
func apiKey(r *http.Request) string {
	if key := r.Header.Get("x-api-key"); key != "" {
		return key
	}
	return bearerToken(r.Header.Get("Authorization"))
}

// authenticated checks, in the hosted service's order (API.md §17): a valid key (x-api-key or
// Authorization: Bearer) else 401, then the managed-agents beta else 404. An admin key
// belongs to no workspace: it is refused here with 403. Then the key's rate limit: 429 with
// retry-after when it is over.
func (s *Server) authenticated(h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.principal(w, r)
		if !ok {
			return
		}
		if !hasBeta(r.Header.Values("anthropic-beta"), betaManagedAgents) {
			writeError(w, r, http.StatusNotFound, "not_found_error", "not found", "")
			return
		}
		if p.Admin {
			writeError(w, r, http.StatusForbidden, "permission_error", "an admin key cannot use the workspace API: use a workspace's key", "")
			return
		}
		if err := s.checkScope(r, p); err != nil {
			s.respondError(w, r, err)
			return
		}
		if err := s.svc.AdmitRequest(r.Context(), p); err != nil && !s.limiterFailed(r, err) {
			s.respondError(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey, p))
		if err := h(w, r); err != nil {
			s.respondError(w, r, err)
		}
	})
}

// limiterFailed reports whether err is the rate limiter failing rather than refusing, and
// logs it: the request then goes on unlimited. The limiter guards the database; when the
// database cannot answer it, the request finds out for itself, and a blip must not turn
// every request into an error that the handler would not have had.
func (s *Server) limiterFailed(r *http.Request, err error) bool {
	var se *sessions.Error
	if errors.As(err, &se) || r.Context().Err() != nil {
		return false
	}
	s.logger.WarnContext(r.Context(), "rate limiter unavailable; request not limited", "request_id", requestID(r.Context()), "error", err)
	return true
}

// principal authenticates the request's key and records it for the access log; on failure
// it has answered 401 (or the error's status) and returns false.
func (s *Server) principal(w http.ResponseWriter, r *http.Request) (sessions.Principal, bool) {
	key := apiKey(r)
	if key == "" {
		writeError(w, r, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
		return sessions.Principal{}, false
	}
	ctx := r.Context()
	if itemRoutes[r.Pattern] {
		ctx = sessions.WithStoppedWork(ctx)
	}
	p, err := s.auth.Authenticate(ctx, key)
	if err != nil {
		if errors.Is(err, sessions.ErrUnknownKey) {
			writeError(w, r, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
			return sessions.Principal{}, false
		}
		s.respondError(w, r, err)
		return sessions.Principal{}, false
	}
	if info := infoOf(r.Context()); info != nil {
		info.keyHint = p.Hint
	}
	return p, true
}

// keyWatch ends a stream when its key stops working: a revocation notice, a reconnect that
// may have missed one, or the key's cached answer going stale (a notice lost without a
// reconnect) closes changed, after which the key is authenticated again; expiry fires at the
// key's end. The stale case costs little with many streams: the Authenticator keeps one timer
// per key, and the streams of a key that check it together share one database read.
type keyWatch struct {
	auth    Authenticator
	keyID   string
	changed <-chan struct{}
	cancel  func()
	expiry  *time.Timer
}

func newKeyWatch(auth Authenticator, p sessions.Principal) *keyWatch {
	kw := &keyWatch{auth: auth, keyID: p.KeyID}
	kw.changed, kw.cancel = auth.WatchKey(p.KeyID)
	kw.expiry = expiryTimer(p.ExpiresAt)
	return kw
}

// expiryTimer fires when a key expires; never for a key without expiry.
func expiryTimer(at *time.Time) *time.Timer {
	if at == nil {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}
	return time.NewTimer(max(time.Until(*at), 0))
}

// keyState is what a recheck found.
type keyState int

const (
	keyValid keyState = iota
	// keyEnded: revoked, expired, or no longer this key.
	keyEnded
	// keyUnknown: the check itself failed (the database did not answer).
	keyUnknown
)

// recheck re-arms the watch, then asks for the key's current state (in that order, so a
// change during the check fires the new watch).
func (kw *keyWatch) recheck(ctx context.Context, key string) keyState {
	kw.cancel()
	kw.changed, kw.cancel = kw.auth.WatchKey(kw.keyID)
	p, err := kw.auth.Authenticate(ctx, key)
	switch {
	case errors.Is(err, sessions.ErrUnknownKey):
		return keyEnded
	case err != nil:
		return keyUnknown
	case p.KeyID != kw.keyID:
		return keyEnded
	}
	kw.expiry.Stop()
	kw.expiry = expiryTimer(p.ExpiresAt)
	return keyValid
}

func (kw *keyWatch) stop() {
	kw.cancel()
	kw.expiry.Stop()
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
