package sessions

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/store"
)

// ErrUnknownKey is returned for an API key the server does not accept: unknown, revoked or
// expired (one error for all, so a caller learns nothing about keys it does not hold).
var ErrUnknownKey = errors.New("unknown api key")

// Principal is who a request acts as: one API key and what it may reach.
type Principal struct {
	KeyID string
	// WorkspaceID is empty for an admin key.
	WorkspaceID string
	// Hint names the key in logs without revealing it ("sk-ma-…abcd").
	Hint  string
	Admin bool
	// ExpiresAt is when the key stops working, if it ever does.
	ExpiresAt *time.Time
	// EnvironmentID confines an environment key, or a work item's session token, to one
	// self-hosted environment's work queue and the sessions it hands out.
	EnvironmentID string
	// SessionID confines a work item's session token to its one session, and WorkID names
	// that item.
	SessionID, WorkID string
}

// Scoped reports whether the principal is confined to a self-hosted environment.
func (p Principal) Scoped() bool { return p.EnvironmentID != "" }

// Authenticate returns the principal of an API key, or ErrUnknownKey. Accepted keys are
// cached; a revocation reaches every API process through the key cache at once, and one whose
// notice was lost within the cache's TTL (WithKeyCacheTTL). Concurrent reads of one key are
// one database read (KeyCache.fetch).
func (s *Service) Authenticate(ctx context.Context, key string) (Principal, error) {
	if strings.HasPrefix(key, SessionTokenPrefix) {
		// An API key's random part may start with "st-" too: one that is no session token is
		// looked up as a key.
		if p, err := s.authenticateSessionToken(ctx, key); !errors.Is(err, ErrUnknownKey) {
			return p, err
		}
	}
	if p, ok := s.keys.lookup(key, s.now()); ok {
		return p, nil
	}
	gen := s.keys.generation()
	return s.keys.fetch(ctx, key, gen, func(ctx context.Context) (Principal, error) {
		k, err := s.store.KeyBySecret(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, ErrUnknownKey
		}
		if err != nil {
			return Principal{}, err
		}
		p := principalOf(k)
		if !usable(k, s.now()) {
			return Principal{}, ErrUnknownKey
		}
		s.keys.store(key, p, gen)
		return p, nil
	})
}

// SessionTokenPrefix starts every session token a work item's claim issues.
const SessionTokenPrefix = "sk-ma-st-"

// NewSessionToken returns a new session token: the prefix and 256 random bits.
func NewSessionToken() string {
	return SessionTokenPrefix + strings.TrimPrefix(NewKeySecret(), keyPrefix)
}

// authenticateSessionToken returns the principal of a work item's session token: confined to
// its session, for as long as the item is live and not claimed again. It is not cached: an
// item's stop or reclaim voids it at once, and a worker makes a handful of calls a second.
func (s *Service) authenticateSessionToken(ctx context.Context, token string) (Principal, error) {
	w, err := s.store.WorkByToken(ctx, token)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnknownKey
	}
	if err != nil {
		return Principal{}, err
	}
	if !w.Live() && !stoppedWorkAllowed(ctx) {
		// The work is over: the token reaches its session no more.
		return Principal{}, ErrUnknownKey
	}
	return Principal{KeyID: w.ID, WorkspaceID: w.WorkspaceID, Hint: SessionTokenPrefix + "…" + token[len(token)-4:],
		EnvironmentID: w.EnvironmentID, SessionID: w.SessionID, WorkID: w.ID}, nil
}

type stoppedWorkKey struct{}

// WithStoppedWork marks a request to one of a work item's own routes (get, heartbeat, stop):
// the token of an item stopped moments ago still reaches it there, so its worker's last calls
// get the item's answer (lease over, already stopped) instead of a 401.
func WithStoppedWork(ctx context.Context) context.Context {
	return context.WithValue(ctx, stoppedWorkKey{}, true)
}

func stoppedWorkAllowed(ctx context.Context) bool {
	v, _ := ctx.Value(stoppedWorkKey{}).(bool)
	return v
}

// WatchKey returns a channel closed when the key may have changed (revoked, rotated, or a
// notice may have been missed, which includes the key's cached confirmation going stale):
// the watcher then authenticates again. A stream thus checks its key within the same TTL as
// a new request (KeyCache.Watch).
func (s *Service) WatchKey(keyID string) (<-chan struct{}, func()) { return s.keys.Watch(keyID) }

func principalOf(k store.APIKey) Principal {
	return Principal{KeyID: k.ID, WorkspaceID: k.WorkspaceID, Hint: k.Hint, Admin: k.Admin, ExpiresAt: k.ExpiresAt, EnvironmentID: k.EnvironmentID}
}

func usable(k store.APIKey, now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || k.ExpiresAt.After(now))
}

// keyPrefix starts every key the server generates, so a leaked one is recognisable (secret
// scanners match on it).
const keyPrefix = "sk-ma-"

// NewKeySecret returns a new API key: the prefix and 256 random bits.
func NewKeySecret() string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (Go ≥ 1.24)
	return keyPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// generatedHint is the hint of a key NewKeySecret made: its random part may hold dashes, so
// the prefix is known rather than guessed.
func generatedHint(secret string) string { return keyPrefix + "…" + secret[len(secret)-4:] }

// KeyHint returns what may be shown of a configured key: a vendor-style prefix of short
// lowercase words ("sk-ma-", "sk-ant-"; never hex or digits, which would be secret bits of a
// UUID or hex key) and, for a key of at least 32 characters, its last four characters.
func KeyHint(key string) string {
	prefix := hintPrefix.FindString(key)
	if len(key) >= 32 {
		return prefix + "…" + key[len(key)-4:]
	}
	return prefix + "…"
}

// hintPrefix matches a key's public prefix: up to three dash-ended words of 2–4 lowercase
// letters.
var hintPrefix = regexp.MustCompile(`^(?:[a-z]{2,4}-){1,3}`)

// BindConfiguredKey makes key (MANAGED_AGENT_API_KEY) valid in the workspace named name,
// ending the configured key it replaces; it returns the workspace.
func (s *Service) BindConfiguredKey(ctx context.Context, key, name string) (string, error) {
	ws, err := s.store.EnsureAPIKey(ctx, store.NewAPIKey{Secret: key, Label: "configured", Hint: KeyHint(key)}, name)
	if err != nil {
		// With store.ErrKeyEnded the workspace is known too: the caller may run on without the key.
		return ws, fmt.Errorf("register the configured api key: %w", err)
	}
	return ws, nil
}
