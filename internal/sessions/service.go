package sessions

import (
	"log/slog"
	"sync"
	"time"

	"github.com/managed-agents/managed-agents/internal/secretbox"
	"github.com/managed-agents/managed-agents/internal/store"
)

// ListParams selects one page of a created_at-ordered list.
type ListParams = store.ListParams

// Keyset is a position in such a list.
type Keyset = store.Keyset

// SessionListParams filters the sessions list.
type SessionListParams = store.SessionListParams

// EventListParams selects a page of a session's log.
type EventListParams = store.EventListParams

// Service implements the API's business rules on top of the store.
type Service struct {
	store    *store.Store
	notifier *store.Notifier
	// reads shares the log reads of the streams of one session.
	reads  *sharedReads
	logger *slog.Logger
	now    func() time.Time
	runner Runner
	// vaultKeys seals credential secrets; empty, credentials cannot be created.
	vaultKeys *secretbox.Keyring
	// wakes delivers wake-ups to runner in the background (runner.go); made on first use so
	// the constructor stays as it is.
	wakesOnce sync.Once
	wakes     *Waker
	// keys caches accepted API keys; the process's Listener feeds it revocations.
	keys *KeyCache
	// limits are the rate limits and quotas (limits.go); zero, nothing is limited.
	limits Limits
}

// Option configures a Service at construction.
type Option func(*Service)

// WithRunner makes sessions run: committed client events wake r. Without it the API still
// accepts events; they stay queued until a worker's sweep finds them.
func WithRunner(r Runner) Option { return func(s *Service) { s.runner = r } }

// WithVaultKeys sets the keyring that seals vault credential secrets. Without one, creating
// a credential (or giving one a new secret) is refused with a 400 that says so.
func WithVaultKeys(kr *secretbox.Keyring) Option { return func(s *Service) { s.vaultKeys = kr } }

// WithKeyCacheTTL sets how long an accepted API key is trusted without asking the database:
// the bound within which a revocation whose notice was lost refuses new requests and ends
// open streams. Zero or less keeps the default, a minute (keyCacheTTL).
func WithKeyCacheTTL(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.keys.ttl = d
		}
	}
}

// Keys is the API key cache: give it to the process's Listener for store.TopicKeys so that
// revoked keys stop working at once.
func (s *Service) Keys() *KeyCache { return s.keys }

// New returns a service. The notifier feeds live streams.
func New(st *store.Store, notifier *store.Notifier, logger *slog.Logger, opts ...Option) *Service {
	s := &Service{store: st, notifier: notifier, reads: newSharedReads(st), logger: logger, now: func() time.Time {
		// Microseconds: what PostgreSQL keeps, so echoed and re-read timestamps agree.
		return time.Now().UTC().Truncate(time.Microsecond)
	}, keys: newKeyCache()}
	for _, o := range opts {
		o(s)
	}
	return s
}
